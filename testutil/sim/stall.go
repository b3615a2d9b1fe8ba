package sim

import (
	"sync"
	"sync/atomic"
	"time"
)

// Time the process was not running, and the bounds that do not count it.
//
// The checks' bounds (FreeBound, the waits of start and heal) are real
// time with shortened timers, so a process that gets no CPU for seconds
// (a build beside it, a starved VM) sees a three-server cluster lose its
// leader and miss the bound without any bug. The stall meter measures
// that time: a goroutine ticks every stallTick and adds up how late each
// tick arrives beyond stallSlack; a bound is then its duration of time
// the process ran, so it is extended by what was measured while it ran.
// This does not loosen the guarantee: it does not count time the cluster
// did not get. A bug that leaves a claim un-freed is still reported, once
// the bound's running time has passed (TestSettle_ReportsAClaimLeftUnfreed),
// and no stall stretches a bound past maxStallExtension times itself.

// stallTick is how often the meter looks at the clock; stallSlack is the
// lateness of a tick that is ordinary scheduling, not a stall (it is not
// counted, so the meter errs towards the shorter bound).
const (
	stallTick  = 5 * time.Millisecond
	stallSlack = time.Millisecond
)

// stallMeter adds up how late its ticks arrived.
type stallMeter struct {
	stalled atomic.Int64 // nanoseconds
}

// observe records a tick that came elapsed after the one before.
func (m *stallMeter) observe(elapsed time.Duration) {
	if late := elapsed - stallTick - stallSlack; late > 0 {
		m.stalled.Add(int64(late))
	}
}

// Stalled is the time the process was not running since the meter began.
func (m *stallMeter) Stalled() time.Duration { return time.Duration(m.stalled.Load()) }

func (m *stallMeter) run() {
	tick := time.NewTicker(stallTick)
	last := time.Now()
	for now := range tick.C {
		// A tick late by a stall is delivered when the process runs
		// again; the ticker drops the ones it missed meanwhile, so
		// now-last spans the whole stall.
		now = time.Now()
		m.observe(now.Sub(last))
		last = now
	}
}

// processStalls is the meter of this process, started on first use. One
// serves every schedule: a stall stops all of them.
var processStalls = sync.OnceValue(func() *stallMeter {
	m := &stallMeter{}
	go m.run()
	return m
})

// runningDeadline is a budget of d of running time from start.
type runningDeadline struct {
	m      *stallMeter
	start  time.Time
	stall0 time.Duration
	d      time.Duration
}

func (m *stallMeter) deadline(d time.Duration) runningDeadline {
	return runningDeadline{m: m, start: time.Now(), stall0: m.Stalled(), d: d}
}

// stalled is the time the process was not running since start.
func (dl runningDeadline) stalled() time.Duration { return dl.m.Stalled() - dl.stall0 }

// maxStallExtension caps what a stall adds to a bound, as a multiple of
// it: the meter counts a goroutine's wait for a core, which a schedule
// spinning on a bug also causes, so a check must end even then (at 4× its
// bound in wall time at most) and report.
const maxStallExtension = 3

// passed: d of running time has passed since start, or d plus
// maxStallExtension·d of wall time.
func (dl runningDeadline) passed() bool {
	return time.Since(dl.start) > dl.d+min(dl.stalled(), maxStallExtension*dl.d)
}
