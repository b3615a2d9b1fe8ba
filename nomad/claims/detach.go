package claims

import (
	"fmt"
	"time"

	"github.com/berth-io/berth/nomad/structs"
)

// DetachKind is what an operator's `volume detach` does to one claim.
type DetachKind int

const (
	// DetachBlocked: the claim cannot be released yet; Reason says why
	// and what to do.
	DetachBlocked DetachKind = iota
	// DetachRelease: the claim is on its way (or free to go): run a
	// release pass now, ignoring backoff.
	DetachRelease
	// DetachWrite: write Claim (a step the operator's word allows), then
	// run a release pass.
	DetachWrite
)

func (k DetachKind) String() string {
	switch k {
	case DetachBlocked:
		return "blocked"
	case DetachRelease:
		return "release"
	case DetachWrite:
		return "write"
	}
	return fmt.Sprintf("detach(%d)", int(k))
}

// DetachAction is Detach's answer for one claim.
type DetachAction struct {
	Kind   DetachKind
	Claim  *structs.CSIVolumeClaim // for DetachWrite
	Reason string
}

// Release reasons recorded when an operator's detach moved a claim.
const (
	ReasonOperatorSkipped = "detach by operator: the plugin does not implement the step"
	ReasonOperatorResumed = "detach by operator: step retried"
)

// Detach decides what `volume detach` (force: `-force`) does to claim, a
// live claim of vol on the node being detached, given its alloc and node
// (nil when gone) and the plugin's profile now; grace is Next's.
//
//   - A NeedsOperator claim is resumed at the step it stopped at (the
//     operator fixed the plugin, or wants one more try), unless the plugin
//     said it does not implement that step, or force is given: then the
//     step is skipped (nothing can be undone through it) and the claim
//     moves on towards freed.
//   - Without force, any other claim must be releasing by itself (Next
//     says so); otherwise the answer names what it waits for.
//   - With force, a claim whose alloc no longer runs, or whose node is
//     down or gone, has its node side marked done; a claim of an alloc
//     that runs on a live node is never forced.
func Detach(vol *structs.CSIVolume, claim *structs.CSIVolumeClaim, alloc *structs.Allocation, node *structs.Node,
	prof Profile, force bool, grace time.Duration, now time.Time) DetachAction {
	if claim.Step == structs.CSIClaimNeedsOperator {
		c := claim.Copy()
		c.Attempts, c.NextRetry = 0, 0
		if !claim.Unsupported && !force {
			c.Step = claim.BlockedStep
			c.LastError = ""
			if c.Step == "" {
				c.Step = structs.CSIClaimNodeDetached
			}
			c.BlockedStep = ""
			return DetachAction{Kind: DetachWrite, Claim: c, Reason: fmt.Sprintf(
				"retrying step %s of alloc %s's claim (last error: %s)", claim.BlockedStep, claim.AllocID, claim.LastError)}
		}
		switch claim.BlockedStep {
		case structs.CSIClaimTaken:
			c.Step = structs.CSIClaimNodeDetached
		default: // Reserved, NodeDetached: the controller side is what failed
			c.Step = structs.CSIClaimControllerDetached
		}
		c.BlockedStep, c.Unsupported = "", false
		if c.ReleaseReason == "" {
			c.ReleaseReason = ReasonOperatorSkipped
			if force && !claim.Unsupported {
				c.ReleaseReason = ReasonDetachForce
			}
		}
		return DetachAction{Kind: DetachWrite, Claim: c, Reason: fmt.Sprintf(
			"skipping step %s of alloc %s's claim on the operator's word (%s)", claim.BlockedStep, claim.AllocID, claim.LastError)}
	}
	if !force {
		// A claim that only waits out an unpublish that may still run
		// (UnpublishUntil) is on its way: the pass frees it after that.
		act := next(vol, claim, alloc, node, prof, grace, now)
		if act.Releasing() {
			return DetachAction{Kind: DetachRelease, Reason: act.Reason}
		}
		return DetachAction{Kind: DetachBlocked, Reason: act.Reason}
	}
	if claim.Step != structs.CSIClaimReserved && claim.Step != structs.CSIClaimTaken {
		return DetachAction{Kind: DetachRelease, Reason: fmt.Sprintf("alloc %s's claim is already releasing (%s)", claim.AllocID, claim.Step)}
	}
	nodeUp := node != nil && node.Status != structs.NodeStatusDown
	if nodeUp && alloc != nil && !alloc.ClientTerminalStatus() {
		return DetachAction{Kind: DetachBlocked, Reason: fmt.Sprintf(
			"alloc %s is %s on node %s, which is %s", claim.AllocID, alloc.ClientStatus, claim.NodeID, node.Status)}
	}
	c := claim.Copy()
	c.Step = structs.CSIClaimNodeDetached
	c.LastError, c.Attempts, c.NextRetry = "", 0, 0
	if c.ReleaseReason == "" {
		c.ReleaseReason = ReasonDetachForce
	}
	return DetachAction{Kind: DetachWrite, Claim: c, Reason: fmt.Sprintf("forcing the node side of alloc %s's claim done", claim.AllocID)}
}
