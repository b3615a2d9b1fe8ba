//go:build simbugs

package sim

import (
	"slices"
	"testing"

	"github.com/berth-io/berth/helper/simbug"
)

// bugBudget is how many schedules the simulator gets to find each armed
// bug (seeds 1..bugBudget, 4 at a time).
const bugBudget = 16

// TestSimFindsArmedBugs arms each known bug of helper/simbug in turn and
// asserts that the simulator reports it, with the check it breaks, within
// bugBudget schedules: a simulator that cannot fail proves nothing. Run
// with `go test -tags simbugs ./testutil/sim/ -run TestSimFindsArmedBugs`
// (make sim and make test do).
func TestSimFindsArmedBugs(t *testing.T) {
	want := map[simbug.Bug][]Check{
		simbug.FreeOnStop:              {CheckEarlyFree, CheckWriters},
		simbug.IgnoreCapability:        {CheckProtocol},
		simbug.SkipControllerUnpublish: {CheckMounts, CheckWriters},
	}
	for _, b := range simbug.All {
		t.Run(string(b), func(t *testing.T) {
			disarm := simbug.Arm(b)
			defer disarm()
			for seed := uint64(1); seed <= bugBudget; seed += 4 {
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
			t.Errorf("the simulator did not find armed bug %s (checks %v) within %d schedules", b, want[b], bugBudget)
		})
	}
}
