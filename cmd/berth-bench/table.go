package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// rowKind says which number of a row is its headline: the one compared
// with Nomad and the target.
type rowKind int

const (
	kindLatency rowKind = iota // p50 of the samples
	kindTotal                  // the total wall time
	kindFloor                  // p50 of a floor, compared with DESIGN.md §7's floor
)

// row is one line of the table.
type row struct {
	ID   string
	Name string
	Kind rowKind
	Sum  summary
	// Total is the wall time of the whole row (kindTotal rows, and rows
	// whose samples are parts of one run).
	Total time.Duration
	// Floor is the floor measured in this run that bounds the row; 0: none.
	Floor time.Duration
	// Size is what the row is measured at (volumes, allocs), matched
	// against reference.Size.
	Size int
	Err  error
	// Runs is, after medianOf, each run's figure that the row's goal
	// judges (its headline when it has no goal), in run order.
	Runs []time.Duration
}

// results is one run of the bench.
type results struct {
	Started    time.Time
	CPUs       int
	DataDir    string
	FSType     string
	LoadBefore string // /proc/loadavg's first three fields
	LoadAfter  string
	Rows       []row
	// Notes are printed under the table, e.g. why the run ended early.
	Notes []string
	// Runs is how many whole runs the rows are the median of (0 or 1: one).
	Runs int
	// Steps is where the claim rows' time goes (steps.go).
	Steps []stepRow
}

func (r *results) failed() bool {
	return len(r.Notes) > 0 || slices.ContainsFunc(r.Rows, func(x row) bool { return x.Err != nil })
}

// sortedRows returns the rows in rowOrder; unknown IDs go last.
func (r *results) sortedRows() []row {
	out := slices.Clone(r.Rows)
	idx := func(id string) int {
		if i := slices.Index(rowOrder, id); i >= 0 {
			return i
		}
		return len(rowOrder)
	}
	slices.SortStableFunc(out, func(a, b row) int { return idx(a.ID) - idx(b.ID) })
	return out
}

// headline is the number the row is judged by.
func (x row) headline() time.Duration {
	if x.Kind == kindTotal {
		return x.Total
	}
	return x.Sum.P50
}

// reference returns what the row is compared with, and whether Nomad's
// number applies: it was measured at the row's size, or at any.
func (x row) reference() (reference, bool) {
	ref := references[x.ID]
	return ref, ref.NomadBest > 0 && (ref.Size == 0 || ref.Size == x.Size)
}

// target returns DESIGN.md §7's range for the row (Nomad ÷ 5 to ÷ 3).
func (x row) target() (lo, hi time.Duration, ok bool) {
	ref, ok := x.reference()
	if !ok || !ref.Target {
		return 0, 0, false
	}
	return ref.NomadBest / targetLoFactor, ref.NomadBest / targetHiFactor, true
}

// vsNomad is Nomad's number divided by ours (2 = twice as fast).
func (x row) vsNomad() (float64, bool) {
	ref, ok := x.reference()
	h := x.headline()
	if !ok || x.Err != nil || h <= 0 {
		return 0, false
	}
	return float64(ref.NomadBest) / float64(h), true
}

// met reports whether the headline is within the target's 3x bound.
func (x row) met() (met, ok bool) {
	_, hi, ok := x.target()
	if !ok || x.Err != nil || x.headline() <= 0 {
		return false, false
	}
	return x.headline() <= hi, true
}

// fmtDur prints a duration with three significant digits in the unit that
// suits it; 0 (not measured) prints as "-". It is pure.
func fmtDur(d time.Duration) string {
	var v float64
	var unit string
	switch {
	case d <= 0:
		return "-"
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", int64(d))
	case d < time.Millisecond:
		v, unit = float64(d)/float64(time.Microsecond), "µs"
	case d < time.Second:
		v, unit = float64(d)/float64(time.Millisecond), "ms"
	default:
		v, unit = d.Seconds(), "s"
	}
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f%s", v, unit)
	case v >= 10:
		return fmt.Sprintf("%.1f%s", v, unit)
	}
	return fmt.Sprintf("%.2f%s", v, unit)
}

