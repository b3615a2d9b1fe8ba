package state

import (
	"slices"

	"github.com/berth-io/berth/nomad/structs"
)

// claimHistory is the timeline of claim, about to be written over
// existing (nil for a new claim): existing's history, plus one entry when
// the step, the error or the attempts changed, capped at
// structs.MaxClaimHistory (the oldest entries go). Writers never send a
// history; only the store writes it, at the leader's time ts, so every
// server holds the same one.
func claimHistory(existing, claim *structs.CSIVolumeClaim, ts int64, index uint64) []structs.CSIClaimTransition {
	var prev []structs.CSIClaimTransition
	var from structs.CSIClaimStep
	if existing != nil {
		prev, from = existing.History, existing.Step
		if existing.Step == claim.Step && existing.LastError == claim.LastError && existing.Attempts == claim.Attempts {
			return prev // stored values are never mutated: sharing is safe
		}
	}
	out := append(slices.Clip(prev), structs.CSIClaimTransition{
		From: from, To: claim.Step, Time: ts, Index: index,
		Error: claim.LastError, Attempts: claim.Attempts, Reason: claim.ReleaseReason,
	})
	if n := len(out); n > structs.MaxClaimHistory {
		out = slices.Clone(out[n-structs.MaxClaimHistory:])
	}
	return out
}
