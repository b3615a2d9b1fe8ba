package claims

import (
	"time"

	"github.com/berth-io/berth/nomad/structs"
)

// Unpublish is what the servers write, in one Raft entry, when the client
// of claim's node reports the node side done (its Unpublish RPC) for a
// claim that is Reserved or Taken: NodeDetached, and when Next would free
// the claim from there at once — nothing to controller-unpublish (a
// node-only plugin, a controller that does not attach, a claim never
// controller-published, or another claim still using the volume on that
// node) — ControllerDetached and freed in the same entry: one commit
// instead of two for every release that needs no controller. A claim that
// needs ControllerUnpublish stops at NodeDetached; the volumewatcher
// takes it from there. The claims returned are copies, in order; next is
// what Next decides for the claim at NodeDetached (Free when the entry
// frees it). When it is ControllerUnpublish, the caller may write the
// call's deadline (UnpublishUntil) on the NodeDetached claim in the same
// entry, and spare the watcher a write of its own before the call.
func Unpublish(vol *structs.CSIVolume, claim *structs.CSIVolumeClaim, prof Profile, now time.Time) (steps []*structs.CSIVolumeClaim, next ActionKind) {
	detached := Stepped(claim, structs.CSIClaimNodeDetached, "")
	v := *vol // Next sees the claim at NodeDetached
	v.Claims = make(map[string]*structs.CSIVolumeClaim, len(vol.Claims))
	for id, c := range vol.Claims {
		v.Claims[id] = c
	}
	v.Claims[claim.AllocID] = detached
	// Next decides a NodeDetached claim from the volume and the profile
	// alone: the alloc, the node and the grace no longer matter.
	act := Next(&v, detached, nil, nil, prof, 0, now)
	if act.Kind != Free {
		return []*structs.CSIVolumeClaim{detached}, act.Kind
	}
	return []*structs.CSIVolumeClaim{
		detached,
		Stepped(detached, structs.CSIClaimControllerDetached, act.ReleaseReason),
		Stepped(detached, structs.CSIClaimFreed, act.ReleaseReason),
	}, Free
}

// Stepped is claim moved to step, as a copy. A new step starts its own
// bookkeeping (no retry pending; NodeDetached also clears the last error
// and attempts); the release reason stays the first one given.
func Stepped(claim *structs.CSIVolumeClaim, step structs.CSIClaimStep, releaseReason string) *structs.CSIVolumeClaim {
	c := claim.Copy()
	c.Step = step
	c.NextRetry = 0
	if step == structs.CSIClaimNodeDetached {
		c.LastError, c.Attempts = "", 0
	}
	if c.ReleaseReason == "" {
		c.ReleaseReason = releaseReason
	}
	return c
}
