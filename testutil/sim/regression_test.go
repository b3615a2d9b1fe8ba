package sim

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"

	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// TestRegression_RestoredAllocStoppedWhileItsMountIsRedone is the schedule
// the simulator shrank a violation of guarantee 2 to: a client is killed
// while its alloc runs, the node's plugin loses its mounts, the servers
// mark the node down and stop the alloc (lost), and the client restarts.
// The restored alloc's csi_hook finds the mount gone and claims again in
// prerun, which the servers refuse (the alloc is stopping). The alloc
// runner used to mark the tasks dead without reattaching to them
// (client/allocrunner runTasks), so the task the driver still ran was
// never killed, and postrun unpublished and freed the volume under it:
// checks 2 and 4. It now reattaches and kills them (reapRestored).
func TestRegression_RestoredAllocStoppedWhileItsMountIsRedone(t *testing.T) {
	s := &Schedule{Seed: 0, Nodes: 2, Servers: 1, Profile: Profile{StageUnstage: true},
		Volumes: []Volume{{ID: "v0", Mode: structs.CSIVolumeAccessModeSingleNodeWriter, PerAlloc: true}},
		Ops: []Op{
			{Kind: OpRunJob, Job: 0, Vol: 0},
			{Kind: OpWait, Wait: 300 * time.Millisecond},
			{Kind: FaultLoseMnts, Node: 0}, // kills the client too
			{Kind: OpWait, Wait: 700 * time.Millisecond},
		}}
	if vs := Run(t, s); len(vs) > 0 {
		t.Errorf("violations:\n%v", vs)
	}
}

// TestRegression_JobRegisteredDuringAFailover is the shape of seeds 5008
// and 5059's check-5 reports (a job with no allocs across a 3-server
// failover): a job is registered while the leader is cut off from the
// other two. Replayed, neither seed failed again; the reports came from
// registers the servers refused (no leader, leadership lost while
// committing) under a load average of 20, which the checker then still
// expected to run — the checker was wrong, not the servers. Check 5 now
// judges a refused register only when the servers applied it anyway
// (runsCheck), and an accepted one must run.
func TestRegression_JobRegisteredDuringAFailover(t *testing.T) {
	s := &Schedule{Seed: 0, Nodes: 2, Servers: 3, Profile: Profile{Controller: true},
		Volumes: []Volume{{ID: "v0", Mode: structs.CSIVolumeAccessModeMultiNodeSingleWriter}, {ID: "v1", Mode: structs.CSIVolumeAccessModeSingleNodeWriter}},
		Ops: []Op{
			{Kind: FaultCutServer, Node: -1, Wait: time.Second},
			{Kind: OpRunJob, Job: 0, Vol: 0},
			{Kind: FaultLossyRaft, Drop: 30, Delay: 10 * time.Millisecond, Wait: time.Second},
			{Kind: OpRunJob, Job: 1, Vol: 1},
			{Kind: OpWait, Wait: 1500 * time.Millisecond},
		}}
	if vs := Run(t, s); len(vs) > 0 {
		t.Errorf("violations:\n%v", vs)
	}
}

// TestRegression_ClientKilledWhileItsAllocIsBeingStopped is seed 11 with
// partitions, minimized: a drained node's client is killed (its plugin
// losing its mounts) while its allocs are being stopped. The kill was cut
// short by the client's shutdown, the driver closed the task's wait, and
// the task runner took that for the task's exit: it recorded the task
// killed and the alloc runner unpublished the volume while the task still
// ran (checks 2 and 4). It depends on timing, so it failed only now and
// then; the task runner's TestRunner_ShutdownDuringAKillLeavesTheTaskRunning
// reproduces it every time.
func TestRegression_ClientKilledWhileItsAllocIsBeingStopped(t *testing.T) {
	s := &Schedule{Seed: 11, Nodes: 2, Servers: 1, DisconnectDeadline: 3 * time.Second,
		Profile: Profile{Controller: true, PublishUnpublish: true, StageUnstage: true},
		Volumes: []Volume{
			{ID: "v0", Mode: structs.CSIVolumeAccessModeMultiNodeSingleWriter},
			{ID: "v1", Mode: structs.CSIVolumeAccessModeMultiNodeReader},
			{ID: "v2", Mode: structs.CSIVolumeAccessModeMultiNodeReader, PerAlloc: true},
		},
		Ops: []Op{
			{Kind: OpRunJob, Job: 0, Vol: 2, ReadOnly: true, Batch: true},
			{Kind: OpRunJob, Job: 1, Vol: 1, ReadOnly: true},
			{Kind: OpWait, Wait: 689 * time.Millisecond},
			{Kind: OpDrain, Node: 0},
			{Kind: FaultCutNode, Node: 1, Wait: 2340 * time.Millisecond},
			{Kind: OpExitTasks},
			{Kind: OpRunJob, Job: 2, Vol: 1, ReadOnly: true, Batch: true},
			{Kind: FaultCtrl, Method: "ControllerPublishVolume", Code: codes.FailedPrecondition},
			{Kind: FaultLoseMnts, Node: 0},
			{Kind: OpExitTasks},
			{Kind: OpRunJob, Job: 3, Vol: 1, ReadOnly: true, Batch: true},
			{Kind: FaultKill, Node: 0},
		}}
	if vs := Run(t, s); len(vs) > 0 {
		t.Errorf("violations:\n%v", vs)
	}
}

