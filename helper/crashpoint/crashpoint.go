// Package crashpoint names the points of the client's claim path where
// the end-to-end crash test (e2e/crash_test.go) kills the agent, to show
// that a client SIGKILLed between two steps loses and doubles no mount.
//
// Hit(p) is a no-op in every normal build: the branch exists only in
// binaries built with the `crashpoints` build tag (Linux), as simbug's
// bugs do. There, when the file named by $BERTH_CRASHPOINT_FILE holds p,
// Hit removes the file (so the restarted process goes on) and sends the
// process SIGKILL: the same as kill -9 from outside, at a known step.
package crashpoint

// Point names one step boundary of the claim path.
type Point string

// EnvFile names the environment variable with the path of the file that
// arms a point (crashpoints builds only).
const EnvFile = "BERTH_CRASHPOINT_FILE"

// The points, in the order a claim cycle passes them. Each is after a
// side effect and before the record of it.
const (
	// AllocLocal: a new alloc's prerun claimed and mounted its volumes;
	// the alloc is in the client's node-local file only, its durable
	// write (state.db, fsync) not started.
	AllocLocal Point = "alloc-local"
	// CSIClaimed: the Claim RPC succeeded; the hook's record still says
	// claiming.
	CSIClaimed Point = "csi-claimed"
	// CSIStaged: NodeStage succeeded; the staging usage does not say
	// staged yet.
	CSIStaged Point = "csi-staged"
	// CSIPublished: NodePublish succeeded; the hook's record still says
	// mounting.
	CSIPublished Point = "csi-published"
	// CSIUnpublished: NodeUnpublish succeeded on release; the staging
	// usage still counts the alloc.
	CSIUnpublished Point = "csi-unpublished"
	// CSIUnstaged: NodeUnstage succeeded; the usage record still lists
	// the alloc.
	CSIUnstaged Point = "csi-unstaged"
	// CSIUnmounted: the hook recorded unmounted; the Unpublish RPC has not
	// been sent.
	CSIUnmounted Point = "csi-unmounted"
)

// All lists every point.
var All = []Point{CSIClaimed, CSIStaged, CSIPublished, AllocLocal, CSIUnpublished, CSIUnstaged, CSIUnmounted}
