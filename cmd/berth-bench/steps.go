package main

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-io/berth/helper/steptrace"
)

// The step breakdown: the agent runs with $BERTH_STEP_TRACE set, so its
// client appends a line per step of each alloc's claim cycle
// (helper/steptrace). The bench adds the moments only it knows (the
// claim's creation stamped by the leader, the mounted task event, the
// stop call, the free seen through a blocking query) and reports, per
// path, how long each leg between two consecutive steps took: the median
// over the one-alloc runs, and the slowest alloc of the many-alloc job.

// Steps only the bench knows.
const (
	stepCreated = "claim-created" // the claim's CreateTime (plan apply, leader clock)
	stepMounted = "mounted-event" // the CSI hook's "mounted" task event
	stepStopped = "stop-called"   // the job's Deregister returned
	stepFreed   = "freed-seen"    // a blocking volume list saw no claim
	stepRegSent = "register-sent" // the bench sends a register request
	stepRegDone = "register-done" // that call returned
)

// claimPath and stopPath are the steps of each path in order; a step
// missing from a run (a binary without the trace, a plugin that does not
// stage) is skipped, and its leg folds into the next.
var (
	claimPath = []string{stepCreated, steptrace.AllocApplied, steptrace.AllocReceived, steptrace.AllocPersisted, steptrace.PrerunStarted,
		steptrace.ClaimRecorded, steptrace.ClaimSent, steptrace.ClaimServed, steptrace.ClaimProposed,
		steptrace.ClaimApplied, steptrace.ClaimCommitted, steptrace.ClaimAnswered, steptrace.MountRecorded, steptrace.StageSent, steptrace.Staged,
		steptrace.PublishSent, steptrace.Published, stepMounted}
	stopPath = []string{stepStopped, steptrace.StopReceived, steptrace.KillSent, steptrace.TaskExited,
		steptrace.PostrunStarted, steptrace.Unpublished, steptrace.ReleaseAnswered, stepFreed}
	// registerPath is a register request's (marked by the ID of its
	// first volume): proposed → storing is Raft (the WAL append, commit
	// and hand-offs to the FSM goroutine, or the entry's decode when the
	// FSM could not take the leader's message), storing → applied the
	// store's write.
	registerPath = []string{stepRegSent, steptrace.RegisterReceived, steptrace.RegisterDecoded,
		steptrace.RegisterProposed, steptrace.RegisterStoring, steptrace.RegisterApplied, steptrace.RegisterCommitted,
		steptrace.RegisterReplied, stepRegDone}
)

// traceMarks is what the trace file says: alloc ID → step → when (the
// first mark of a step).
type traceMarks map[string]map[string]time.Time

// readTrace reads a trace file; a missing file is an empty trace.
func readTrace(path string) (traceMarks, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return traceMarks{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the step trace: %w", err)
	}
	defer f.Close()
	return parseTrace(f)
}

