package rawexec

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/testutil"
)

// newDriver returns a raw_exec driver whose executor directories live in
// stateDir.
func newDriver(t *testing.T, stateDir string) drivers.Driver {
	t.Helper()
	return New(hclog.NewNullLogger(), Config{StateDir: stateDir})
}

// newTask returns a task config running sh -c script, with its own task
// dir and output files.
func newTask(t *testing.T, name, script string) *drivers.TaskConfig {
	t.Helper()
	dir := t.TempDir()
	return &drivers.TaskConfig{
		ID:         "alloc-" + name + "/" + name,
		AllocID:    "alloc-" + name,
		Name:       name,
		Config:     map[string]any{"command": "/bin/sh", "args": []any{"-c", script}},
		TaskDir:    dir,
		StdoutPath: filepath.Join(dir, "stdout"),
		StderrPath: filepath.Join(dir, "stderr"),
	}
}

// start starts the task and makes sure it is gone when the test ends.
func start(t *testing.T, d drivers.Driver, cfg *drivers.TaskConfig) *drivers.TaskHandle {
	t.Helper()
	h, err := d.StartTask(context.Background(), cfg)
	must.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		must.NoError(t, d.DestroyTask(ctx, cfg.ID, true))
	})
	return h
}

// wait waits for the task's exit result.
func wait(t *testing.T, d drivers.Driver, id string) *drivers.ExitResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	ch, err := d.WaitTask(ctx, id)
	must.NoError(t, err)
	res, ok := <-ch
	must.True(t, ok, must.Sprint("no exit result before the deadline"))
	return res
}

// fifoTask runs until the test writes an exit code into its control fifo
// (see release).
func fifoTask(t *testing.T, name string) *drivers.TaskConfig {
	t.Helper()
	cfg := newTask(t, name, `echo started; read code < ctl; exit "$code"`)
	must.NoError(t, syscall.Mkfifo(filepath.Join(cfg.TaskDir, "ctl"), 0o600))
	return cfg
}

// release makes a fifoTask exit with code.
func release(t *testing.T, cfg *drivers.TaskConfig, code string) {
	t.Helper()
	var f *os.File
	testutil.WaitForResult(t, func() (bool, error) {
		// Non-blocking: ENXIO until the task opens the fifo for reading.
		var err error
		f, err = os.OpenFile(filepath.Join(cfg.TaskDir, "ctl"), os.O_WRONLY|syscall.O_NONBLOCK, 0)
		return err == nil, err
	})
	_, err := f.WriteString(code + "\n")
	must.NoError(t, err)
	must.NoError(t, f.Close())
}

// waitOutput waits until the task's stdout contains s.
func waitOutput(t *testing.T, cfg *drivers.TaskConfig, s string) {
	t.Helper()
	testutil.WaitForResult(t, func() (bool, error) {
		b, err := os.ReadFile(cfg.StdoutPath)
		if err != nil {
			return false, err
		}
		if !strings.Contains(string(b), s) {
			return false, fmt.Errorf("stdout is %q", b)
		}
		return true, nil
	})
}

// persist round-trips a handle through JSON, as the client's state store
// does.
func persist(t *testing.T, h *drivers.TaskHandle) *drivers.TaskHandle {
	t.Helper()
	b, err := json.Marshal(h)
	must.NoError(t, err)
	var out drivers.TaskHandle
	must.NoError(t, json.Unmarshal(b, &out))
	return &out
}

// driverState decodes a handle's DriverState loosely, for tests that
// inspect or tamper with it.
func driverState(t *testing.T, h *drivers.TaskHandle) map[string]any {
	t.Helper()
	var m map[string]any
	must.NoError(t, json.Unmarshal(h.DriverState, &m))
	return m
}

// procState returns the state letter of a pid from /proc, or 0 if gone.
func procState(pid int) byte {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}
