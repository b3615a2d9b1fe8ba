package mock

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
	"golang.org/x/sys/unix"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/testutil"
)

func newTestTask(t *testing.T, config map[string]any) *drivers.TaskConfig {
	t.Helper()
	dir := t.TempDir()
	return &drivers.TaskConfig{
		ID:         t.Name() + "/web",
		Name:       "web",
		Config:     config,
		TaskDir:    dir,
		StdoutPath: filepath.Join(dir, "stdout"),
	}
}

func start(t *testing.T, d *Driver, cfg *drivers.TaskConfig) *drivers.TaskHandle {
	t.Helper()
	h, err := d.StartTask(context.Background(), cfg)
	must.NoError(t, err)
	t.Cleanup(func() { must.NoError(t, d.DestroyTask(context.Background(), cfg.ID, true)) })
	return h
}

func wait(t *testing.T, d *Driver, id string) *drivers.ExitResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	ch, err := d.WaitTask(ctx, id)
	must.NoError(t, err)
	res, ok := <-ch
	must.True(t, ok, must.Sprint("no exit result before the deadline"))
	return res
}

func TestCapabilities(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want structs.MountConfigSupport
	}{
		{name: "default none", want: structs.MountConfigSupportNone},
		{name: "all", cfg: Config{MountConfig: structs.MountConfigSupportAll}, want: structs.MountConfigSupportAll},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := New(hclog.NewNullLogger(), tc.cfg)
			must.Eq(t, tc.want, d.Capabilities().MountConfig)
			info := d.Fingerprint(context.Background())
			must.Eq(t, tc.want, info.MountConfig)
			must.True(t, info.Healthy)
		})
	}
}

func TestRunForAndOutput(t *testing.T) {
	d := New(nil, Config{})
	cfg := newTestTask(t, map[string]any{"run_for": "10ms", "exit_code": 7, "stdout_string": "hello\n"})
	start(t, d, cfg)
	res := wait(t, d, cfg.ID)
	must.Eq(t, 7, res.ExitCode)
	st, err := d.InspectTask(cfg.ID)
	must.NoError(t, err)
	must.Eq(t, drivers.TaskStateExited, st.State)
	b, err := os.ReadFile(cfg.StdoutPath)
	must.NoError(t, err)
	must.Eq(t, "hello\n", string(b))
}

func TestStartErrors(t *testing.T) {
	d := New(nil, Config{})
	t.Run("start_error", func(t *testing.T) {
		_, err := d.StartTask(context.Background(), newTestTask(t, map[string]any{"start_error": "no luck"}))
		must.ErrorContains(t, err, "no luck")
	})
	t.Run("start_block_for honours ctx", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := d.StartTask(ctx, newTestTask(t, map[string]any{"start_block_for": "1h"}))
		must.ErrorIs(t, err, context.Canceled)
	})
	t.Run("bad config", func(t *testing.T) {
		_, err := d.StartTask(context.Background(), newTestTask(t, map[string]any{"run_for": 5}))
		must.ErrorIs(t, err, drivers.ErrInvalidConfig)
		must.ErrorContains(t, err, `config key "run_for" must be a duration`)
	})
	t.Run("duplicate ID", func(t *testing.T) {
		cfg := newTestTask(t, nil)
		start(t, d, cfg)
		_, err := New(nil, Config{}).StartTask(context.Background(), cfg)
		must.ErrorContains(t, err, "exists")
	})
}

func TestStopPlan(t *testing.T) {
	cases := []struct {
		name               string
		killAfter, timeout time.Duration
		sig                unix.Signal
		wantDelay          time.Duration
		wantSig            unix.Signal
	}{
		{name: "exits at once", timeout: time.Second, sig: unix.SIGTERM, wantSig: unix.SIGTERM},
		{name: "exits after kill_after", killAfter: time.Second, timeout: 2 * time.Second, sig: unix.SIGINT, wantDelay: time.Second, wantSig: unix.SIGINT},
		{name: "killed at the timeout", killAfter: time.Minute, timeout: time.Second, sig: unix.SIGTERM, wantDelay: time.Second, wantSig: unix.SIGKILL},
		{name: "SIGKILL is immediate", killAfter: time.Minute, timeout: time.Second, sig: unix.SIGKILL, wantSig: unix.SIGKILL},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			delay, sig := stopPlan(tc.killAfter, tc.timeout, tc.sig)
			must.Eq(t, tc.wantDelay, delay)
			must.Eq(t, tc.wantSig, sig)
		})
	}
}

func TestStopTask(t *testing.T) {
	d := New(nil, Config{})
	cfg := newTestTask(t, map[string]any{"kill_after": "1h"})
	start(t, d, cfg)
	must.NoError(t, d.StopTask(context.Background(), cfg.ID, 10*time.Millisecond, "SIGINT"))
	res := wait(t, d, cfg.ID)
	must.Eq(t, int(unix.SIGKILL), res.Signal)
}

func TestDestroyRunning(t *testing.T) {
	d := New(nil, Config{})
	cfg := newTestTask(t, nil)
	start(t, d, cfg)
	must.ErrorContains(t, d.DestroyTask(context.Background(), cfg.ID, false), "still running")
	must.NoError(t, d.DestroyTask(context.Background(), cfg.ID, true))
	_, err := d.InspectTask(cfg.ID)
	must.ErrorIs(t, err, drivers.ErrTaskNotFound)
}

// TestRecover: a new Driver (a restarted client) re-attaches to a task an
// old one started, and sees it exit.
func TestRecover(t *testing.T) {
	old := New(nil, Config{})
	cfg := newTestTask(t, nil)
	h := start(t, old, cfg)

	d := New(nil, Config{})
	_, err := d.InspectTask(cfg.ID)
	must.ErrorIs(t, err, drivers.ErrTaskNotFound, must.Sprint("a new driver knows a task only once recovered"))
	must.NoError(t, d.RecoverTask(context.Background(), h))
	st, err := d.InspectTask(cfg.ID)
	must.NoError(t, err)
	must.Eq(t, drivers.TaskStateRunning, st.State)

	got, ok := StartedConfig(cfg.ID)
	must.True(t, ok)
	must.Eq(t, cfg, got)

	must.NoError(t, ExitTask(cfg.ID, 3))
	must.Eq(t, 3, wait(t, d, cfg.ID).ExitCode)
	must.ErrorContains(t, ExitTask(cfg.ID, 4), "already exited")
}

func TestRecoverForgotten(t *testing.T) {
	old := New(nil, Config{})
	cfg := newTestTask(t, nil)
	h := start(t, old, cfg)
	Forget(cfg.ID)
	err := New(nil, Config{}).RecoverTask(context.Background(), h)
	must.ErrorIs(t, err, drivers.ErrTaskNotFound)
	must.ErrorIs(t, ExitTask(cfg.ID, 0), drivers.ErrTaskNotFound)
}
