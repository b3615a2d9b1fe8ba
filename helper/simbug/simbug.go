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
)

// All lists every known bug.
var All = []Bug{FreeOnStop, IgnoreCapability, SkipControllerUnpublish}
