package csi

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	metrics "github.com/hashicorp/go-metrics"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/plugins/csi/fake"
)

// socketPath returns a socket path in a fresh temp dir, short enough for a
// unix socket even under long test names.
func socketPath(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "csi.sock")
	if len(path) <= MaxSocketPathLen {
		return path
	}
	dir, err := os.MkdirTemp("", "csi")
	must.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "csi.sock")
}

// instantClock fires every wait at once and records the waits asked for.
type instantClock struct {
	// mu guards waits.
	mu    sync.Mutex
	waits []time.Duration
}

func (c *instantClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	ch := make(chan time.Time, 1)
	ch <- time.Time{}
	return ch
}

func (c *instantClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

// stuckClock never fires; it reports each wait on waiting.
type stuckClock struct {
	waiting chan time.Duration
}

func (c *stuckClock) After(d time.Duration) <-chan time.Time {
	c.waiting <- d
	return nil // blocks forever in a select
}

// counterRecorder stands in for go-metrics.
type counterRecorder struct {
	// mu guards counts.
	mu     sync.Mutex
	counts map[string]float32 // "csi.rpc.retry;method=X;code=Y"
}

func (r *counterRecorder) incr(key []string, val float32, labels []metrics.Label) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := ""
	for i, part := range key {
		if i > 0 {
			k += "."
		}
		k += part
	}
	for _, l := range labels {
		k += ";" + l.Name + "=" + l.Value
	}
	if r.counts == nil {
		r.counts = map[string]float32{}
	}
	r.counts[k] += val
}

func (r *counterRecorder) get(k string) float32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[k]
}

// harness is a client talking to a fake plugin over a unix socket.
type harness struct {
	client  *client
	plugin  *fake.Plugin
	clock   *instantClock
	metrics *counterRecorder
	socket  string
}

// newHarness starts a fake plugin and a client for it whose backoff waits
// are instant; opts come after the defaults so tests can override them.
func newHarness(t *testing.T, opts ...Option) *harness {
	t.Helper()
	sock := socketPath(t)
	h := &harness{
		plugin:  fake.Start(t, sock),
		clock:   &instantClock{},
		metrics: &counterRecorder{},
		socket:  sock,
	}
	all := append([]Option{WithClock(h.clock)}, opts...)
	c, err := New(sock, hclog.NewNullLogger(), all...)
	must.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	h.client = c.(*client)
	h.client.incrCounter = h.metrics.incr
	return h
}

// testCtx is a context for one call that cannot hang the test run.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
