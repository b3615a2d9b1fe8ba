package sim

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/testutil"
)

// TestRunBounded_SeparateBounds: one-server and three-server schedules
// each run up to their own bound at the same time, and never past it.
// Every run waits until both kinds are at their bounds at once, which
// happens only if a kind at its bound does not hold up the other (a
// single dispatcher in seed order would wait for a one-server slot
// before starting the next three-server schedule, and the reverse).
func TestRunBounded_SeparateBounds(t *testing.T) {
	var scheds []*Schedule
	for i := range 12 {
		servers := 1
		if i%3 == 0 {
			servers = 3
		}
		scheds = append(scheds, &Schedule{Seed: uint64(i), Servers: servers})
	}
	const p1, p3 = 3, 2
	var mu sync.Mutex
	running, peak := map[int]int{}, map[int]int{}
	gate := make(chan struct{})
	run := func(_ testing.TB, s *Schedule) ([]Violation, Stats) {
		mu.Lock()
		running[s.Servers]++
		peak[s.Servers] = max(peak[s.Servers], running[s.Servers])
		if running[1] >= p1 && running[3] >= p3 {
			select {
			case <-gate:
			default:
				close(gate)
			}
		}
		mu.Unlock()
		<-gate
		mu.Lock()
		running[s.Servers]--
		mu.Unlock()
		return []Violation{{Check: CheckRuns, Msg: "seed"}}, Stats{Publishes: 1}
	}
	results, total := runBounded(t, scheds, p1, p3, run)
	must.Eq(t, p1, peak[1], must.Sprint("one-server schedules at once"))
	must.Eq(t, p3, peak[3], must.Sprint("three-server schedules at once"))
	must.Eq(t, len(scheds), total.Publishes)
	for i, vs := range results {
		must.Len(t, 1, vs, must.Sprintf("schedule %d's violations", i))
	}
}

// TestRunBounded_ReportsAHungSchedule: a schedule that does not return
// has its seed and the goroutines' stacks printed while it hangs, so a
// long run that hangs says where.
func TestRunBounded_ReportsAHungSchedule(t *testing.T) {
	out := &testutil.SyncBuffer{}
	saved := hangWatch
	hangWatch.after, hangWatch.out = 50*time.Millisecond, out
	defer func() { hangWatch = saved }()
	release := make(chan struct{})
	go func() {
		defer close(release)
		_ = waitFor(20*time.Second, func() error {
			if !strings.Contains(out.String(), "seed=7 servers=1 still running") {
				return fmt.Errorf("no hang report yet")
			}
			return nil
		})
	}()
	hung := func(testing.TB, *Schedule) ([]Violation, Stats) {
		<-release // hangs until the report is out (or 20 s)
		return nil, Stats{}
	}
	runBounded(t, []*Schedule{{Seed: 7, Servers: 1}}, 1, 1, hung)
	got := out.String()
	must.StrContains(t, got, "seed=7 servers=1 still running")
	must.StrContains(t, got, "TestRunBounded_ReportsAHungSchedule") // a stack of the hung schedule
}
