package sim

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/berth-io/berth/nomad/structs"
)

func TestStallMeter_CountsOnlyLateness(t *testing.T) {
	var m stallMeter
	m.observe(stallTick)
	m.observe(stallTick + stallSlack)
	if got := m.Stalled(); got != 0 {
		t.Fatalf("ticks on time (or within the slack) counted as %v stalled", got)
	}
	m.observe(stallTick + stallSlack + 50*time.Millisecond)
	if got := m.Stalled(); got != 50*time.Millisecond {
		t.Fatalf("a tick 50 ms past its slack: stalled %v, want 50ms", got)
	}
}

// TestStallMeter_MeasuresAStoppedProcess stops the whole test process
// (SIGSTOP: no thread runs, as when it gets no CPU) and has a child
// continue it ~300 ms later: the process's meter must have counted it.
func TestStallMeter_MeasuresAStoppedProcess(t *testing.T) {
	m := processStalls()
	before := m.Stalled()
	// The child's sleep is the stall being measured, not a wait.
	cont := exec.Command("sh", "-c", "sleep 0.3; kill -CONT "+strconv.Itoa(os.Getpid()))
	if err := cont.Start(); err != nil {
		t.Fatalf("starting the child that continues this process: %v", err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGSTOP); err != nil {
		t.Fatalf("stopping this process: %v", err)
	}
	if err := cont.Wait(); err != nil {
		t.Fatalf("the child that continued this process: %v", err)
	}
	// The first tick after the stop may still be on its way.
	err := waitFor(10*time.Second, func() error {
		if got := m.Stalled() - before; got < 200*time.Millisecond {
			return fmt.Errorf("process stopped ~300 ms, the meter counted %v", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRunningDeadline_ExtendedByStall(t *testing.T) {
	var m stallMeter
	dl := m.deadline(time.Second)
	dl.start = dl.start.Add(-2 * time.Second) // two seconds of wall time ago
	if !dl.passed() {
		t.Fatalf("2 s after it began, a 1 s deadline with no stall has not passed")
	}
	m.observe(stallTick + stallSlack + time.Hour)
	if dl.passed() {
		t.Fatalf("a 1 s deadline passed after 2 s of which the process was stalled an hour")
	}
	if got := dl.stalled(); got != time.Hour {
		t.Fatalf("stalled %v since the deadline began, want 1h", got)
	}
	// However long the stall, a bound ends: at most 1+maxStallExtension
	// times itself.
	dl.start = dl.start.Add(-(maxStallExtension + 1) * time.Second)
	if !dl.passed() {
		t.Fatalf("a 1 s deadline has not passed after %d s of wall time", maxStallExtension+3)
	}
}

// TestWaitRunning_EndsByTheCapUnderEndlessStall: a bounded wait whose
// condition never holds, under a meter that measures another hour of
// stall at every poll (a process starved for good, or a schedule spinning
// on a bug), still ends: at 1+maxStallExtension times its bound, and
// reports the condition's error. Seed 2793 was read as such a wait that
// never ended; the cap is what keeps one from doing so.
func TestWaitRunning_EndsByTheCapUnderEndlessStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var m stallMeter
		const d = 20 * time.Second
		start := time.Now()
		never := errors.New("the cluster never recovers")
		_, err := waitRunning(&m, d, func() error {
			m.observe(stallTick + stallSlack + time.Hour)
			if el := time.Since(start); el > 10*d {
				t.Fatalf("a %s wait under endless stall still polling after %s", d, el)
			}
			return never
		})
		if !errors.Is(err, never) {
			t.Fatalf("the wait ended with %v, want the condition's last error", err)
		}
		// It is extended by the stall up to the cap, and no further (one
		// poll interval of slack).
		if el, limit := time.Since(start), (1+maxStallExtension)*d; el < limit || el > limit+time.Second {
			t.Fatalf("a %s wait under endless stall ended after %s, want %s", d, el, limit)
		}
	})
}

// TestEndWithin_ReportsACallThatNeverReturns: a call the harness waits for
// (a server's Shutdown in a leader restart, seed 2793) that never returns
// is an error after its bound, not a hang; one that returns is not.
func TestEndWithin_ReportsACallThatNeverReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var m stallMeter
		const d = 20 * time.Second
		release := make(chan struct{})
		defer close(release)
		start := time.Now()
		if err := endWithin(&m, d, func() { <-release }); err == nil {
			t.Fatalf("a call that never returns: endWithin returned no error")
		}
		if el := time.Since(start); el < d || el > d+time.Second {
			t.Fatalf("endWithin(%s) of a call that never returns ended after %s", d, el)
		}
		if err := endWithin(&m, d, func() {}); err != nil {
			t.Fatalf("a call that returns at once: %v", err)
		}
	})
}

// TestSettle_ReportsAClaimLeftUnfreed: the bound that does not count
// stalls still ends. A stopped job's NodeUnpublish hangs from before the
// heal and again right after it (a plugin that never answers), so the
// claim of its terminal alloc is never freed: settle reports check 3 once
// the bound's running time has passed.
func TestSettle_ReportsAClaimLeftUnfreed(t *testing.T) {
	s := &Schedule{Seed: 0, Nodes: 1, Servers: 1,
		Volumes: []Volume{{ID: "v0", Mode: structs.CSIVolumeAccessModeSingleNodeWriter}},
		Ops: []Op{
			{Kind: OpRunJob, Job: 0, Vol: 0},
			{Kind: OpWait, Wait: time.Second},
			{Kind: FaultNode, Node: 0, Method: "NodeUnpublishVolume", Hang: true},
			{Kind: OpStopJob, Job: 0},
			{Kind: OpWait, Wait: 500 * time.Millisecond},
		}}
	const bound = 3 * time.Second
	vs, st := runWith(t, s, runOpts{bound: bound, afterHeal: func(c *simCluster) {
		c.nodes[0].plugin.SetHang("NodeUnpublishVolume", true)
	}})
	if st.Publishes == 0 {
		t.Fatalf("the job never published its volume: the schedule checks nothing (violations %v)", vs)
	}
	if !slices.ContainsFunc(vs, func(v Violation) bool {
		return v.Check == CheckFreed && strings.Contains(v.Msg, "not freed")
	}) {
		t.Fatalf("a claim left un-freed past the bound: want a check 3 violation, got %v", vs)
	}
	// The message tells a release that hangs (no task runs, the client
	// has not finished releasing) from a task left running (check 8's,
	// seed 2875).
	if !slices.ContainsFunc(vs, func(v Violation) bool {
		return v.Check == CheckFreed && strings.Contains(v.Msg, "tasks exited false, tasks running []")
	}) {
		t.Fatalf("want the check 3 violation to say no task runs and the release is not done, got %v", vs)
	}
}