// TestRegression_FencingBlockedByAFinalControllerError is seed 20428,
// minimized: a client is killed, its node goes down, and the servers fence
// its claim with ControllerUnpublish from step taken, into which the
// schedule injected a final error (FailedPrecondition). The claim then
// rightly needs an operator; check 3 allowed that from step taken only for
// node-plugin errors, so it blamed the servers. The checker was wrong.
func TestRegression_FencingBlockedByAFinalControllerError(t *testing.T) {
	s := &Schedule{Seed: 20428, Nodes: 2, Servers: 1, Profile: Profile{Controller: true, PublishUnpublish: true},
		Volumes: []Volume{
			{ID: "v0", Mode: structs.CSIVolumeAccessModeMultiNodeSingleWriter},
			{ID: "v1", Mode: structs.CSIVolumeAccessModeSingleNodeReader, PerAlloc: true},
		},
		Ops: []Op{
			{Kind: OpRunJob, Job: 0, Vol: 1, ReadOnly: true},
			{Kind: OpRunJob, Job: 1, Vol: 1, ReadOnly: true},
			{Kind: OpWait, Wait: 448 * time.Millisecond},
			{Kind: FaultKill, Node: 1},
			{Kind: FaultCtrl, Method: "ControllerUnpublishVolume", Code: codes.FailedPrecondition},
			{Kind: FaultCtrl, Method: "ControllerPublishVolume", Code: codes.Unimplemented},
			{Kind: OpWait, Wait: 628 * time.Millisecond},
		}}
	if vs := Run(t, s); len(vs) > 0 {
		t.Errorf("violations:\n%v", vs)
	}
}

// TestRegression_HungControllerPublishWithThreeServers is seed 20144
// (it did not replay): a single-node-reader volume was controller-
// published to two nodes after ControllerPublish hung with three servers.
// A Claim's server stopped waiting for a hung publish (its own timeout,
// 2 s here, or a leader change or broken session), while the client went
// on retrying it for up to two minutes; the alloc stopped, the servers
// controller-unpublished its reservation and freed it, the next alloc's
// claim published the volume to another node, and when the hang healed
// the first publish landed. A publish now carries its deadline, which the
// client enforces and the release waits out (PublishUntil);
// nomad's TestCSIClaim_APublishThatMayStillLandIsWaitedOut reproduces it
// every time.
func TestRegression_HungControllerPublishWithThreeServers(t *testing.T) {
	s := &Schedule{Seed: 20144, Nodes: 2, Servers: 3,
		Profile: Profile{Controller: true, PublishUnpublish: true, PublishReadOnly: true, StageUnstage: true},
		Volumes: []Volume{
			{ID: "v0", Mode: structs.CSIVolumeAccessModeMultiNodeSingleWriter},
			{ID: "v1", Mode: structs.CSIVolumeAccessModeSingleNodeReader},
		},
		Ops: []Op{
			{Kind: OpRunJob, Job: 0, Vol: 1, ReadOnly: true, Batch: true},
			{Kind: OpRunJob, Job: 1, Vol: 0, Batch: true},
			{Kind: OpDetach, Vol: 0, Node: 0},
			{Kind: OpEligible, Node: 1},
			{Kind: OpExitTasks},
			{Kind: OpRunJob, Job: 2, Vol: 1, ReadOnly: true},
			{Kind: OpPurgeJob, Job: 2},
			{Kind: FaultHealCSI},
			{Kind: OpRunJob, Job: 3, Vol: 1, ReadOnly: true},
			{Kind: OpWait, Wait: 757 * time.Millisecond},
			{Kind: OpRunJob, Job: 4, Vol: 1, ReadOnly: true},
			{Kind: OpStopJob, Job: 4},
			{Kind: FaultCtrl, Method: "ControllerPublishVolume", Hang: true},
			{Kind: OpRunJob, Job: 5, Vol: 0, ReadOnly: true},
		}}
	if vs := Run(t, s); len(vs) > 0 {
		t.Errorf("violations:\n%v", vs)
	}
}

