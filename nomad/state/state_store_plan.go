package state

import (
	"fmt"

	"github.com/berth-io/berth/nomad/structs"
)

// UpsertPlanResults commits a scheduler plan in one write, in this order:
//
//  1. AllocsStopped: desired status (and, for lost allocs, client status)
//     on a copy of each stored alloc; unknown IDs are skipped.
//  2. AllocsUpdated: new allocs get CreateIndex, AllocModifyIndex, client
//     status pending and CreateTime = req.Timestamp; updated allocs keep
//     CreateIndex, CreateTime and every client-owned field. An alloc
//     without a Job gets the stored job. A new alloc that replaces
//     another (PreviousAllocation) sets that one's NextAllocation.
//  3. CSIClaims: through the claim state machine (UpdateCSIVolumeClaims);
//     a reservation that conflicts fails the whole plan, so a placement
//     and its claim land together or not at all.
//  4. Evals.
func (s *StateStore) UpsertPlanResults(index uint64, req *structs.ApplyPlanResultsRequest) error {
	txn := s.writeTxn(index)
	defer txn.Abort()
	if err := upsertPlanResultsTxn(txn, req); err != nil {
		return err
	}
	return txn.commit()
}

func upsertPlanResultsTxn(txn *writeTxn, req *structs.ApplyPlanResultsRequest) error {
	for _, stop := range req.AllocsStopped {
		if err := stopAllocTxn(txn, stop, req.Timestamp); err != nil {
			return err
		}
	}
	jobs := map[*structs.Job]*structs.Job{} // caller's job → stored copy
	for _, alloc := range req.AllocsUpdated {
		if err := upsertPlanAllocTxn(txn, alloc, req.Timestamp, jobs); err != nil {
			return err
		}
	}
	if err := updateCSIVolumeClaimsTxn(txn, req.CSIClaims, req.Timestamp); err != nil {
		return err
	}
	return upsertEvalsTxn(txn, req.Evals)
}

func stopAllocTxn(txn *writeTxn, stop *structs.AllocStopUpdate, ts int64) error {
	if stop == nil {
		return nil
	}
	existing, err := allocTxn(txn, stop.AllocID)
	if err != nil || existing == nil {
		return err
	}
	a := existing.Copy()
	a.DesiredStatus = stop.DesiredStatus
	if a.DesiredStatus == "" {
		a.DesiredStatus = structs.AllocDesiredStatusStop
	}
	a.DesiredDescription = stop.DesiredDescription
	if stop.ClientStatus != "" {
		a.ClientStatus = stop.ClientStatus
	}
	if ts != 0 {
		a.ModifyTime = ts
	}
	a.AllocModifyIndex = txn.index
	a.ModifyIndex = txn.index
	if err := txn.Insert(TableAllocs, a); err != nil {
		return fmt.Errorf("stopping alloc %q: %w", a.ID, err)
	}
	txn.touchJob(a.Namespace, a.JobID)
	return nil
}

// linkPreviousTxn sets NextAllocation on the alloc a new alloc a replaces
// (a.PreviousAllocation), so each side of a replacement names the other.
// A previous alloc already gone (GC) is skipped.
func linkPreviousTxn(txn *writeTxn, a *structs.Allocation) error {
	if a.PreviousAllocation == "" {
		return nil
	}
	prev, err := allocTxn(txn, a.PreviousAllocation)
	if err != nil || prev == nil || prev.NextAllocation == a.ID {
		return err
	}
	p := prev.Copy()
	p.NextAllocation = a.ID
	p.ModifyIndex = txn.index
	if err := txn.Insert(TableAllocs, p); err != nil {
		return fmt.Errorf("linking alloc %q to its replacement %q: %w", p.ID, a.ID, err)
	}
	return nil
}

func upsertPlanAllocTxn(txn *writeTxn, alloc *structs.Allocation, ts int64, jobs map[*structs.Job]*structs.Job) error {
	if alloc == nil {
		return nil
	}
	if alloc.ID == "" {
		return structs.NewError(structs.CodeInvalid, "applying plan: alloc without ID")
	}
	a := alloc.Copy()
	if a.Namespace == "" {
		a.Namespace = structs.DefaultNamespace
	}
	// Allocation.Copy shares Job; never store the caller's pointer.
	switch {
	case alloc.Job == nil:
		job, err := jobTxn(txn, a.Namespace, a.JobID)
		if err != nil {
			return err
		}
		a.Job = job
	case jobs[alloc.Job] != nil:
		a.Job = jobs[alloc.Job]
	default:
		// The scheduler places from a snapshot, so the plan's job is
		// usually the stored row itself: immutable, shared as it is.
		stored, err := jobTxn(txn, a.Namespace, a.JobID)
		if err != nil {
			return err
		}
		if stored == alloc.Job {
			a.Job = stored
		} else {
			a.Job = alloc.Job.Copy()
		}
		jobs[alloc.Job] = a.Job
	}

	existing, err := allocTxn(txn, a.ID)
	if err != nil {
		return err
	}
	if existing != nil {
		a.CreateIndex = existing.CreateIndex
		a.CreateTime = existing.CreateTime
		// The client owns these; a plan never rewinds them. Stored
		// objects are immutable, so sharing is safe.
		a.ClientStatus = existing.ClientStatus
		a.ClientDescription = existing.ClientDescription
		a.TaskStates = existing.TaskStates
		a.TasksExited = existing.TasksExited
	} else {
		a.CreateIndex = txn.index
		if err := linkPreviousTxn(txn, a); err != nil {
			return err
		}
		if a.ClientStatus == "" {
			a.ClientStatus = structs.AllocClientStatusPending
		}
		if a.DesiredStatus == "" {
			a.DesiredStatus = structs.AllocDesiredStatusRun
		}
		if a.CreateTime == 0 {
			a.CreateTime = ts
		}
	}
	if ts != 0 {
		a.ModifyTime = ts
	}
	a.AllocModifyIndex = txn.index
	a.ModifyIndex = txn.index
	if err := txn.Insert(TableAllocs, a); err != nil {
		return fmt.Errorf("upserting alloc %q: %w", a.ID, err)
	}
	txn.touchJobLive(a)
	return nil
}
