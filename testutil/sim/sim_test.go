package sim

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// defaultSchedules is how many schedules `go test` (and so `make test`)
// runs when SCHEDULES is not set.
const defaultSchedules = 24

// envInt reads an integer environment variable, or def.
func envInt(t *testing.T, name string, def uint64) uint64 {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: want a non-negative integer: %v", name, s, err)
	}
	return n
}

// runOne runs s in a subtest of its own (which owns the cluster) and
// returns its violations.
func runOne(t *testing.T, s *Schedule) []Violation {
	vs, _ := runStats(t, s)
	return vs
}

func runStats(t *testing.T, s *Schedule) ([]Violation, Stats) {
	var vs []Violation
	var st Stats
	t.Run(fmt.Sprintf("seed=%d", s.Seed), func(t *testing.T) {
		vs, st = RunStats(t, s)
		if os.Getenv("SIM_VERBOSE") != "" {
			t.Logf("%s%+v", s, st)
		}
	})
	return vs, st
}

// report prints a violating schedule, shrinks it and prints the minimized
// schedule that still fails.
func report(t *testing.T, s *Schedule, vs []Violation, budget int) *Schedule {
	var b strings.Builder
	fmt.Fprintf(&b, "VIOLATION in schedule (replay: SEED=%d make sim)\n%s", s.Seed, s)
	for _, v := range vs {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	min := s.withOps(Shrink(s.Ops, func(ops []Op) bool { return len(runOne(t, s.withOps(ops))) > 0 }, budget))
	fmt.Fprintf(&b, "minimized (%d of %d ops, still fails):\n%s", len(min.Ops), len(s.Ops), min)
	t.Error(b.String())
	return min
}

// runBatch runs scheds in parallel, each in a subtest that owns its
// cluster, and returns their violations and the witnesses' total counts.
func runBatch(t *testing.T, scheds []*Schedule) ([][]Violation, Stats) {
	results := make([][]Violation, len(scheds))
	var total Stats
	var mu sync.Mutex
	t.Run("batch", func(t *testing.T) {
		for i, s := range scheds {
			t.Run(fmt.Sprintf("seed=%d", s.Seed), func(t *testing.T) {
				t.Parallel()
				vs, st := RunStats(t, s)
				if os.Getenv("SIM_VERBOSE") != "" {
					t.Logf("%s%+v", s, st)
				}
				mu.Lock()
				defer mu.Unlock()
				results[i] = vs
				total.Publishes += st.Publishes
				total.Unpublishes += st.Unpublishes
				total.Failed += st.Failed
			})
		}
	})
	return results, total
}

// TestSim runs SCHEDULES seeded schedules (seeds SEED_BASE, SEED_BASE+1,
// ...), or replays the one schedule of SEED. It
// prints "sim: <N> schedules, <V> violations, <S> s" for `make sim`.
// Without SCHEDULES it runs defaultSchedules, the share of `make test`.
func TestSim(t *testing.T) {
	n := envInt(t, "SCHEDULES", defaultSchedules)
	base := envInt(t, "SEED_BASE", 1)
	budget := int(envInt(t, "SHRINK_BUDGET", 16))
	seeds := make([]uint64, 0, n)
	if os.Getenv("SEED") != "" {
		seeds = append(seeds, envInt(t, "SEED", 0))
	} else {
		for i := range n {
			seeds = append(seeds, base+i)
		}
	}
	startAt := time.Now()
	// Every schedule is a parallel subtest with its own cluster; go test's
	// -parallel (GOMAXPROCS unless given; make sim passes SIM_PARALLEL)
	// bounds how many run at once. Violating ones are then reported and
	// shrunk one at a time.
	scheds := make([]*Schedule, len(seeds))
	for i, seed := range seeds {
		scheds[i] = Generate(seed, DefaultGen)
	}
	results, total := runBatch(t, scheds)
	violating, done := 0, len(scheds)
	for i, vs := range results {
		if len(vs) > 0 {
			violating++
			report(t, scheds[i], vs, budget)
		}
	}
	// A run that published nothing checked nothing.
	if total.Publishes == 0 {
		t.Errorf("the schedules published no volume: the harness is broken")
	}
	t.Logf("witness: %d publishes, %d unpublishes, %d failed plugin calls", total.Publishes, total.Unpublishes, total.Failed)
	line := fmt.Sprintf("sim: %d schedules, %d violations, %.0f s", done, violating, time.Since(startAt).Seconds())
	t.Log(line)
	fmt.Println(line)
}