// TestRegression_ForcedDetachSkipsAFailedControllerUnpublish is seed
// 41635, minimized by hand from the trace (SIM_TRACE=1): a batch alloc's
// release hits a final ControllerUnpublish error and its claim needs an
// operator, who runs `volume detach -force`, which skips the step
// (claims.Detach, DESIGN §4) and frees the claim. The volume stays
// controller-published to the node, as the operator chose; check 4
// reported it as a leak 15 s after healing. The checker was wrong: it now
// leaves alone an attachment whose ControllerUnpublish the servers record
// an operator skipped after it was made (abandonedByOperator), and still
// judges every other one.
func TestRegression_ForcedDetachSkipsAFailedControllerUnpublish(t *testing.T) {
	s := &Schedule{Seed: 41635, Nodes: 1, Servers: 1, Profile: Profile{Controller: true, PublishUnpublish: true, StageUnstage: true},
		Volumes: []Volume{{ID: "v0", Mode: structs.CSIVolumeAccessModeSingleNodeReader}},
		Ops: []Op{
			{Kind: FaultCtrl, Method: "ControllerUnpublishVolume", Code: codes.FailedPrecondition},
			{Kind: OpRunJob, Job: 0, Vol: 0, ReadOnly: true, Batch: true},
			{Kind: OpWait, Wait: 1500 * time.Millisecond},
			{Kind: OpDetach, Vol: 0, Node: 0, Force: true},
			{Kind: OpWait, Wait: 300 * time.Millisecond},
		}}
	vs, st := RunStats(t, s)
	if len(vs) > 0 {
		t.Errorf("violations:\n%v", vs)
	}
	// The schedule proves something only if the attachment was left.
	if st.Publishes == 0 {
		t.Errorf("nothing was published: %+v", st)
	}
}

