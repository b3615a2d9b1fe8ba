package sim

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
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

// peakRSS is the process's peak resident set (VmHWM), for the README's
// table of long runs.
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// parseSeeds parses SEEDS: seeds separated by commas or spaces.
func parseSeeds(list string) ([]uint64, error) {
	var seeds []uint64
	for _, f := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("SEEDS=%q: %q is not a seed; want non-negative integers separated by commas, e.g. SEEDS=41635,41530", list, f)
		}
		seeds = append(seeds, n)
	}
	if len(seeds) == 0 {
		return nil, fmt.Errorf("SEEDS=%q lists no seed; want e.g. SEEDS=41635,41530", list)
	}
	return seeds, nil
}

func TestParseSeeds(t *testing.T) {
	seeds, err := parseSeeds(" 41635,41530 7\n")
	if err != nil || !slices.Equal(seeds, []uint64{41635, 41530, 7}) {
		t.Fatalf("parseSeeds: %v, %v", seeds, err)
	}
	for _, bad := range []string{"41635,x", ",", "-1"} {
		if _, err := parseSeeds(bad); err == nil || !strings.Contains(err.Error(), "SEEDS=") {
			t.Errorf("parseSeeds(%q): want an error naming SEEDS, got %v", bad, err)
		}
	}
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
	if budget == 0 {
		fmt.Fprintf(&b, "not shrunk (SHRINK_BUDGET=0, or past SHRINK_MAX in this run): replay with SEED=%d\n", s.Seed)
		t.Error(b.String())
		return s
	}
	min := s.withOps(Shrink(s.Ops, func(ops []Op) bool { return len(runOne(t, s.withOps(ops))) > 0 }, budget))
	fmt.Fprintf(&b, "minimized (%d of %d ops, still fails):\n%s", len(min.Ops), len(s.Ops), min)
	t.Error(b.String())
	return min
}

// runBatch runs scheds concurrently, each in a subtest that owns its
// cluster, and returns their violations and the witnesses' total counts.
//
// A schedule is mostly waiting (its own waits, a quiet spell before the
// end state is judged), so throughput is how many run at once. One-server
// and three-server schedules get separate bounds (parallelism): a
// one-server cluster has no election to lose under load, while the
// three-server clusters' 100 ms election timeouts flap once too many
// compete for the cores. Subtests are started by one dispatcher per kind
// (t.Run may be called from several goroutines at once), so a kind at
// its bound never holds up the other.
func runBatch(t *testing.T, scheds []*Schedule) ([][]Violation, Stats) {
	p1, p3 := parallelism(t)
	return runBounded(t, scheds, p1, p3, RunStats)
}

// runBounded is runBatch with its bounds and the function that runs one
// schedule given.
func runBounded(t *testing.T, scheds []*Schedule, p1, p3 int, run func(testing.TB, *Schedule) ([]Violation, Stats)) ([][]Violation, Stats) {
	results := make([][]Violation, len(scheds))
	var total Stats
	var mu sync.Mutex
	t.Run("batch", func(t *testing.T) {
		var wg sync.WaitGroup
		dispatch := func(three bool, n int) {
			defer wg.Done()
			sem := make(chan struct{}, n)
			var runs sync.WaitGroup
			for i, s := range scheds {
				if (s.Servers >= 3) != three {
					continue
				}
				sem <- struct{}{}
				runs.Go(func() {
					defer func() { <-sem }()
					t.Run(fmt.Sprintf("seed=%d", s.Seed), func(t *testing.T) {
						defer watchdog(s)()
						vs, st := run(t, s)
						if os.Getenv("SIM_VERBOSE") != "" {
							t.Logf("%s%+v", s, st)
						}
						// At once, not only in the report at the end: a
						// run that dies or hangs keeps what it found.
						for _, v := range vs {
							t.Logf("seed=%d servers=%d violation: %s", s.Seed, s.Servers, v)
						}
						mu.Lock()
						defer mu.Unlock()
						results[i] = vs
						total.Publishes += st.Publishes
						total.Unpublishes += st.Unpublishes
						total.Failed += st.Failed
					})
				})
			}
			runs.Wait()
		}
		wg.Add(2)
		go dispatch(false, p1)
		go dispatch(true, p3)
		wg.Wait()
	})
	return results, total
}

// hangWatch: a schedule still running after .after has its seed and
// every goroutine's stack written to .out. A schedule takes seconds
// (minutes when the process is starved, stall.go); a run under -timeout 0
// that hangs otherwise says nothing until someone looks (seeds
// 42000-43999 once hung for 1,130 s on a server's shutdown).
var hangWatch = struct {
	after time.Duration
	out   io.Writer
}{10 * time.Minute, os.Stdout}

