package cluster

import (
	"os"
	"strings"
	"sync"
	"testing"
)

// tWriter sends log lines to t.Log until the test ends (logging after a
// test ends panics, and servers may log during cleanup).
type tWriter struct {
	t testing.TB
	// mu guards done.
	mu   sync.Mutex
	done bool
}

func (w *tWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func getenv(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