// TestRegression_ReleaseLeftTheAttachmentToAReservation is seeds 41530,
// 40579 (neither replayed in 15 runs each, some under load) and 44305
// (as it was before slow calls were drawn into it): a volume was
// left controller-published to a node where no claim held it. A claim
// released while another claim of the volume was Reserved on the same
// node was freed without ControllerUnpublish, leaving the attachment to
// the reservation; but a reservation that has not published yet (40579:
// its alloc stopped or was lost before it claimed) or whose publish
// failed for good (41530: ControllerPublish Unimplemented) is itself
// freed without ControllerUnpublish. A reservation now holds the
// attachment only once it may have published (claims.inUseOnNode);
// nomad/claims' TestNextStep reproduces it every time. Run with the
// probe of the fix, 40579 took that path in 2 of 3 runs. Seed 44305 (a
// release of multi-node-reader claims under lossy Raft) does replay: 3
// of 9 runs reported the attachment left without the fix, 0 of 5 with it.
func TestRegression_ReleaseLeftTheAttachmentToAReservation(t *testing.T) {
	seed41530 := &Schedule{Seed: 41530, Nodes: 2, Servers: 1,
		Profile: Profile{Controller: true, PublishUnpublish: true, StageUnstage: true},
		Volumes: []Volume{
			{ID: "v0", Mode: structs.CSIVolumeAccessModeMultiNodeMultiWriter},
			{ID: "v1", Mode: structs.CSIVolumeAccessModeMultiNodeSingleWriter},
		},
		Ops: []Op{
			{Kind: OpRunJob, Job: 0, Vol: 0},
			{Kind: OpIneligible, Node: 1},
			{Kind: OpDrain, Node: 1},
			{Kind: OpRunJob, Job: 1, Vol: 0},
			{Kind: FaultCtrl, Method: "ControllerPublishVolume", Code: codes.Unimplemented},
			{Kind: FaultKill, Node: 1},
			{Kind: FaultNode, Node: 0, Method: "NodeStageVolume", Hang: true},
			{Kind: OpRunJob, Job: 2, Vol: 1, Batch: true},
			{Kind: OpRunJob, Job: 3, Vol: 1},
			{Kind: FaultLoseMnts, Node: 1},
			{Kind: OpDrain, Node: 0},
			{Kind: OpPurgeJob, Job: 0},
			{Kind: OpPurgeJob, Job: 1},
			{Kind: OpStopJob, Job: 2},
		}}
	seed40579 := &Schedule{Seed: 40579, Nodes: 2, Servers: 3, Profile: Profile{Controller: true, PublishUnpublish: true},
		Volumes: []Volume{
			{ID: "v0", Mode: structs.CSIVolumeAccessModeMultiNodeMultiWriter},
			{ID: "v1", Mode: structs.CSIVolumeAccessModeMultiNodeSingleWriter, PerAlloc: true},
		},
		Ops: []Op{
			{Kind: OpRunJob, Job: 0, Vol: 1, ReadOnly: true},
			{Kind: OpWait, Wait: 317 * time.Millisecond},
			{Kind: OpIneligible, Node: 1},
			{Kind: OpRunJob, Job: 1, Vol: 1, ReadOnly: true},
			{Kind: OpStopJob, Job: 1},
			{Kind: OpRunJob, Job: 2, Vol: 1, ReadOnly: true},
			{Kind: FaultHealCSI},
			{Kind: FaultNode, Node: 0, Method: "NodePublishVolume", Code: codes.NotFound},
			{Kind: OpGC},
			{Kind: FaultNode, Node: 1, Method: "NodePublishVolume", Code: codes.InvalidArgument},
			{Kind: OpWait, Wait: 366 * time.Millisecond},
			{Kind: FaultKill, Node: 0},
			{Kind: FaultHealCSI},
			{Kind: FaultNode, Node: 0, Method: "NodeStageVolume", Code: codes.DeadlineExceeded},
		}}
	seed44305 := &Schedule{Seed: 44305, Nodes: 2, Servers: 3, DisconnectDeadline: 4 * time.Second,
		Profile: Profile{Controller: true, PublishUnpublish: true, StageUnstage: true},
		Volumes: []Volume{
			{ID: "v0", Mode: structs.CSIVolumeAccessModeMultiNodeMultiWriter, PerAlloc: true},
			{ID: "v1", Mode: structs.CSIVolumeAccessModeMultiNodeReader},
		},
		Ops: []Op{
			{Kind: OpRunJob, Job: 0, Vol: 1, ReadOnly: true, Batch: true},
			{Kind: OpPurgeJob, Job: 0},
			{Kind: OpWait, Wait: 316 * time.Millisecond},
			{Kind: OpWait, Wait: 208 * time.Millisecond},
			{Kind: OpRunJob, Job: 1, Vol: 1, ReadOnly: true},
			{Kind: OpPurgeJob, Job: 0},
			{Kind: OpRunJob, Job: 2, Vol: 1, ReadOnly: true},
			{Kind: OpGC},
			{Kind: OpPurgeJob, Job: 1},
			{Kind: OpIneligible, Node: 0},
			{Kind: FaultLossyRaft, Drop: 42, Delay: 29 * time.Millisecond, Wait: 551 * time.Millisecond},
			{Kind: OpGC},
			{Kind: OpStopJob, Job: 2},
			{Kind: OpIneligible, Node: 0},
			{Kind: OpGC},
		}}
	for _, s := range []*Schedule{seed41530, seed40579, seed44305} {
		t.Run(fmt.Sprintf("seed=%d", s.Seed), func(t *testing.T) {
			if vs := Run(t, s); len(vs) > 0 {
				t.Errorf("violations:\n%v", vs)
			}
		})
	}
}

