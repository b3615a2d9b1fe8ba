package testutil

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// fatalTB records a Fatalf and ends the goroutine that called it, as
// testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestReturns: a call that never returns fails the test, naming what it
// waited for; one that returns passes.
func TestReturns(t *testing.T) {
	old := WaitTimeout
	WaitTimeout = 50 * time.Millisecond
	t.Cleanup(func() { WaitTimeout = old })

	run := func(f func()) string {
		tb := &fatalTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			Returns(tb, "the stuck call", f)
		}()
		<-done
		return tb.msg
	}
	block := make(chan struct{})
	defer close(block)
	if msg := run(func() { <-block }); msg != "the stuck call: still waiting after 50ms" {
		t.Fatalf("a call that never returns: got %q", msg)
	}
	if msg := run(func() {}); msg != "" {
		t.Fatalf("a call that returns: got %q", msg)
	}
}
