package main

import (
	"fmt"
	"slices"
	"time"
)

// Issue 20's goals. DESIGN.md §7's target (3–5x better than Nomad, the MET
// column) is one bar; issue 20 set absolute ones per row, some on another
// figure than the row's headline (the slowest of ten publishes, the last
// of a hundred frees), which the GOAL columns judge.

// goalBy says which figure of a row a goal judges.
type goalBy int

const (
	byP50   goalBy = iota // the row's p50
	byMax                 // its slowest sample
	byTotal               // its total wall time
)

// goal is one of issue 20's goals: the row (at a size; 0 is any) and the
// most its figure may be.
type goal struct {
	ID   string
	Size int
	By   goalBy
	Max  time.Duration
	What string // the row, as the issue names it
}

var goals = []goal{
	{ID: rowRegister, By: byP50, Max: 450 * time.Microsecond, What: "register 1 volume"},
	{ID: rowRegisterBatch, Size: 1000, By: byP50, Max: 20 * time.Millisecond, What: "register 1000 in one request"},
	{ID: rowList, Size: 1000, By: byP50, Max: 3 * time.Millisecond, What: "list 1000 volumes"},
	{ID: rowClaimOne, By: byP50, Max: 2 * time.Millisecond, What: "K=1 alloc create → NodePublish done"},
	{ID: rowExitFreedOne, By: byP50, Max: 5 * time.Millisecond, What: "K=1 task exited → claim freed"},
	{ID: rowClaimMany, Size: 10, By: byMax, Max: 30 * time.Millisecond, What: "K=10 slowest publish"},
	{ID: rowStopMany, Size: 100, By: byTotal, Max: 400 * time.Millisecond, What: "K=100 stop → all claims freed"},
	{ID: rowJobRunning, Size: jobAllocs, By: byP50, Max: 300 * time.Millisecond, What: "job submit → 2 allocs running"},
	{ID: rowFailover, By: byP50, Max: time.Second, What: "3-server leader failover"},
	{ID: rowClientRestart, By: byP50, Max: time.Second, What: "client kill -9 → restarted client ready"},
}

func (b goalBy) String() string {
	return map[goalBy]string{byP50: "p50", byMax: "max", byTotal: "total"}[b]
}

func (g goal) String() string { return g.By.String() + " ≤ " + fmtDur(g.Max) }

// name says which row a goal is for, for the list of goals no row met.
func (g goal) name() string {
	if g.Size == 0 {
		return fmt.Sprintf("%s (%s)", g.What, g.ID)
	}
	return fmt.Sprintf("%s (%s at %d)", g.What, g.ID, g.Size)
}

// goal returns the row's issue-20 goal, if it has one at its size.
func (x row) goal() (goal, bool) {
	i := slices.IndexFunc(goals, func(g goal) bool { return g.ID == x.ID && (g.Size == 0 || g.Size == x.Size) })
	if i < 0 {
		return goal{}, false
	}
	return goals[i], true
}

// figure returns the row's figure a goal judges.
func (x row) figure(by goalBy) time.Duration {
	switch by {
	case byMax:
		return x.Sum.Max
	case byTotal:
		return x.Total
	}
	return x.Sum.P50
}

// goalMet reports whether the row meets its issue-20 goal; ok is false
// when it has none or was not measured.
func (x row) goalMet() (met, ok bool) {
	g, ok := x.goal()
	if !ok || x.Err != nil || x.figure(g.By) <= 0 {
		return false, false
	}
	return x.figure(g.By) <= g.Max, true
}

// unmeasuredGoals returns the goals no row of r was measured for.
func (r *results) unmeasuredGoals() []goal {
	var out []goal
	for _, g := range goals {
		if !slices.ContainsFunc(r.Rows, func(x row) bool {
			got, ok := x.goal()
			return ok && got == g && x.Err == nil
		}) {
			out = append(out, g)
		}
	}
	return out
}

// medianOf folds whole runs into one result: each row (by ID and size)
// gets the median of each of its figures over the runs that measured it
// (the lower middle for an even count), and keeps every run's figure that
// its goal judges (or its headline) in Runs. One run is returned as is.
func medianOf(runs []*results) *results {
	if len(runs) == 1 {
		return runs[0]
	}
	out := &results{
		Started: runs[0].Started, CPUs: runs[0].CPUs, DataDir: runs[0].DataDir, FSType: runs[0].FSType,
		LoadBefore: runs[0].LoadBefore, LoadAfter: runs[len(runs)-1].LoadAfter, Runs: len(runs),
	}
	type key struct {
		id   string
		size int
	}
	var order []key
	byKey := map[key][]row{}
	out.Steps = medianSteps(runs)
	for _, r := range runs {
		out.Notes = append(out.Notes, r.Notes...)
		for _, x := range r.Rows {
			k := key{x.ID, x.Size}
			if _, seen := byKey[k]; !seen {
				order = append(order, k)
			}
			byKey[k] = append(byKey[k], x)
		}
	}
	for _, k := range order {
		rows := byKey[k]
		m := rows[0]
		for _, x := range rows[1:] {
			if m.Err == nil && x.Err != nil {
				m.Err = x.Err
			}
			m.Sum.N += x.Sum.N
		}
		pick := func(f func(row) time.Duration) time.Duration {
			var v []time.Duration
			for _, x := range rows {
				v = append(v, f(x))
			}
			slices.Sort(v)
			return v[(len(v)-1)/2]
		}
		m.Sum.P50 = pick(func(x row) time.Duration { return x.Sum.P50 })
		m.Sum.P99 = pick(func(x row) time.Duration { return x.Sum.P99 })
		m.Sum.Max = pick(func(x row) time.Duration { return x.Sum.Max })
		m.Total = pick(func(x row) time.Duration { return x.Total })
		m.Floor = pick(func(x row) time.Duration { return x.Floor })
		m.Runs = nil
		for _, x := range rows {
			if g, ok := x.goal(); ok {
				m.Runs = append(m.Runs, x.figure(g.By))
			} else {
				m.Runs = append(m.Runs, x.headline())
			}
		}
		out.Rows = append(out.Rows, m)
	}
	return out
}
