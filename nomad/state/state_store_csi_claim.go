package state

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/berth-io/berth/nomad/structs"
)

// The claim state machine as the store applies it. Each Raft entry sets a
// claim to the step its update names. nomad/claims decides the steps; the
// store keeps guarantee 1 of DESIGN.md §4 ("never more claims than the
// access mode allows") and refuses any step the protocol does not allow
// from the stored one (structs.CSIClaimStep.CanMoveTo), so no writer can
// move a released claim back into use or skip the release:
//
//	update for an alloc with no live claim:
//	  Reserved, Taken          ──► ClaimConflict? ──► conflict: whole write fails
//	                                     │ ok
//	                                     ▼
//	                              Claims[alloc] = claim
//	  NodeDetached,
//	  ControllerDetached, Freed ──► no-op (already freed: a retried release)
//
//	update for an alloc with a live claim (no conflict re-check):
//	  Reserved … ControllerDetached ──► Claims[alloc] = claim
//	  Freed                         ──► delete Claims[alloc]; append to
//	                                    PastClaims (newest last, at most
//	                                    structs.MaxPastClaims)
//
// After each update the volume's AccessMode and AttachmentMode are those of
// its oldest live claim, and empty when it has none.

// UpdateCSIVolumeClaims applies claim transitions in one write, in order,
// at the leader's time ts. An unknown volume fails the write with
// CodeNotFound naming it; a conflicting new claim fails it with the
// *structs.Error of CSIVolume.ClaimConflict (CodeNotReady), which names the
// claim that blocks it.
func (s *StateStore) UpdateCSIVolumeClaims(index uint64, updates []*structs.CSIVolumeClaimUpdate, ts int64) error {
	txn := s.writeTxn(index)
	defer txn.Abort()
	if err := updateCSIVolumeClaimsTxn(txn, updates, ts); err != nil {
		return err
	}
	return txn.commit()
}

// UpdateCSIVolumeClaimGroups applies several independent groups of claim
// transitions in one write at index (one Raft entry carrying the writes
// of concurrent callers). Each group is all or nothing, exactly as one
// UpdateCSIVolumeClaims of it would be, and sees the groups before it; a
// group the store refuses leaves the others applied. It returns each
// group's error (nil: applied), or an error for the whole write when it
// could not be committed.
//
// All groups commit in one transaction rather than one each: two commits
// at the same index would wake a blocking query after the first, answer
// it with that index, and hide the second's changes from its next query
// (which waits for a higher index).
func (s *StateStore) UpdateCSIVolumeClaimGroups(index uint64, groups [][]*structs.CSIVolumeClaimUpdate, ts int64) ([]error, error) {
	txn := s.writeTxn(index)
	defer txn.Abort()
	errs := make([]error, len(groups))
	applied := false
	for i, g := range groups {
		errs[i] = updateCSIVolumeClaimsTxn(txn, g, ts)
		applied = applied || errs[i] == nil
	}
	if !applied {
		return errs, nil
	}
	if err := txn.commit(); err != nil {
		return nil, err
	}
	return errs, nil
}

// updateCSIVolumeClaimsTxn applies updates to copies of their volumes and
// writes those to txn only when every update passed: a refused update
// leaves txn as it found it.
func updateCSIVolumeClaimsTxn(txn *writeTxn, updates []*structs.CSIVolumeClaimUpdate, ts int64) error {
	st := claimStage{txn: txn}
	for _, u := range updates {
		if err := st.update(u, ts); err != nil {
			return err
		}
	}
	for _, v := range st.changed {
		if err := txn.Insert(TableCSIVolumes, v); err != nil {
			return fmt.Errorf("claiming volume %q: %w", v.ID, err)
		}
	}
	return nil
}

// claimStage holds the copies of the volumes one group of claim updates
// reads, until the group passed; changed lists those an update changed,
// in the order of their first change (an update that is a no-op, such as
// a retried release, writes nothing).
type claimStage struct {
	txn     *writeTxn
	vols    map[[2]string]*structs.CSIVolume // {namespace, ID} → copy
	changed []*structs.CSIVolume
	dirty   map[*structs.CSIVolume]bool // in changed
}

// volume returns the group's copy of a volume, copying the stored one on
// first use; nil when there is none.
func (st *claimStage) volume(ns, id string) (*structs.CSIVolume, error) {
	k := [2]string{ns, id}
	if v, ok := st.vols[k]; ok {
		return v, nil
	}
	stored, err := volumeTxn(st.txn, ns, id)
	if err != nil || stored == nil {
		return nil, err
	}
	v := stored.Copy()
	if st.vols == nil {
		st.vols = make(map[[2]string]*structs.CSIVolume)
	}
	st.vols[k] = v
	return v, nil
}