// slowPublishOfAStoppedAlloc: an alloc is stopped while its node plugin
// is still inside a slow NodePublish, which lands after the caller gave
// up. The client must not unpublish (nor the servers free the claim)
// before the plugin is done with that call (csimanager's fenced); the
// bug it fixed, simbug.UnfencedVolumeCall, leaves the volume published
// for an alloc whose claim is freed (check 4; the 10,000-schedule run's
// check-1 reports, seed 41155 among them, once another node publishes).
func slowPublishOfAStoppedAlloc() *Schedule {
	return &Schedule{Seed: 41155, Nodes: 1, Servers: 1, Profile: Profile{StageUnstage: true},
		Volumes: []Volume{{ID: "v0", Mode: structs.CSIVolumeAccessModeSingleNodeWriter}},
		Ops: []Op{
			{Kind: FaultSlow, Node: 0, Method: "NodePublishVolume", Wait: 1200 * time.Millisecond},
			{Kind: OpRunJob, Job: 0, Vol: 0},
			{Kind: OpWait, Wait: 400 * time.Millisecond},
			{Kind: OpStopJob, Job: 0},
			{Kind: OpWait, Wait: 1500 * time.Millisecond},
		}}
}

// TestRegression_SlowPublishOfAStoppedAlloc: with the volume manager's
// fence, the late publish is unpublished after it lands, and the schedule
// ends clean. (bugs_test.go shows it fails with the fence removed.)
func TestRegression_SlowPublishOfAStoppedAlloc(t *testing.T) {
	vs, st := RunStats(t, slowPublishOfAStoppedAlloc())
	if len(vs) > 0 {
		t.Errorf("violations:\n%v", vs)
	}
	if st.Publishes == 0 {
		t.Errorf("the slow publish never landed: %+v", st)
	}
}

// TestRegression_StoppedReservationDetachedATakenVolume is seed 550 (3
// servers; it replayed in 2 of 15 runs beside seeds 801 and 1742, in none
// of 3 alone, and in none of 20 beside them with the fix), minimized by
// hand from its trace: an alloc has the volume Taken
// and running on a node while another alloc's reservation on the same
// node keeps failing ControllerPublish with a retryable error; the
// node's client is killed and the second alloc stopped, so no client
// reports its node side and the servers release the reservation
// themselves. That release ran ControllerUnpublish of the volume from the
// node — the one attachment every claim there shares — from under the
// running alloc, which kept its claim with nothing published (check 4,
// 15 s after healing; its restarted client found its mount and re-used
// it). The reservation is now freed without ControllerUnpublish when a
// claim is Taken on its node (claims.reservedStep), as a client's own
// Unpublish of it already was; nomad/claims' TestNextStep reproduces it
// every time.
func TestRegression_StoppedReservationDetachedATakenVolume(t *testing.T) {
	s := &Schedule{Seed: 550, Nodes: 2, Servers: 1, Profile: Profile{Controller: true, PublishUnpublish: true},
		Volumes: []Volume{{ID: "v0", Mode: structs.CSIVolumeAccessModeMultiNodeMultiWriter}},
		Ops: []Op{
			// Every alloc on n0; n1's plugin serves the controller
			// while n0's client is down.
			{Kind: OpIneligible, Node: 1},
			{Kind: OpRunJob, Job: 0, Vol: 0},
			{Kind: OpWait, Wait: 400 * time.Millisecond},
		}}
	// Enough retryable errors that job 1's claims keep failing until its
	// stop (each Claim RPC retries ControllerPublish every 5-20 ms).
	for range 150 {
		s.Ops = append(s.Ops, Op{Kind: FaultCtrl, Method: "ControllerPublishVolume", Code: codes.Unavailable})
	}
	s.Ops = append(s.Ops,
		Op{Kind: OpRunJob, Job: 1, Vol: 0},
		Op{Kind: OpWait, Wait: 100 * time.Millisecond},
		Op{Kind: FaultKill, Node: 0}, // back before the servers mark n0 down
		Op{Kind: OpStopJob, Job: 1},
		Op{Kind: OpWait, Wait: 200 * time.Millisecond})
	vs, st := RunStats(t, s)
	if len(vs) > 0 {
		t.Errorf("violations:\n%v", vs)
	}
	// The schedule proves something only if job 0 was published.
	if st.Publishes == 0 {
		t.Errorf("nothing was published: %+v", st)
	}
}

