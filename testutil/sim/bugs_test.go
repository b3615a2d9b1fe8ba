//go:build simbugs

package sim

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-io/berth/helper/simbug"
)

// bugBudget is how many schedules the simulator gets to find each armed
// bug (seeds 1..bugBudget, 4 at a time), unless bugBudgets says more.
const bugBudget = 16

// bugBudgets: bugs that only rarer faults expose get more schedules, or
// none (0) when a random search does not find them within a budget make
// test can afford; TestSimFindsFreeOnNodeDownWithAPartition then shows
// the checker catches the bug in a schedule written for it.
var bugBudgets = map[simbug.Bug]uint64{
	// A client must be cut off, promising a disconnect deadline, while
	// it runs the writer of a single-writer volume, for over half a
	// second and under 2 s: random schedules rarely draw it (none of
	// seeds 1-40).
	simbug.FreeOnNodeDown: 0,
	// An alloc must be stopped while its node plugin is inside a slow
	// NodeStage or NodePublish (FaultSlow): random schedules found it at
	// seed 74 (4 of 5 replays), none of seeds 1-72, more than make test
	// can afford; TestSimFindsUnfencedVolumeCallWithASlowPublish runs the
	// schedule written for it.
	simbug.UnfencedVolumeCall: 0,
	// Random schedules find it at once (seed 1 of 1-4), but each that
	// does waits FreeBound before it is judged, 22 s in all; a schedule
	// written for it (TestSimFindsIgnoreStopWithAStoppedJob) takes 4 s.
	simbug.IgnoreStop: 0,
}

// TestSimFindsArmedBugs arms each known bug of helper/simbug in turn and
// asserts that the simulator reports it, with the check it breaks, within
// bugBudget schedules: a simulator that cannot fail proves nothing. Run
// with `go test -tags simbugs ./testutil/sim/ -run '^TestSimFinds'`
// (make sim and make test do).
func TestSimFindsArmedBugs(t *testing.T) {
	want := map[simbug.Bug][]Check{
		simbug.FreeOnStop:              {CheckEarlyFree, CheckWriters},
		simbug.IgnoreCapability:        {CheckProtocol},
		simbug.SkipControllerUnpublish: {CheckMounts, CheckWriters},
		simbug.FreeOnNodeDown:          {CheckWriters},
		simbug.UnfencedVolumeCall:      {CheckMounts, CheckWriters},
		simbug.IgnoreStop:              {CheckStopped},
	}
	for _, b := range simbug.All {
		t.Run(string(b), func(t *testing.T) {
			disarm := simbug.Arm(b)
			defer disarm()
			budget, ok := bugBudgets[b]
			if !ok {
				budget = bugBudget
			}
			if budget == 0 {
				t.Skipf("%s is not searched for at random; a schedule written for it finds it", b)
			}
			for seed := uint64(1); seed <= budget; seed += 4 {
				var scheds []*Schedule
				for s := seed; s < seed+4; s++ {
					scheds = append(scheds, Generate(s, DefaultGen))
				}
				results, _ := runBatch(t, scheds)
				for i, vs := range results {
					for _, v := range vs {
						if slices.Contains(want[b], v.Check) {
							t.Logf("found %s with schedule seed=%d: %s", b, scheds[i].Seed, v)
							return
						}
					}
				}
			}
			t.Errorf("the simulator did not find armed bug %s (checks %v) within %d schedules", b, want[b], budget)
		})
	}
}

// TestSimFindsFreeOnNodeDownWithAPartition: the schedule of
// TestPartition_ClientCutOffKeepsItsClaimUntilHealed, which has no
// violation, has one once the servers free a down node's claims at once.
func TestSimFindsFreeOnNodeDownWithAPartition(t *testing.T) {
	defer simbug.Arm(simbug.FreeOnNodeDown)()
	vs := Run(t, partitionedWriter())
	if !slices.ContainsFunc(vs, func(v Violation) bool { return v.Check == CheckWriters }) {
		t.Errorf("armed %s, the partitioned writer's schedule reports %v, want a check 1 violation", simbug.FreeOnNodeDown, vs)
	}
}

// TestSimFindsUnfencedVolumeCallWithASlowPublish: the schedule of
// TestRegression_SlowPublishOfAStoppedAlloc, which has no violation, has
// one once the client's volume manager lets go of a volume whose plugin
// call is still running.
func TestSimFindsUnfencedVolumeCallWithASlowPublish(t *testing.T) {
	defer simbug.Arm(simbug.UnfencedVolumeCall)()
	vs := Run(t, slowPublishOfAStoppedAlloc())
	if !slices.ContainsFunc(vs, func(v Violation) bool { return v.Check == CheckMounts || v.Check == CheckWriters }) {
		t.Errorf("armed %s, the slow publish's schedule reports %v, want a check 4 or check 1 violation", simbug.UnfencedVolumeCall, vs)
	}
}

// TestSimFindsIgnoreStopWithAStoppedJob: the schedule of
// TestRegression_StoppedJobLeavesNoTask, which has no violation, has a
// check 8 one naming the job's task once the client ignores the servers'
// stop. The end state is judged after 3 s instead of FreeBound: a task
// the client never kills runs however long one waits.
func TestSimFindsIgnoreStopWithAStoppedJob(t *testing.T) {
	defer simbug.Arm(simbug.IgnoreStop)()
	vs, _ := runWith(t, stoppedJob(), runOpts{bound: 3 * time.Second})
	if !slices.ContainsFunc(vs, func(v Violation) bool {
		return v.Check == CheckStopped && strings.Contains(v.Msg, "still run on n0")
	}) {
		t.Errorf("armed %s, the stopped job's schedule reports %v, want a check 8 violation", simbug.IgnoreStop, vs)
	}
	t.Logf("armed %s: %v", simbug.IgnoreStop, vs)
}
