// Package sim is Berth's fault-schedule simulator (issue 16): it runs
// seeded schedules of operations and faults against an in-process cluster
// and checks the claim guarantees of DESIGN §5 while they run.
//
// The cluster is testutil/cluster's: real nomad servers (hashicorp/raft,
// go-memdb, the real RPC layer over loopback TCP; Raft's log in memory,
// which DESIGN allows for tests) and real clients with their bbolt state
// in a temp dir, the mock task driver, and one plugins/csi/fake plugin
// per node on a real unix socket. The plugin's Profile is drawn from the
// seed: node-only, a controller without PUBLISH_UNPUBLISH_VOLUME, or with
// it; with or without PUBLISH_READONLY and STAGE_UNSTAGE_VOLUME.
//
// A Schedule (Generate) registers volumes of every access mode (some
// per_alloc) and interleaves operations (run a job, read-only or not,
// batch or service; stop; stop -purge; drain; eligibility; volume detach
// [-force]; GC; tasks exiting) with faults (client killed and restarted
// from its state dir; node-plugin and controller errors of each class —
// Unavailable, DeadlineExceeded, Unimplemented, InvalidArgument, NotFound,
// FailedPrecondition — and hangs). After the last op every fault heals.
//
// Checks (Check): the Witness sees every call of every node's plugin and
// the mock driver's running tasks, and checks as calls arrive
//
//	1 publications at once ≤ what the access mode allows, across nodes
//	  (a node the controller detached the volume from does not count,
//	  whatever lands there, until the volume is attached to it again)
//	2 no NodeUnpublish while a task of its alloc runs; a poller of the
//	  leader's state also flags a claim freed while its tasks run
//	  (claims freed with a recorded ReleaseReason — detach -force, a
//	  disconnect deadline — and volumes force-detached are excused)
//	7 no RPC the plugin's Profile does not advertise
//
// and after healing, within FreeBound of running time,
//
//	3 every claim of a terminal alloc is freed; a claim at
//	  needs-operator is a violation unless the schedule injected a
//	  final error into an RPC of its blocked step
//	4 publications and controller attachments on each node ⇔ claims
//	  of live allocs (an attachment whose ControllerUnpublish an
//	  operator's detach skipped, as -force does, is left alone)
//	5 a job no other job competes with, and no blocked claim holds, runs
//	6 no panic: a panic in any server or client goroutine kills the test
//	  binary, which fails the run
//	8 no task runs for an alloc the servers hold stopped on a node whose
//	  client is up (a stop the client lost: its claims then stay taken,
//	  which 3 and 5 see only as a claim not freed and allocs pending)
//
// Time is real, with every timer of the claim protocol shortened
// (serverConfig, startClient): servers and clients talk over loopback TCP
// and plugins over unix sockets, which testing/synctest bubbles cannot
// hold, so a schedule takes about a second or two of real time. The
// interleaving of a replayed schedule is therefore the same list of steps
// but not the same instant-by-instant timing. The harness's bounds are
// running time: a stall meter (stall.go) measures how long the process
// did not run, and a bound is extended by the stall measured while it
// ran, so a cluster is not judged on time it never got.
//
// Running it: `make sim` (SCHEDULES, SEED_BASE overridable) ends with
// "sim: <N> schedules, <V> violations, <S> s"; SEED=<n> replays one
// schedule, SEEDS=<n>,<m>,... a list of them at once. One process runs
// any number: a finished schedule leaves no goroutine, fd or temp dir
// (TestSim_FinishedScheduleLeavesNothing). A violation prints the seed, the schedule, the violations and
// a schedule minimized by delta debugging (Shrink) that still fails.
package sim