// stoppedJob runs a job on a single-writer volume and stops it: the
// plainest stop the servers send a client that is up.
func stoppedJob() *Schedule {
	return &Schedule{Seed: 0, Nodes: 1, Servers: 1, Profile: Profile{StageUnstage: true},
		Volumes: []Volume{{ID: "v0", Mode: structs.CSIVolumeAccessModeSingleNodeWriter}},
		Ops: []Op{
			{Kind: OpRunJob, Job: 0, Vol: 0},
			{Kind: OpWait, Wait: 500 * time.Millisecond},
			{Kind: OpStopJob, Job: 0},
			{Kind: OpWait, Wait: 200 * time.Millisecond},
		}}
}

// TestRegression_StoppedJobLeavesNoTask: a stopped job's tasks are killed
// and its claim freed (bugs_test.go shows check 8 fails once the client
// ignores the stop).
func TestRegression_StoppedJobLeavesNoTask(t *testing.T) {
	vs, st := RunStats(t, stoppedJob())
	if len(vs) > 0 {
		t.Errorf("violations:\n%v", vs)
	}
	if st.Publishes == 0 || st.Unpublishes == 0 {
		t.Errorf("the job's volume was never published and unpublished: %+v", st)
	}
}

// TestRunsCheck_ARefusedStopLeavesTheJobLive is the rule behind seeds
// 3864 and 7383's check-5 reports (three servers): a job on a
// single-node-reader-only volume was stopped while the leader was cut
// off, the servers refused the stop ("leadership lost while committing")
// and its alloc kept running with the volume's one claim, so the next
// job on the volume was filtered on every node — rightly: CSI's
// SINGLE_NODE_READER_ONLY is published once, and the servers grant it
// one claim. The checker counted the refused stop as done and judged the
// second job uncontended. The checker was wrong, not the servers: a
// refused stop now counts only when the servers applied it anyway.
func TestRunsCheck_ARefusedStopLeavesTheJobLive(t *testing.T) {
	vol := Volume{ID: "v1", Mode: structs.CSIVolumeAccessModeSingleNodeReader}
	refused := fmt.Errorf("deregistering job %q: raft apply: leadership lost while committing log", "j1")
	for _, tc := range []struct {
		name string
		// applied: the servers stopped j1 although its caller was told
		// they did not.
		applied bool
		stopErr error
		want    bool // check 5 reports j4
	}{
		{name: "stop refused and not applied: j1 still holds the volume", stopErr: refused},
		{name: "stop refused but applied: j4 is uncontended", applied: true, stopErr: refused, want: true},
		{name: "stop accepted: j4 is uncontended", applied: true, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := state.NewStateStore(hclog.NewNullLogger())
			if err != nil {
				t.Fatal(err)
			}
			r := &runner{c: &simCluster{t: t, sched: &Schedule{Nodes: 2, Volumes: []Volume{vol}}}, jobs: map[int]*jobInfo{}}
			run1 := Op{Kind: OpRunJob, Job: 1, Vol: 0, ReadOnly: true}
			run4 := Op{Kind: OpRunJob, Job: 4, Vol: 0, ReadOnly: true}
			j1 := r.job(run1)
			j1.Stop = tc.applied
			for i, j := range []*structs.Job{j1, r.job(run4)} {
				if err := st.UpsertJob(uint64(10+i), j); err != nil {
					t.Fatal(err)
				}
			}
			r.jobs[1] = &jobInfo{op: run1, registered: true, stopped: true, stopErr: tc.stopErr}
			r.jobs[4] = &jobInfo{op: run4, registered: true}
			vs := r.runsCheck(st, map[string]bool{})
			got := slices.ContainsFunc(vs, func(v Violation) bool {
				return v.Check == CheckRuns && strings.Contains(v.Msg, "job j4 ")
			})
			if got != tc.want {
				t.Errorf("check 5 reports j4: %t, want %t (violations %v)", got, tc.want, vs)
			}
			// j1 is judged only when it is live and uncontended: never here.
			if slices.ContainsFunc(vs, func(v Violation) bool { return strings.Contains(v.Msg, "job j1 ") }) {
				t.Errorf("j1 judged: %v", vs)
			}
		})
	}
}

