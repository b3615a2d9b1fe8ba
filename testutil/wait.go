// Package testutil holds helpers for Berth's tests: waiting on conditions
// with deadlines, and (in testutil/cluster) in-process servers and
// clusters. Production code never imports it (TestDependencies checks).
package testutil

import (
	"fmt"
	"testing"
	"time"
)

// WaitTimeout is the default deadline for WaitForResult. Generous, because
// CI machines have two shared cores and run tests under -race.
var WaitTimeout = 20 * time.Second

// WaitForResult polls cond until it returns true or the deadline passes,
// then fails the test with cond's last error. It polls every 10ms: cheap
// enough to be prompt, and it never sleeps past the condition.
func WaitForResult(t testing.TB, cond func() (bool, error)) {
	t.Helper()
	WaitForResultUntil(t, WaitTimeout, cond)
}

// WaitForResultUntil is WaitForResult with an explicit deadline.
func WaitForResultUntil(t testing.TB, timeout time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		select {
		case <-deadline.C:
			if lastErr == nil {
				lastErr = fmt.Errorf("condition still false")
			}
			t.Fatalf("timed out after %v: %v", timeout, lastErr)
		case <-tick.C:
		}
	}
}

// Returns runs f and fails the test if f has not returned within
// WaitTimeout: for "this does not wait on X" where X (a hung plugin, a
// stuck call) never ends on its own, so a missing feature shows as f never
// returning. It asserts no speed: how fast f returns is a benchmark's job.
func Returns(t testing.TB, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	deadline := time.NewTimer(WaitTimeout)
	defer deadline.Stop()
	select {
	case <-done:
	case <-deadline.C:
		t.Fatalf("%s: still waiting after %v", what, WaitTimeout)
	}
}
