package claims

import (
	"fmt"
	"time"

	"github.com/berth-io/berth/helper/simbug"
	"github.com/berth-io/berth/nomad/structs"
)

// ActionKind is what to do next for one claim.
type ActionKind int

const (
	// None: the claim is in use (or reserved for an alloc that will use
	// it); nothing to release.
	None ActionKind = iota
	// Wait: the claim's alloc has stopped, but its release waits on
	// something outside the servers: the client's unpublish, or a down
	// node's disconnect deadline (Action.At).
	Wait
	// ControllerUnpublish: detach the volume from the claim's node through
	// the plugin's controller, then free the claim.
	ControllerUnpublish
	// MarkNodeDetached: the node side is done (or can no longer matter);
	// checkpoint NodeDetached.
	MarkNodeDetached
	// Free: move the claim to the volume's past claims.
	Free
	// RetryAfter: a controller call failed; try again at Action.At.
	RetryAfter
	// NodeDetach: ask the client of the claim's (ready) node to unpublish
	// the volume for the claim's alloc, then checkpoint NodeDetached. For
	// a client that did not do it by itself: the alloc was garbage
	// collected, or stopped long ago. The client refuses while any task
	// of the alloc still runs, so this never unmounts from under a task.
	NodeDetach
)

// ClockSkew is how far a client's clock may be behind the servers' when
// it ends a plugin call at a deadline the servers set (PublishUntil,
// UnpublishUntil).
const ClockSkew = time.Second

// DefaultNodeDetachGrace is how long after a stopped alloc last changed
// the servers wait for its client's own unpublish before they ask for it
// (NodeDetach), unless the server config says otherwise
// (nomad.Config.CSINodeDetachGrace). A client unpublishes by itself as
// soon as the alloc's tasks exit, so the grace only matters for a client
// that failed to; it is long enough that the servers never race a client
// that is busy unmounting, and short enough that a missed unpublish does
// not hold a volume for long.
const DefaultNodeDetachGrace = 2 * time.Minute

func (k ActionKind) String() string {
	switch k {
	case None:
		return "none"
	case Wait:
		return "wait"
	case ControllerUnpublish:
		return "controller-unpublish"
	case MarkNodeDetached:
		return "mark-node-detached"
	case Free:
		return "free"
	case RetryAfter:
		return "retry-after"
	case NodeDetach:
		return "node-detach"
	}
	return fmt.Sprintf("action(%d)", int(k))
}

// Action is Next's answer for one claim.
type Action struct {
	Kind ActionKind
	// Reason says why, in words an operator can act on; it names the
	// alloc and the node.
	Reason string
	// At is when to look again: the disconnect deadline of a Wait on a
	// down node, or the claim's NextRetry for RetryAfter. Zero: on the
	// next change of the claim, its alloc or its node.
	At time.Time
	// Record is set when Reason should be shown on the claim (as its
	// LastError) while it waits, because the wait may be long.
	Record bool
	// ReleaseReason is recorded on the claim when this action releases it
	// off the normal path (the client's own unpublish).
	ReleaseReason string
}

// Releasing reports whether the action moves the claim towards freed
// now (or after a backoff), as opposed to leaving it in use or waiting.
func (a Action) Releasing() bool {
	switch a.Kind {
	case ControllerUnpublish, MarkNodeDetached, Free, RetryAfter, NodeDetach:
		return true
	}
	return false
}

// Release reasons recorded on claims freed off the normal path.
const (
	ReasonNodeGone         = "node no longer registered"
	ReasonDisconnectPassed = "node down past its disconnect deadline"
	ReasonFenced           = "node down: volume detached by the controller (fencing)"
	ReasonDetachForce      = "detach -force by operator"
	ReasonServerDetach     = "node-side unpublish asked by the servers"
)