// TestRegression_StopRefusedDuringAFailover is seed 3864 as the simulator
// minimized it (7383 is the same shape): j1's stop is sent while the
// leader is cut off. Whether the servers refuse it depends on timing;
// either way nothing may be reported — a refused stop leaves j1 holding
// the single-node-reader-only volume, an accepted one must let j4 run.
// TestRunsCheck_ARefusedStopLeavesTheJobLive holds the rule every time.
func TestRegression_StopRefusedDuringAFailover(t *testing.T) {
	s := &Schedule{Seed: 3864, Nodes: 2, Servers: 3, Profile: Profile{Controller: true, PublishUnpublish: true},
		DisconnectDeadline: 4 * time.Second,
		Volumes: []Volume{
			{ID: "v0", Mode: structs.CSIVolumeAccessModeSingleNodeReader},
			{ID: "v1", Mode: structs.CSIVolumeAccessModeSingleNodeReader},
		},
		Ops: []Op{
			{Kind: OpRunJob, Job: 1, Vol: 1, ReadOnly: true},
			{Kind: FaultCutServer, Node: -1, Wait: 955 * time.Millisecond},
			{Kind: OpPurgeJob, Job: 1},
			{Kind: OpIneligible, Node: 1},
			{Kind: OpRunJob, Job: 4, Vol: 1, ReadOnly: true},
		}}
	if vs := Run(t, s); len(vs) > 0 {
		t.Errorf("violations:\n%v", vs)
	}
}

// TestRegression_ControllersThatCannotSayWhatTheyAdvertise is what seed
// 6719 (checks 1 and 4, in a run whose process stalled 8.8 s) comes down
// to: every controller instance's ControllerGetCapabilities fails (a hang
// until the fingerprint's timeout here; a stall did it there), so each
// fingerprints unhealthy with every capability false. The servers counted
// those capabilities: the plugin no longer attached, as far as they knew,
// so the stopped alloc's controller-published claim was freed without
// ControllerUnpublish and the volume stayed attached to its node (check
// 4; there the next claim then attached it to another, check 1). A claim
// taken meanwhile skipped ControllerPublish too. A controller whose
// capabilities call failed now says so (CSIInfo.ControllerCapsUnknown),
// and the publish flags keep their value while no controller says
// (structs.CSIPlugin.ReplaceInstances).
func TestRegression_ControllersThatCannotSayWhatTheyAdvertise(t *testing.T) {
	s := &Schedule{Seed: 0, Nodes: 2, Servers: 1,
		Profile: Profile{Controller: true, PublishUnpublish: true},
		Volumes: []Volume{{ID: "v0", Mode: structs.CSIVolumeAccessModeSingleNodeWriter}},
		Ops: []Op{
			{Kind: OpRunJob, Job: 0, Vol: 0},
			{Kind: OpWait, Wait: 300 * time.Millisecond},
			{Kind: FaultCtrl, Method: "ControllerGetCapabilities", Hang: true},
			{Kind: OpWait, Wait: 6 * time.Second}, // a fingerprint pass times out on every node, and the servers hear of it
			{Kind: OpStopJob, Job: 0},
			{Kind: OpWait, Wait: time.Second},
			{Kind: FaultHealCSI},
			{Kind: OpWait, Wait: 2 * time.Second},
		}}
	if vs := Run(t, s); len(vs) > 0 {
		t.Errorf("violations:\n%v", vs)
	}
}