func (st *claimStage) update(u *structs.CSIVolumeClaimUpdate, ts int64) error {
	if u == nil {
		return nil
	}
	ns := u.Namespace
	if ns == "" {
		ns = structs.DefaultNamespace
	}
	if u.Claim == nil || u.Claim.AllocID == "" {
		return structs.NewError(structs.CodeInvalid, "claiming volume %q: claim without alloc ID", u.VolumeID)
	}
	v, err := st.volume(ns, u.VolumeID)
	if err != nil {
		return err
	}
	if v == nil {
		return structs.NewError(structs.CodeNotFound,
			"claiming volume %q for alloc %s: volume not found in namespace %q", u.VolumeID, u.Claim.AllocID, ns)
	}

	allocID := u.Claim.AllocID
	existing := v.Claims[allocID]
	claim := u.Claim.Copy()
	claim.ModifyTime = ts
	claim.ModifyIndex = st.txn.index

	if existing == nil {
		switch claim.Step {
		case structs.CSIClaimReserved, structs.CSIClaimTaken:
		case structs.CSIClaimNodeDetached, structs.CSIClaimControllerDetached, structs.CSIClaimFreed:
			return nil // released before: nothing left to do
		case structs.CSIClaimNeedsOperator:
			return nil // released before (by an operator): nothing left to do
		default:
			return structs.NewError(structs.CodeInvalid,
				"claiming volume %q for alloc %s: unknown claim step %q", u.VolumeID, allocID, claim.Step)
		}
		if cerr := v.ClaimConflict(allocID, claim.NodeID, claim.Mode, claim.AccessMode); cerr != nil {
			return cerr
		}
		claim.CreateTime = ts
		claim.CreateIndex = st.txn.index
	} else {
		if !existing.Step.CanMoveTo(claim.Step) {
			if claim.Step == structs.CSIClaimReserved {
				// A plan re-reserving an alloc's claim that already went
				// further (a replayed plan, an in-place update): the claim
				// stands as it is.
				return nil
			}
			return structs.NewError(structs.CodeConflict,
				"claim of alloc %s on volume %q cannot move from step %s to step %s", allocID, u.VolumeID, existing.Step, claim.Step)
		}
		fillClaimIdentity(claim, existing)
		claim.CreateTime = existing.CreateTime
		claim.CreateIndex = existing.CreateIndex
	}

	claim.History = claimHistory(existing, claim, ts, st.txn.index)
	if claim.Step == structs.CSIClaimFreed {
		delete(v.Claims, allocID)
		v.PastClaims = append(v.PastClaims, claim)
		if n := len(v.PastClaims); n > structs.MaxPastClaims {
			v.PastClaims = slices.Clone(v.PastClaims[n-structs.MaxPastClaims:])
		}
	} else {
		if v.Claims == nil {
			v.Claims = make(map[string]*structs.CSIVolumeClaim)
		}
		v.Claims[allocID] = claim
	}
	setClaimModes(v)
	v.ModifyIndex = st.txn.index
	if !st.dirty[v] {
		if st.dirty == nil {
			st.dirty = make(map[*structs.CSIVolume]bool)
		}
		st.dirty[v] = true
		st.changed = append(st.changed, v)
	}
	return nil
}

// fillClaimIdentity fills the fields that identify a claim, when an update
// of it leaves them empty, from the stored claim: a release step written
// without the node ID would otherwise drop the volume from the node index
// and lose what ControllerUnpublish needs.
func fillClaimIdentity(c, stored *structs.CSIVolumeClaim) {
	if c.JobID == "" {
		c.JobID = stored.JobID
	}
	if c.NodeID == "" {
		c.NodeID = stored.NodeID
	}
	if c.ExternalNodeID == "" {
		c.ExternalNodeID = stored.ExternalNodeID
	}
	if c.Mode == "" {
		c.Mode = stored.Mode
	}
	if c.AccessMode == "" {
		c.AccessMode = stored.AccessMode
	}
	if c.AttachmentMode == "" {
		c.AttachmentMode = stored.AttachmentMode
	}
	if c.PublishContext == nil {
		c.PublishContext = maps.Clone(stored.PublishContext)
	}
}

// setClaimModes sets the volume's access and attachment mode from its
// oldest live claim that names one, or clears them when no claim is left.
func setClaimModes(v *structs.CSIVolume) {
	v.AccessMode, v.AttachmentMode = "", ""
	claims := v.LiveClaims() // sorted by alloc ID
	slices.SortStableFunc(claims, func(a, b *structs.CSIVolumeClaim) int {
		return cmp.Compare(a.CreateIndex, b.CreateIndex)
	})
	for _, c := range claims {
		if c.AccessMode != "" {
			v.AccessMode, v.AttachmentMode = c.AccessMode, c.AttachmentMode
			return
		}
	}
}