// cells returns a row's table cells after its name.
func (x row) cells() []string {
	ref, applies := x.reference()
	n := "-"
	if x.Sum.N > 0 {
		n = fmt.Sprint(x.Sum.N)
	}
	p50, p99, total := fmtDur(x.Sum.P50), fmtDur(x.Sum.P99), fmtDur(x.Total)
	if x.Err != nil {
		p50, p99, total = "FAILED", "-", "-"
	}
	target := "-"
	if lo, hi, ok := x.target(); ok {
		target = fmtDur(lo) + "–" + fmtDur(hi)
	} else if ref.Floor != "" {
		target = "§7 floor " + ref.Floor
	}
	nomad := "-"
	switch {
	case ref.Nomad != "" && !applies:
		nomad = fmt.Sprintf("%s at %d", ref.Nomad, ref.Size)
	case ref.Nomad != "":
		nomad = ref.Nomad
	}
	vs := "-"
	if f, ok := x.vsNomad(); ok {
		vs = fmt.Sprintf("%.1fx", f)
	}
	met := "-"
	if m, ok := x.met(); ok {
		met = map[bool]string{true: "yes", false: "no"}[m]
	}
	goalCell, goalMet := "-", "-"
	if g, ok := x.goal(); ok {
		goalCell = g.String()
	}
	if m, ok := x.goalMet(); ok {
		goalMet = map[bool]string{true: "yes", false: "no"}[m]
	}
	cells := []string{n, p50, p99, total, fmtDur(x.Floor), target, nomad, vs, met, goalCell, goalMet}
	if len(x.Runs) > 0 {
		each := make([]string, len(x.Runs))
		for i, d := range x.Runs {
			each[i] = fmtDur(d)
		}
		cells = append(cells, strings.Join(each, ", "))
	}
	return cells
}

// writeTable prints the results as an aligned table with a short legend.
func writeTable(w io.Writer, r *results) error {
	fmt.Fprintf(w, "berth-bench %s: one agent (server + client), Raft on disk (raft-wal, %s at %s), %d CPUs\n\n",
		r.Started.UTC().Format("2006-01-02 15:04 UTC"), r.FSType, r.DataDir, r.CPUs)
	if r.Runs > 1 {
		fmt.Fprintf(w, "Each figure is the median of %d runs, each with a fresh agent; EACH RUN is the figure the goal judges.\n\n", r.Runs)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := "ROW\tN\tP50\tP99\tTOTAL\tFLOOR\tTARGET (§7)\tNOMAD\tVS NOMAD\tMET\tGOAL (#20)\tGOAL MET"
	if r.Runs > 1 {
		header += "\tEACH RUN"
	}
	fmt.Fprintln(tw, header)
	var errs []string
	for _, x := range r.sortedRows() {
		fmt.Fprintln(tw, x.Name+"\t"+strings.Join(x.cells(), "\t"))
		if x.Err != nil {
			errs = append(errs, fmt.Sprintf("  %s: %v", x.Name, x.Err))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nP50/P99: nearest rank (P99 from 100 samples). Compared with Nomad: TOTAL where given, else P50.\n"+
		"FLOOR: measured in this run; the register rows: a register to a bare HTTP server that appends to a\n"+
		"raft-wal; the 1-alloc rows: 1 raft-wal append + 1 gRPC call + 1 bind-mount pair.\n"+
		"TARGET: DESIGN.md §7, 3–5x better than Nomad; MET: at or under its 3x end. NOMAD: measured on a\n"+
		"machine like this (perf-anchors.md); VS NOMAD: Nomad's number (the better end of a range) ÷ ours.\n"+
		"GOAL: issue 20's bound on the figure it names; GOAL MET: whether this run meets it.\n"+
		"Load average before %s, after %s.\n", r.LoadBefore, r.LoadAfter)
	for _, g := range r.unmeasuredGoals() {
		fmt.Fprintf(w, "goal not measured in this run: %s, %s\n", g.name(), g)
	}
	if len(errs) > 0 {
		fmt.Fprintf(w, "\nfailed rows:\n%s\n", strings.Join(errs, "\n"))
	}
	writeSteps(w, r.Steps)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\nnote: %s\n", n)
	}
	return nil
}

// jsonRow is a row in -json output; durations are integer nanoseconds, as
// in Berth's API.
type jsonRow struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	N          int      `json:"n"`
	Size       int      `json:"size,omitempty"`
	P50        int64    `json:"p50_ns,omitempty"`
	P99        int64    `json:"p99_ns,omitempty"`
	Max        int64    `json:"max_ns,omitempty"`
	Total      int64    `json:"total_ns,omitempty"`
	Floor      int64    `json:"floor_ns,omitempty"`
	TargetLo   int64    `json:"target_lo_ns,omitempty"`
	TargetHi   int64    `json:"target_hi_ns,omitempty"`
	Met        *bool    `json:"met,omitempty"`
	Nomad      string   `json:"nomad,omitempty"`
	NomadBest  int64    `json:"nomad_ns,omitempty"`
	NomadSize  int      `json:"nomad_size,omitempty"`
	VsNomad    *float64 `json:"vs_nomad,omitempty"`
	DesignNote string   `json:"design_floor,omitempty"`
	Goal       int64    `json:"goal_ns,omitempty"`  // issue 20's bound
	GoalBy     string   `json:"goal_by,omitempty"`  // p50, max or total
	GoalMet    *bool    `json:"goal_met,omitempty"` // nil: no goal, or not measured
	Runs       []int64  `json:"runs_ns,omitempty"`  // each run's figure, with -runs
	Error      string   `json:"error,omitempty"`
}