// Next decides what to do next for claim, a live claim of vol, given its
// alloc and its node as they are in state (nil when gone) and what the
// volume's plugin can do now (prof, re-read at every decision: plugins get
// upgraded). node's DisconnectDeadline must already hold the deadline that
// applies to it (WithDeadline). grace is how long a stopped alloc's client
// gets to unpublish by itself before the servers ask it to (zero:
// DefaultNodeDetachGrace). It is pure: the same inputs give the same
// action.
//
// The rules (DESIGN.md §4, guarantee 2):
//
//   - A claim is released only once its alloc is stopped (or gone) and its
//     node can no longer be using the volume: the client reported node
//     unpublish (the Unpublish RPC, which checkpoints NodeDetached, or
//     TasksExited), the node is gone, the node is down and either fenced
//     by ControllerUnpublish or past its disconnect deadline, or the
//     operator forced it. Purging a job or garbage collecting an alloc
//     never frees a claim: a Taken claim of a gone alloc on a live node
//     waits for that node.
//   - A Reserved claim was never published on the node (the client gets
//     the volume only with Taken), so it is freed once its alloc stops —
//     after a ControllerUnpublish when a Claim may have run
//     ControllerPublish for it (it recorded the external node ID first).
//   - After NodeDetached, ControllerUnpublish runs when the claim may have
//     been controller-published and the plugin's controller still
//     advertises PUBLISH_UNPUBLISH_VOLUME, unless another claim still uses
//     the volume on that node (the last one there detaches it).
//   - A failed call waits for the claim's NextRetry.
//   - A NeedsOperator claim waits for `volume detach` (Detach).
//   - A claim is not freed while a ControllerUnpublish for it may still
//     run (its UnpublishUntil, plus ClockSkew, is ahead): the deadline
//     must stay in state until then, for UnpublishHold and a new leader.
func Next(vol *structs.CSIVolume, claim *structs.CSIVolumeClaim, alloc *structs.Allocation, node *structs.Node,
	prof Profile, grace time.Duration, now time.Time) Action {
	act := next(vol, claim, alloc, node, prof, grace, now)
	if act.Kind == Free {
		if wait, ok := unpublishMayRun(claim, now); ok {
			return wait
		}
	}
	return act
}

func next(vol *structs.CSIVolume, claim *structs.CSIVolumeClaim, alloc *structs.Allocation, node *structs.Node,
	prof Profile, grace time.Duration, now time.Time) Action {
	if grace <= 0 {
		grace = DefaultNodeDetachGrace
	}
	needsController := prof.ControllerPublish
	switch claim.Step {
	case structs.CSIClaimNeedsOperator:
		return Action{Kind: Wait, Reason: fmt.Sprintf(
			"the release of alloc %s's claim on node %s stopped at step %s: %s; run 'berth volume detach %s %s'",
			claim.AllocID, claim.NodeID, claim.BlockedStep, claim.LastError, vol.ID, claim.NodeID)}
	case structs.CSIClaimReserved:
		return reservedStep(vol, claim, alloc, needsController, now)
	case structs.CSIClaimTaken:
		return takenStep(claim, alloc, node, needsController, grace, now)
	case structs.CSIClaimNodeDetached:
		if !published(claim, needsController) || simbug.On(simbug.SkipControllerUnpublish) {
			return Action{Kind: Free, Reason: fmt.Sprintf(
				"node %s finished unpublishing the volume for alloc %s, and the plugin needs no controller", claim.NodeID, claim.AllocID)}
		}
		if other := inUseOnNode(vol, claim, needsController); other != nil {
			return Action{Kind: Free, Reason: fmt.Sprintf(
				"node %s finished unpublishing the volume for alloc %s; alloc %s still uses it there, "+
					"so the last claim on the node detaches it through the controller", claim.NodeID, claim.AllocID, other.AllocID)}
		}
		return controllerStep(claim, now, "")
	case structs.CSIClaimControllerDetached:
		return Action{Kind: Free, Reason: fmt.Sprintf(
			"the controller detached the volume from node %s (alloc %s)", claim.NodeID, claim.AllocID)}
	}
	return Action{Kind: None, Reason: fmt.Sprintf("claim of alloc %s is at unknown step %q", claim.AllocID, claim.Step)}
}

