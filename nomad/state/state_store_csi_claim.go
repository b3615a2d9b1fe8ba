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

func updateCSIVolumeClaimsTxn(txn *writeTxn, updates []*structs.CSIVolumeClaimUpdate, ts int64) error {
	for _, u := range updates {
		if err := updateCSIVolumeClaimTxn(txn, u, ts); err != nil {
			return err
		}
	}
	return nil
}

func updateCSIVolumeClaimTxn(txn *writeTxn, u *structs.CSIVolumeClaimUpdate, ts int64) error {
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
	vol, err := volumeTxn(txn, ns, u.VolumeID)
	if err != nil {
		return err
	}
	if vol == nil {
		return structs.NewError(structs.CodeNotFound,
			"claiming volume %q for alloc %s: volume not found in namespace %q", u.VolumeID, u.Claim.AllocID, ns)
	}

	allocID := u.Claim.AllocID
	existing := vol.Claims[allocID]
	claim := u.Claim.Copy()
	claim.ModifyTime = ts
	claim.ModifyIndex = txn.index

	v := vol.Copy()
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
		claim.CreateIndex = txn.index
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

	claim.History = claimHistory(existing, claim, ts, txn.index)
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
	v.ModifyIndex = txn.index
	if err := txn.Insert(TableCSIVolumes, v); err != nil {
		return fmt.Errorf("claiming volume %q for alloc %s: %w", v.ID, allocID, err)
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