type jsonResults struct {
	Started    time.Time `json:"started"`
	CPUs       int       `json:"cpus"`
	DataDir    string    `json:"data_dir"`
	FSType     string    `json:"fs_type"`
	LoadBefore string    `json:"load_before"`
	LoadAfter  string    `json:"load_after"`
	Rows       []jsonRow `json:"rows"`
	Runs       int       `json:"runs,omitempty"`
	Notes      []string  `json:"notes,omitempty"`
	Steps      []stepRow `json:"steps,omitempty"`
}

// writeJSON prints the results as one JSON object.
func writeJSON(w io.Writer, r *results) error {
	out := jsonResults{
		Started: r.Started.UTC(), CPUs: r.CPUs, DataDir: r.DataDir, FSType: r.FSType,
		LoadBefore: r.LoadBefore, LoadAfter: r.LoadAfter, Rows: []jsonRow{}, Notes: r.Notes, Runs: r.Runs, Steps: r.Steps,
	}
	for _, x := range r.sortedRows() {
		ref, applies := x.reference()
		if !applies {
			ref.NomadBest = 0
		}
		j := jsonRow{
			ID: x.ID, Name: x.Name, N: x.Sum.N, Size: x.Size, NomadSize: ref.Size,
			P50: int64(x.Sum.P50), P99: int64(x.Sum.P99), Max: int64(x.Sum.Max), Total: int64(x.Total),
			Floor: int64(x.Floor), Nomad: ref.Nomad, NomadBest: int64(ref.NomadBest), DesignNote: ref.Floor,
		}
		if lo, hi, ok := x.target(); ok {
			j.TargetLo, j.TargetHi = int64(lo), int64(hi)
		}
		if m, ok := x.met(); ok {
			j.Met = &m
		}
		if f, ok := x.vsNomad(); ok {
			j.VsNomad = &f
		}
		if g, ok := x.goal(); ok {
			j.Goal, j.GoalBy = int64(g.Max), g.By.String()
		}
		if m, ok := x.goalMet(); ok {
			j.GoalMet = &m
		}
		for _, d := range x.Runs {
			j.Runs = append(j.Runs, int64(d))
		}
		if x.Err != nil {
			j.Error = x.Err.Error()
		}
		out.Rows = append(out.Rows, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