func reservedStep(vol *structs.CSIVolume, claim *structs.CSIVolumeClaim, alloc *structs.Allocation, needsController bool, now time.Time) Action {
	if alloc != nil && !alloc.TerminalStatus() {
		return Action{Kind: None, Reason: fmt.Sprintf("reserved for alloc %s, which has not claimed the volume yet", claim.AllocID)}
	}
	if published(claim, needsController) {
		// A Claim records the external node ID on the reservation before
		// it calls ControllerPublish; undo a publish whose Taken was lost.
		//
		// Unless another alloc has the volume Taken on that node: the
		// attachment is one per node, and detaching it would pull the
		// volume from under that alloc's running tasks (seed 550: a
		// stopped reservation's ControllerUnpublish left a running alloc
		// with its claim and nothing published). Its own release, the
		// last on the node, detaches it. A publish of this reservation
		// that may still run is waited out first all the same: landing
		// after that release, it would leave the volume attached to a
		// node no claim holds.
		if other := takenOnNode(vol, claim); other != nil {
			if wait, ok := publishMayRun(claim, now); ok {
				return wait
			}
			return Action{Kind: Free, Reason: fmt.Sprintf(
				"alloc %s %s before it claimed the volume; alloc %s has it on node %s, so the last claim there detaches it through the controller",
				claim.AllocID, stoppedOrGone(alloc), other.AllocID, claim.NodeID)}
		}
		return controllerStep(claim, now, "")
	}
	return Action{Kind: Free, Reason: fmt.Sprintf("alloc %s %s before it claimed the volume", claim.AllocID, stoppedOrGone(alloc))}
}

func takenStep(claim *structs.CSIVolumeClaim, alloc *structs.Allocation, node *structs.Node, needsController bool,
	grace time.Duration, now time.Time) Action {
	switch {
	case simbug.On(simbug.FreeOnStop) && alloc != nil && alloc.DesiredStatus != structs.AllocDesiredStatusRun:
		return Action{Kind: MarkNodeDetached, Reason: "known bug armed for the simulator: " + string(simbug.FreeOnStop)}
	case alloc != nil && !alloc.TerminalStatus():
		return Action{Kind: None, Reason: fmt.Sprintf("in use by alloc %s on node %s", claim.AllocID, claim.NodeID)}
	case alloc != nil && alloc.TasksExited:
		return Action{Kind: MarkNodeDetached, Reason: fmt.Sprintf(
			"client of node %s reported that every task of alloc %s exited and node unpublish finished", claim.NodeID, claim.AllocID)}
	case node == nil:
		return Action{Kind: MarkNodeDetached, ReleaseReason: ReasonNodeGone,
			Reason: fmt.Sprintf("node %s of alloc %s is no longer registered", claim.NodeID, claim.AllocID)}
	case node.Status == structs.NodeStatusDown:
		return downNodeStep(claim, alloc, node, needsController, now)
	case alloc == nil:
		return nodeDetachStep(claim, now, fmt.Sprintf(
			"alloc %s was garbage collected; asking the client of node %s to unpublish the volume", claim.AllocID, claim.NodeID))
	}
	if due := time.Unix(0, alloc.ModifyTime).Add(grace); now.Before(due) {
		return Action{Kind: Wait, At: due, Reason: fmt.Sprintf(
			"alloc %s stopped; waiting for node %s to unpublish the volume", claim.AllocID, claim.NodeID)}
	}
	return nodeDetachStep(claim, now, fmt.Sprintf(
		"alloc %s stopped over %s ago and node %s has not reported the volume unpublished; asking its client to",
		claim.AllocID, grace, claim.NodeID))
}

// nodeDetachStep is NodeDetach, or RetryAfter while the last failure's
// backoff runs.
func nodeDetachStep(claim *structs.CSIVolumeClaim, now time.Time, reason string) Action {
	if claim.NextRetry > now.UnixNano() {
		return Action{Kind: RetryAfter, At: time.Unix(0, claim.NextRetry), Reason: fmt.Sprintf(
			"asking node %s to unpublish the volume for alloc %s failed %d times (last: %s); retrying at %s",
			claim.NodeID, claim.AllocID, claim.Attempts, claim.LastError, fmtTime(claim.NextRetry))}
	}
	return Action{Kind: NodeDetach, ReleaseReason: ReasonServerDetach, Reason: reason}
}