// TestRegression_KilledClientsLastReportLandsLate is seed 29427 (three
// servers): the leader is cut off while a client's alloc is being set up;
// the client's report fails with "leadership lost", its retry waits in a
// server's forward for a new leader, and the client is killed meanwhile.
// Its restarted process claims, mounts and starts the task and reports it
// running; the dead process's report then lands on top of it, and the
// servers saw the alloc pending for good (check 5; 2 of 70 replays).
// state's UpdateAllocsFromClient now drops a report that an applied one
// overtook; TestAllocs_ClientReportOvertakenIsDropped shows it every time.
func TestRegression_KilledClientsLastReportLandsLate(t *testing.T) {
	s := &Schedule{Seed: 29427, Nodes: 2, Servers: 3, DisconnectDeadline: 4 * time.Second,
		Profile: Profile{Controller: true, PublishUnpublish: true, PublishReadOnly: true, StageUnstage: true},
		Volumes: []Volume{
			{ID: "v0", Mode: structs.CSIVolumeAccessModeMultiNodeSingleWriter},
			{ID: "v1", Mode: structs.CSIVolumeAccessModeSingleNodeReader},
			{ID: "v2", Mode: structs.CSIVolumeAccessModeMultiNodeReader},
		},
		Ops: []Op{
			{Kind: OpRunJob, Job: 0, Vol: 0},
			{Kind: OpDetach, Vol: 1, Node: 0},
			{Kind: OpEligible, Node: 1},
			{Kind: OpExitTasks},
			{Kind: FaultCutServer, Node: -1, Wait: 1683 * time.Millisecond},
			{Kind: OpExitTasks},
			{Kind: OpDrain, Node: 0},
			{Kind: OpWait, Wait: 609 * time.Millisecond},
			{Kind: FaultCtrl, Method: "ControllerUnpublishVolume", Hang: true},
			{Kind: OpRunJob, Job: 1, Vol: 1, ReadOnly: true},
			{Kind: OpWait, Wait: 122 * time.Millisecond},
			{Kind: FaultNode, Node: 1, Method: "NodeUnpublishVolume", Code: codes.Unimplemented},
			{Kind: FaultKill, Node: 1},
			{Kind: OpRunJob, Job: 2, Vol: 2, ReadOnly: true, Batch: true},
			{Kind: OpIneligible, Node: 0},
		}}
	if vs := Run(t, s); len(vs) > 0 {
		t.Errorf("violations:\n%v", vs)
	}
}

// TestRegression_SecondControllerAnsweredForACallThatMayStillRun is seed
// 26854 (one server; seed 25914 is consistent with the same, with
// Unimplemented): a client is partitioned while the servers'
// ControllerPublish runs through its controller; the call succeeds there
// but its answer is lost with the session, and the servers tried the
// next controller, whose scripted InvalidArgument they took for the end
// of the call: the reservation lost ControllerPublished, was freed without
// ControllerUnpublish, and the volume stayed attached (check 4; 3 of about
// 100 replays under load). A call that may still run on one controller now
// ends the try (nomad's tryControllers), and a final answer from a call
// that may still run keeps the reservation attached;
// TestTryControllers_StopsWhereTheCallMayStillRun and
// TestCSIClaim_AFinalAnswerFromACallThatMayStillRunKeepsTheAttachment show
// each every time.
func TestRegression_SecondControllerAnsweredForACallThatMayStillRun(t *testing.T) {
	s := &Schedule{Seed: 26854, Nodes: 2, Servers: 1, DisconnectDeadline: 4 * time.Second,
		Profile: Profile{Controller: true, PublishUnpublish: true, StageUnstage: true},
		Volumes: []Volume{
			{ID: "v0", Mode: structs.CSIVolumeAccessModeMultiNodeReader},
			{ID: "v1", Mode: structs.CSIVolumeAccessModeMultiNodeReader},
		},
		Ops: []Op{
			{Kind: FaultSlow, Node: 1, Method: "NodeStageVolume", Wait: 1013 * time.Millisecond},
			{Kind: OpRunJob, Job: 0, Vol: 1, ReadOnly: true, Batch: true},
			{Kind: OpRunJob, Job: 1, Vol: 0, ReadOnly: true},
			{Kind: FaultNode, Node: 0, Method: "NodeStageVolume", Code: codes.FailedPrecondition},
			{Kind: FaultNode, Node: 1, Method: "NodeUnpublishVolume", Code: codes.DeadlineExceeded},
			{Kind: FaultCtrl, Method: "ControllerPublishVolume", Code: codes.InvalidArgument},
			{Kind: OpPurgeJob, Job: 1},
			{Kind: OpStopJob, Job: 0},
			{Kind: OpRunJob, Job: 2, Vol: 1, ReadOnly: true},
			{Kind: FaultCutNode, Node: 1, Wait: 3955 * time.Millisecond},
			{Kind: OpGC},
			{Kind: OpWait, Wait: 690 * time.Millisecond},
			{Kind: OpDetach, Vol: 0, Node: 1},
			{Kind: OpWait, Wait: 601 * time.Millisecond},
			{Kind: OpEligible, Node: 1},
			{Kind: OpWait, Wait: 162 * time.Millisecond},
		}}
	if vs := Run(t, s); len(vs) > 0 {
		t.Errorf("violations:\n%v", vs)
	}
}