// watchdog starts s's hang watch; the func it returns ends it.
func watchdog(s *Schedule) (stop func() bool) {
	after, out := hangWatch.after, hangWatch.out
	return time.AfterFunc(after, func() {
		var b bytes.Buffer
		fmt.Fprintf(&b, "sim: seed=%d servers=%d still running after %s (replay: SEED=%d make sim); goroutines:\n", s.Seed, s.Servers, after, s.Seed)
		_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
		_, _ = out.Write(b.Bytes())
	}).Stop
}

// parallelism is how many one-server and how many three-server schedules
// run at once: SIM_PARALLEL and SIM_PARALLEL3, each defaulting to go
// test's -parallel (GOMAXPROCS unless given), and SIM_PARALLEL3 to no
// more than SIM_PARALLEL.
func parallelism(t *testing.T) (one, three int) {
	def := uint64(runtime.GOMAXPROCS(0))
	if f := flag.Lookup("test.parallel"); f != nil {
		if n, err := strconv.ParseUint(f.Value.String(), 10, 64); err == nil && n > 0 {
			def = n
		}
	}
	one = int(max(1, envInt(t, "SIM_PARALLEL", def)))
	three = int(max(1, envInt(t, "SIM_PARALLEL3", uint64(one))))
	return one, three
}

// TestSim runs SCHEDULES seeded schedules (seeds SEED_BASE, SEED_BASE+1,
// ...), or replays the one schedule of SEED, or the list of SEEDS (all at
// once, as a run would, each violating one shrunk: triage under load). It
// prints "sim: <N> schedules, <V> violations, <S> s" for `make sim`.
// Without SCHEDULES it runs defaultSchedules, the share of `make test`.
func TestSim(t *testing.T) {
	n := envInt(t, "SCHEDULES", defaultSchedules)
	base := envInt(t, "SEED_BASE", 1)
	budget := int(envInt(t, "SHRINK_BUDGET", 16))
	seeds := make([]uint64, 0, n)
	// shrinkMax: how many violating schedules are shrunk. Shrinking runs
	// one schedule at a time, up to SHRINK_BUDGET of them per violation,
	// and a violation that needs load to appear does not come back, so
	// each costs the whole budget (~50 s): a long run shrinks its first
	// few and lists the rest for a SEEDS= replay, which shrinks each.
	shrinkMax := uint64(3)
	switch {
	case os.Getenv("SEEDS") != "":
		var err error
		if seeds, err = parseSeeds(os.Getenv("SEEDS")); err != nil {
			t.Fatal(err)
		}
		shrinkMax = uint64(len(seeds))
	case os.Getenv("SEED") != "":
		seeds = append(seeds, envInt(t, "SEED", 0))
		shrinkMax = 1
	default:
		for i := range n {
			seeds = append(seeds, base+i)
		}
	}
	shrinkMax = envInt(t, "SHRINK_MAX", shrinkMax)
	startAt := time.Now()
	// Every schedule is a subtest with its own cluster; SIM_PARALLEL and
	// SIM_PARALLEL3 bound how many run at once (runBatch). Violating ones
	// are then reported and shrunk one at a time.
	scheds := make([]*Schedule, len(seeds))
	for i, seed := range seeds {
		scheds[i] = Generate(seed, DefaultGen)
	}
	results, total := runBatch(t, scheds)
	violating, done := 0, len(scheds)
	var bad []string
	for i, vs := range results {
		if len(vs) > 0 {
			violating++
			bad = append(bad, strconv.FormatUint(scheds[i].Seed, 10))
			b := budget
			if uint64(violating) > shrinkMax {
				b = 0 // reported, not shrunk
			}
			report(t, scheds[i], vs, b)
		}
	}
	if len(bad) > 0 {
		// One line to replay them all together, under the same load.
		t.Logf("violating seeds: SEEDS=%s", strings.Join(bad, ","))
	}
	// A run that published nothing checked nothing.
	if total.Publishes == 0 {
		t.Errorf("the schedules published no volume: the harness is broken")
	}
	t.Logf("witness: %d publishes, %d unpublishes, %d failed plugin calls", total.Publishes, total.Unpublishes, total.Failed)
	// What the bounds did not count (stall.go), for comparing runs.
	t.Logf("process stalled %.1f s of %.0f s; peak RSS %s", processStalls().Stalled().Seconds(), time.Since(startAt).Seconds(), peakRSS())
	line := fmt.Sprintf("sim: %d schedules, %d violations, %.0f s", done, violating, time.Since(startAt).Seconds())
	t.Log(line)
	fmt.Println(line)
}