func downNodeStep(claim *structs.CSIVolumeClaim, alloc *structs.Allocation, node *structs.Node, needsController bool, now time.Time) Action {
	fence := published(claim, needsController)
	if node.StatusUpdatedAt == 0 || node.DisconnectDeadline <= 0 {
		// No deadline to count, or no time to count it from: never guess.
		// A deadline is only safe when the node's client promised to stop
		// its allocs by then; without one, only fencing or an operator
		// may release the claim (guarantee 1 before guarantee 3).
		if fence {
			return controllerStep(claim, now, ReasonFenced)
		}
		return Action{Kind: Wait, Record: true, Reason: fmt.Sprintf(
			"node %s of alloc %s is down and has no disconnect deadline to wait out; waiting for it to return, or for 'berth volume detach -force'",
			node.ID, claim.AllocID)}
	}
	deadline := time.Unix(0, node.StatusUpdatedAt).Add(node.DisconnectDeadline)
	if !now.Before(deadline) || simbug.On(simbug.FreeOnNodeDown) {
		return Action{Kind: MarkNodeDetached, ReleaseReason: ReasonDisconnectPassed, Reason: fmt.Sprintf(
			"node %s has been down since %s, past its disconnect deadline (%s); its client has stopped alloc %s",
			node.ID, fmtTime(node.StatusUpdatedAt), node.DisconnectDeadline, claim.AllocID)}
	}
	if fence {
		return controllerStep(claim, now, ReasonFenced)
	}
	return Action{Kind: Wait, Record: true, At: deadline, Reason: fmt.Sprintf(
		"node %s is down; alloc %s %s; waiting for the node's disconnect deadline at %s",
		node.ID, claim.AllocID, stoppedOrGone(alloc), deadline.UTC().Format(time.RFC3339))}
}

// published reports whether the volume may be controller-published for
// claim: the plugin's controller advertises PUBLISH_UNPUBLISH_VOLUME now,
// and the claim records (ControllerPublished, with the external node ID)
// that the Claim endpoint wrote before a ControllerPublish. A claim
// without it (a reservation the client never claimed, a node-only plugin,
// a controller that does not attach) has nothing to controller-unpublish.
func published(claim *structs.CSIVolumeClaim, needsController bool) bool {
	return needsController && claim.ControllerPublished && claim.ExternalNodeID != ""
}

// controllerStep is ControllerUnpublish, or RetryAfter while the last
// failure's backoff runs.
//
// A ControllerPublish for the claim that may still be running (its
// PublishUntil, plus ClockSkew, is ahead) is waited out first: the client
// making it may go on after the server that asked gave up or lost
// leadership, and a publish landing after the unpublish would leave the
// volume attached to a node the servers freed — and a single-node volume
// attached to two nodes once another claim publishes it (seed 20144).
func controllerStep(claim *structs.CSIVolumeClaim, now time.Time, releaseReason string) Action {
	if wait, ok := publishMayRun(claim, now); ok {
		return wait
	}
	if claim.NextRetry > now.UnixNano() {
		return Action{Kind: RetryAfter, At: time.Unix(0, claim.NextRetry), ReleaseReason: releaseReason, Reason: fmt.Sprintf(
			"controller unpublish of alloc %s's claim from node %s failed %d times (last: %s); retrying at %s",
			claim.AllocID, claim.NodeID, claim.Attempts, claim.LastError, fmtTime(claim.NextRetry))}
	}
	return Action{Kind: ControllerUnpublish, ReleaseReason: releaseReason, Reason: fmt.Sprintf(
		"detach the volume from node %s (alloc %s) through the controller", claim.NodeID, claim.AllocID)}
}

// publishMayRun returns the Wait for a ControllerPublish of claim that
// may still be running (its PublishUntil, plus ClockSkew, is ahead of
// now), and whether there is one.
func publishMayRun(claim *structs.CSIVolumeClaim, now time.Time) (Action, bool) {
	if claim.PublishUntil <= 0 {
		return Action{}, false
	}
	until := time.Unix(0, claim.PublishUntil).Add(ClockSkew)
	if !now.Before(until) {
		return Action{}, false
	}
	return Action{Kind: Wait, At: until, Record: true, Reason: fmt.Sprintf(
		"a controller publish to node %s for alloc %s may still be running until %s; "+
			"the volume is detached from the node through the controller after that",
		claim.NodeID, claim.AllocID, until.UTC().Format(time.RFC3339))}, true
}

// unpublishMayRun returns the Wait for a ControllerUnpublish for claim
// that may still be running (its UnpublishUntil, plus ClockSkew, is ahead
// of now), and whether there is one.
func unpublishMayRun(claim *structs.CSIVolumeClaim, now time.Time) (Action, bool) {
	until, ok := unpublishHeld(claim, now)
	if !ok {
		return Action{}, false
	}
	return Action{Kind: Wait, At: until, Record: true, Reason: fmt.Sprintf(
		"a controller unpublish from node %s for alloc %s may still be running until %s; "+
			"the claim is freed after that, and no controller publish of the volume to the node runs before",
		claim.NodeID, claim.AllocID, until.UTC().Format(time.RFC3339))}, true
}

