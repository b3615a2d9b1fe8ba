// Package testlog gives tests an hclog logger that writes through t.Log.
package testlog

import (
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// Logger returns a logger writing to t.Log until the test ends.
func Logger(t testing.TB) hclog.Logger {
	w := &writer{t: t}
	t.Cleanup(func() {
		w.lock.Lock()
		w.done = true
		w.lock.Unlock()
	})
	return hclog.New(&hclog.LoggerOptions{Name: "test", Level: hclog.Debug, Output: w})
}

type writer struct {
	t testing.TB
	// lock guards done.
	lock sync.Mutex
	done bool
}

func (w *writer) Write(p []byte) (int, error) {
	w.lock.Lock()
	defer w.lock.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}
