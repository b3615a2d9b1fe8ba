package csi

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/berth-io/berth/plugins/csi/fake"
)

func TestNew_SocketPath(t *testing.T) {
	longDir := "/" + strings.Repeat("d", 100)
	cases := []struct {
		name    string
		path    string
		wantErr error
		msg     []string
	}{
		{name: "fits", path: "/run/berth/csi/plugin/csi.sock"},
		{name: "exactly the limit", path: "/" + strings.Repeat("s", MaxSocketPathLen-1)},
		{
			name:    "one byte too long",
			path:    "/" + strings.Repeat("s", MaxSocketPathLen),
			wantErr: ErrSocketPathTooLong,
			msg:     []string{"108 bytes", "the limit is 107"},
		},
		{
			name:    "long plugin dir",
			path:    longDir + "/csi.sock",
			wantErr: ErrSocketPathTooLong,
			msg:     []string{longDir + "/csi.sock", "the limit is 107"},
		},
		{name: "empty", path: "", msg: []string{"empty socket path"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.path, hclog.NewNullLogger())
			if tc.wantErr == nil && len(tc.msg) == 0 {
				must.NoError(t, err)
				must.NoError(t, c.Close())
				return
			}
			must.Error(t, err)
			if tc.wantErr != nil {
				must.ErrorIs(t, err, tc.wantErr)
			}
			for _, m := range tc.msg {
				must.StrContains(t, err.Error(), m)
			}
		})
	}
}

func TestTimeouts_ForRPC(t *testing.T) {
	cfg := defaultConfig()
	WithTimeouts(Timeouts{Probe: time.Second})(&cfg)
	cases := []struct {
		rpc  string
		want time.Duration
	}{
		{"Probe", time.Second},
		{"GetPluginInfo", DefaultFingerprintTimeout},
		{"NodeGetInfo", DefaultFingerprintTimeout},
		{"ControllerGetCapabilities", DefaultFingerprintTimeout},
		{"NodePublishVolume", DefaultCallTimeout},
		{"CreateVolume", DefaultCallTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.rpc, func(t *testing.T) {
			must.EqOp(t, tc.want, cfg.timeouts.forRPC(tc.rpc))
		})
	}
}

func TestClient_Close(t *testing.T) {
	h := newHarness(t)
	must.NoError(t, h.client.Close())
	must.NoError(t, h.client.Close())

	_, err := h.client.Probe(testCtx(t))
	must.ErrorIs(t, err, ErrClosed)
	must.ErrorIs(t, err, ErrFinal)
	must.EqOp(t, 0, h.plugin.Calls("Probe"))
}

// New does not need the plugin to be up; a call made while it is down
// fails as retryable.
func TestClient_PluginNotYetUp(t *testing.T) {
	sock := socketPath(t)
	c, err := New(sock, nil, WithMaxAttempts(2), WithClock(&instantClock{}))
	must.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	_, err = c.Probe(testCtx(t))
	must.ErrorIs(t, err, ErrRetryable)
	must.EqOp(t, codes.Unavailable, status.Code(err))

	// Once the plugin is up, calls succeed as soon as gRPC's reconnect
	// backoff (at most about a second) lets the connection be made.
	p := fake.Start(t, sock)
	must.Wait(t, wait.InitialSuccess(
		wait.ErrorFunc(func() error {
			_, err := c.Probe(testCtx(t))
			return err
		}),
		wait.Timeout(5*time.Second),
		wait.Gap(20*time.Millisecond),
	))
	must.Positive(t, p.Calls("Probe"))
}

// A plugin that restarts on the same socket is picked up again, within
// about a second of coming back, by one call that retries meanwhile; the
// client counts the new connection, which tells callers that cached what
// the plugin said that they may be talking to another process.
func TestClient_ReconnectsAfterPluginRestart(t *testing.T) {
	sock := socketPath(t)
	first := fake.Start(t, sock)
	c, err := New(sock, hclog.NewNullLogger(),
		WithMaxAttempts(1000),
		WithBackoff(ExponentialBackoff(10*time.Millisecond, 50*time.Millisecond, nil)))
	must.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	must.EqOp(t, 0, c.Connection(), must.Sprint("New does not connect"))

	_, err = c.Probe(testCtx(t))
	must.NoError(t, err)
	must.EqOp(t, 1, first.Calls("Probe"))
	_, err = c.Probe(testCtx(t))
	must.NoError(t, err)
	must.EqOp(t, 1, readyConnection(t, c), must.Sprint("calls share the connection"))

	// The plugin goes away, socket and all.
	first.Stop()
	_, err = os.Stat(sock)
	must.True(t, os.IsNotExist(err), must.Sprint("socket should be removed"))
	must.Wait(t, wait.InitialSuccess(
		wait.BoolFunc(func() bool { return c.Connection() == 0 }),
		wait.Timeout(10*time.Second), wait.Gap(5*time.Millisecond)),
		must.Sprint("the connection should be down once the plugin stopped"))

	// Calls fail while it is gone. The short ctx ends the retries.
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	_, err = c.Probe(ctx)
	cancel()
	must.Error(t, err)

	// A new plugin process on the same path.
	second := fake.Start(t, sock)
	ready, err := c.Probe(testCtx(t))
	must.NoError(t, err)
	must.True(t, ready)
	must.EqOp(t, 1, second.Calls("Probe"))
	must.EqOp(t, 2, readyConnection(t, c), must.Sprint("a new connection; failed dials while it was gone are not counted"))
}

// readyConnection waits for the client's channel to report the connection
// a call just succeeded over: gRPC can answer a call over a ready
// subchannel a moment before the channel's own state says Ready, and
// Connection() is 0 until it does (callers then ask the plugin again,
// which is safe; a test must not read that moment as "no connection").
func readyConnection(t *testing.T, c Client) uint64 {
	t.Helper()
	must.Wait(t, wait.InitialSuccess(
		wait.BoolFunc(func() bool { return c.Connection() != 0 }),
		wait.Timeout(5*time.Second), wait.Gap(time.Millisecond)),
		must.Sprint("the channel should report the connection a call just used"))
	return c.Connection()
}

func TestClient_RelativeSocketPath(t *testing.T) {
	dir := t.TempDir()
	p := fake.Start(t, filepath.Join(dir, "csi.sock"))
	t.Chdir(dir)

	c, err := New("csi.sock", nil)
	must.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	name, _, err := c.PluginInfo(testCtx(t))
	must.NoError(t, err)
	must.EqOp(t, "fake.csi.berth.io", name)
	must.EqOp(t, 1, p.Calls("GetPluginInfo"))
}

// WithDialer reaches a plugin served in memory (berth-nodesim's): calls go
// through gRPC over the dialed connection, and the socket path, where
// nothing listens, only names the plugin.
func TestClient_WithDialer(t *testing.T) {
	lis := bufconn.Listen(16 << 10)
	p := fake.New()
	must.NoError(t, p.Serve(lis))
	t.Cleanup(p.Stop)

	c, err := New(socketPath(t), nil, WithDialer(lis.DialContext), WithMaxAttempts(1))
	must.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_, err = c.Probe(testCtx(t))
	must.NoError(t, err)
	must.EqOp(t, 1, p.Calls("Probe"))
	must.EqOp(t, uint64(1), c.Connection())
}
