// Package simbug holds known bugs that the fault-schedule simulator
// (testutil/sim) must be able to find: each is a one-line branch in
// production code, armed only in binaries built with the `simbugs` build
// tag (go test -tags simbugs ./testutil/sim/). Without the tag On is a
// constant false the compiler removes, and Arm does not exist, so no
// production build can reach a bug.
package simbug

// Bug names one known bug.
type Bug string

// The known bugs.
const (
	// FreeOnStop: the servers treat a stopped alloc's claim as if its node
	// had unpublished, without waiting for its tasks to exit (the bug of
	// freeing claims on stop or purge). Breaks guarantee 2, then 1.
	FreeOnStop Bug = "free-on-stop"
	// IgnoreCapability: the servers ControllerPublish through any
	// controller, advertised PUBLISH_UNPUBLISH_VOLUME or not.
	IgnoreCapability Bug = "ignore-capability"
	// SkipControllerUnpublish: the servers free a node-detached claim
	// without ControllerUnpublish, leaving the volume attached to the old
	// node (a lost Raft checkpoint of the controller step does the same).
	SkipControllerUnpublish Bug = "skip-controller-unpublish"
	// FreeOnNodeDown: the servers free a down node's claims as soon as
	// they mark it down (it missed its heartbeats), as if its disconnect
	// deadline had already passed, without fencing. Only a node whose
	// client still runs and still promises a deadline can go down with a
	// claim the bug frees — a client cut off from the servers (a killed
	// client takes its promise back) — so only partitions expose it: the
	// alloc's replacement publishes the volume elsewhere while the cut-off
	// client still has it published. Breaks guarantee 1.
	FreeOnNodeDown Bug = "free-on-node-down"
	// UnfencedVolumeCall: the client's volume manager releases a volume's
	// lock as soon as the caller of a NodeStage or NodePublish gives up
	// (its alloc stopped), while the plugin may still be inside the call
	// (csimanager's fenced, 08506e9): the release's NodeUnpublish runs
	// first, the claim is freed, and the publish lands afterwards on a
	// node that holds no claim. A slow plugin call exposes it. Breaks
	// guarantee 1 (check 4, and check 1 once another node publishes).
	UnfencedVolumeCall Bug = "unfenced-volume-call"
	// IgnoreStop: the client's alloc runner takes a stopped version of
	// its alloc from the servers but neither cancels its setup nor kills
	// its tasks (a stop lost on the client's side), so the tasks run on
	// for an alloc the servers hold stopped, with the client up, and the
	// alloc's volumes are never released. Breaks check 8 (then 3 and 5).
	IgnoreStop Bug = "ignore-stop"
)

// All lists every known bug.
var All = []Bug{FreeOnStop, IgnoreCapability, SkipControllerUnpublish, FreeOnNodeDown, UnfencedVolumeCall, IgnoreStop}