// unpublishHeld is when a ControllerUnpublish for claim can no longer
// land (UnpublishUntil plus ClockSkew), and whether that is after now.
func unpublishHeld(claim *structs.CSIVolumeClaim, now time.Time) (time.Time, bool) {
	if claim.UnpublishUntil <= 0 {
		return time.Time{}, false
	}
	until := time.Unix(0, claim.UnpublishUntil).Add(ClockSkew)
	return until, now.Before(until)
}

// UnpublishHold returns the live claim of vol with a ControllerUnpublish
// from the plugin's node externalNodeID that may still be running, and
// when the last such call can no longer land (UnpublishUntil plus
// ClockSkew); nil when there is none. A ControllerPublish of vol to that
// node, for any claim, must wait until then: an unpublish landing after
// it would detach the volume from under the publishing claim's alloc
// (seed 4060). It reads only state, so a new leader holds it as the old
// one did.
func UnpublishHold(vol *structs.CSIVolume, externalNodeID string, now time.Time) (*structs.CSIVolumeClaim, time.Time) {
	var (
		holder *structs.CSIVolumeClaim
		last   time.Time
	)
	for _, c := range vol.Claims { // every Claim that publishes reads this: no sort
		if c.ExternalNodeID != externalNodeID {
			continue
		}
		until, ok := unpublishHeld(c, now)
		if ok && (until.After(last) || until.Equal(last) && c.AllocID < holder.AllocID) {
			holder, last = c, until
		}
	}
	return holder, last
}

// takenOnNode returns another claim of vol Taken on claim's node, or nil.
// Only Taken counts, not inUseOnNode's published reservations: every
// claim of a round is decided on the same snapshot, and two stopped
// reservations on one node that each left the attachment to the other
// would both be freed with the volume still attached. A Taken claim
// always goes through NodeDetached, whose inUseOnNode sees this
// reservation gone and detaches.
func takenOnNode(vol *structs.CSIVolume, claim *structs.CSIVolumeClaim) *structs.CSIVolumeClaim {
	return otherOnNode(vol, claim, func(c *structs.CSIVolumeClaim) bool { return c.Step == structs.CSIClaimTaken })
}

// inUseOnNode returns another claim of vol on claim's node that still
// uses the volume there and will controller-unpublish it when released,
// or nil. Claims that are releasing do not count: each of them
// controller-unpublishes, which is idempotent, so none is left attached.
//
// A Taken claim uses the volume. A Reserved one counts only once it may
// have controller-published (ControllerPublished): a reservation whose
// ControllerPublish failed for good (claims.PublishFailed clears it), or
// that has not called it yet, is freed without ControllerUnpublish when
// its alloc stops, so leaving the attachment to it left the volume
// attached to a node no claim holds (seed 41530). Not counting it is safe:
// its Claim publishes again under the volume's lock, after this release.
func inUseOnNode(vol *structs.CSIVolume, claim *structs.CSIVolumeClaim, needsController bool) *structs.CSIVolumeClaim {
	return otherOnNode(vol, claim, func(c *structs.CSIVolumeClaim) bool {
		return c.Step == structs.CSIClaimTaken || (c.Step == structs.CSIClaimReserved && published(c, needsController))
	})
}

// otherOnNode returns a live claim of vol on claim's node, other than
// claim itself, for which counts is true, or nil.
func otherOnNode(vol *structs.CSIVolume, claim *structs.CSIVolumeClaim, counts func(*structs.CSIVolumeClaim) bool) *structs.CSIVolumeClaim {
	for _, c := range vol.LiveClaims() {
		if c.AllocID != claim.AllocID && c.NodeID == claim.NodeID && counts(c) {
			return c
		}
	}
	return nil
}

func stoppedOrGone(alloc *structs.Allocation) string {
	if alloc == nil {
		return "was garbage collected"
	}
	return "stopped"
}

func fmtTime(unixNano int64) string {
	return time.Unix(0, unixNano).UTC().Format(time.RFC3339)
}

// WithDeadline returns node with DisconnectDeadline set to def when the
// node reports none (a shallow copy; the stored node is never touched).
func WithDeadline(node *structs.Node, def time.Duration) *structs.Node {
	if node == nil || node.DisconnectDeadline > 0 {
		return node
	}
	n := *node
	n.DisconnectDeadline = def
	return &n
}