// parseTrace parses "<unix nanos> <alloc ID> <step>" lines; it skips
// lines it cannot read (a line cut short by the agent's exit). It is pure
// but for reading r.
func parseTrace(r io.Reader) (traceMarks, error) {
	out := traceMarks{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		m := out[f[1]]
		if m == nil {
			m = map[string]time.Time{}
			out[f[1]] = m
		}
		if _, seen := m[f[2]]; !seen {
			m[f[2]] = time.Unix(0, ns)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the step trace: %w", err)
	}
	return out, nil
}

// allocTimes is what the bench saw of one alloc's claim cycle; a zero
// time was not seen.
type allocTimes struct {
	ID                               string
	Created, Mounted, Stopped, Freed time.Time
	// Exited is the task's "Terminated" event: the trace's TaskExited
	// mark is earlier and preferred (see exitedAt).
	Exited time.Time
	// Volume is the alloc's volume (the many-alloc job).
	Volume string
}

// legs returns the legs of one path for one alloc: from each present
// step to the next present one, in path order. It is pure.
func legs(path []string, at map[string]time.Time) []leg {
	var out []leg
	prev := ""
	for _, step := range path {
		t, ok := at[step]
		if !ok || t.IsZero() {
			continue
		}
		if prev != "" {
			out = append(out, leg{From: prev, To: step, D: t.Sub(at[prev])})
		}
		prev = step
	}
	return out
}

// leg is the time from one step to the next.
type leg struct {
	From, To string
	D        time.Duration
}

// stepRow is one leg of the breakdown: its median over N allocs.
type stepRow struct {
	Path string        `json:"path"`
	From string        `json:"from"`
	To   string        `json:"to"`
	N    int           `json:"n"`
	P50  time.Duration `json:"p50_ns"`
}

// marksOf joins what the bench saw of an alloc with its trace marks.
func marksOf(a allocTimes, tr traceMarks) map[string]time.Time {
	at := map[string]time.Time{stepCreated: a.Created, stepMounted: a.Mounted, stepStopped: a.Stopped, stepFreed: a.Freed}
	for step, t := range tr[a.ID] {
		at[step] = t
	}
	return at
}

// breakdown is the median of each leg of path over allocs, in path order,
// named name. It is pure.
func breakdown(name string, path []string, allocs []allocTimes, tr traceMarks) []stepRow {
	marks := make([]map[string]time.Time, 0, len(allocs))
	for _, a := range allocs {
		marks = append(marks, marksOf(a, tr))
	}
	return breakdownOf(name, path, marks)
}

// registerMarks joins the bench's send and return times of one-volume
// registers (volume ID → [sent, done]) with the agent's trace marks.
func registerMarks(times map[string][2]time.Time, tr traceMarks) []map[string]time.Time {
	out := make([]map[string]time.Time, 0, len(times))
	for id, t := range times {
		at := map[string]time.Time{stepRegSent: t[0], stepRegDone: t[1]}
		for step, when := range tr[id] {
			at[step] = when
		}
		out = append(out, at)
	}
	return out
}

// breakdownOf is breakdown over each sample's marks (step → when). It is
// pure.
func breakdownOf(name string, path []string, marks []map[string]time.Time) []stepRow {
	type key struct{ from, to string }
	samples := map[key][]time.Duration{}
	var order []key
	for _, at := range marks {
		for _, l := range legs(path, at) {
			k := key{l.From, l.To}
			if _, ok := samples[k]; !ok {
				order = append(order, k)
			}
			samples[k] = append(samples[k], l.D)
		}
	}
	// Legs in path order: by where they start, then where they end.
	slices.SortStableFunc(order, func(a, b key) int {
		return cmp.Or(cmp.Compare(slices.Index(path, a.from), slices.Index(path, b.from)),
			cmp.Compare(slices.Index(path, a.to), slices.Index(path, b.to)))
	})
	out := make([]stepRow, 0, len(order))
	for _, k := range order {
		s := summarize(samples[k])
		out = append(out, stepRow{Path: name, From: k.from, To: k.to, N: s.N, P50: s.P50})
	}
	return out
}

// writeSteps prints the breakdown under the table.
func writeSteps(w io.Writer, steps []stepRow) {
	if len(steps) == 0 {
		return
	}
	fmt.Fprintf(w, "\nwhere the time goes (agent step trace; p50 of each leg over N allocs or volumes):\n")
	path := ""
	for _, s := range steps {
		if s.Path != path {
			path = s.Path
			fmt.Fprintf(w, "  %s\n", path)
		}
		fmt.Fprintf(w, "    %-18s → %-18s %8s  (N=%d)\n", s.From, s.To, fmtDur(s.P50), s.N)
	}
}

// medianSteps merges the breakdowns of whole runs: each leg's p50 is the
// median of the runs' p50s (the lower middle of an even count, as
// medianOf does for rows), its N the sum. It is pure.
func medianSteps(runs []*results) []stepRow {
	type key struct{ path, from, to string }
	var order []key
	byKey := map[key][]stepRow{}
	for _, r := range runs {
		for _, s := range r.Steps {
			k := key{s.Path, s.From, s.To}
			if _, seen := byKey[k]; !seen {
				order = append(order, k)
			}
			byKey[k] = append(byKey[k], s)
		}
	}
	out := make([]stepRow, 0, len(order))
	for _, k := range order {
		rows := byKey[k]
		m := rows[0]
		p50s := make([]time.Duration, 0, len(rows))
		m.N = 0
		for _, s := range rows {
			p50s = append(p50s, s.P50)
			m.N += s.N
		}
		slices.Sort(p50s)
		m.P50 = p50s[(len(p50s)-1)/2]
		out = append(out, m)
	}
	return out
}
