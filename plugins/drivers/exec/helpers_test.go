package exec

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/testutil"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the exec driver needs root (mount namespaces, bind mounts, chroot)")
	}
}

func newDriver(t *testing.T, stateDir string) drivers.Driver {
	t.Helper()
	requireRoot(t)
	return New(hclog.NewNullLogger(), Config{StateDir: stateDir})
}

// newTask returns a task config running sh -c script in its chroot as
// root, with
// its own task dir, alloc dir and output files (outside the task dir).
func newTask(t *testing.T, name, script string) *drivers.TaskConfig {
	t.Helper()
	base := t.TempDir()
	cfg := &drivers.TaskConfig{
		ID:         "alloc-" + name + "/" + name,
		AllocID:    "alloc-" + name,
		Name:       name,
		Config:     map[string]any{"command": "/bin/sh", "args": []any{"-c", script}},
		AllocDir:   filepath.Join(base, "alloc"),
		TaskDir:    filepath.Join(base, name),
		StdoutPath: filepath.Join(base, "stdout"),
		StderrPath: filepath.Join(base, "stderr"),
		// These tests are about the root the task sees, not who it is:
		// root reads the control fifo and writes the test's volumes.
		// defaults_test.go covers the default user.
		User: "root",
	}
	must.NoError(t, os.MkdirAll(cfg.AllocDir, 0o755))
	must.NoError(t, os.MkdirAll(filepath.Join(cfg.TaskDir, "local"), 0o755))
	return cfg
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

// output returns what the task wrote to stdout and stderr.
func output(t *testing.T, cfg *drivers.TaskConfig) (string, string) {
	t.Helper()
	out, err := os.ReadFile(cfg.StdoutPath)
	must.NoError(t, err)
	errOut, _ := os.ReadFile(cfg.StderrPath)
	return string(out), string(errOut)
}

// withControl adds a fifo at /ctl in the task's root: the task's script
// reads it to wait for the test (see release).
func withControl(t *testing.T, cfg *drivers.TaskConfig) {
	t.Helper()
	must.NoError(t, syscall.Mkfifo(filepath.Join(cfg.TaskDir, "ctl"), 0o600))
}

// release writes a line into the task's control fifo.
func release(t *testing.T, cfg *drivers.TaskConfig, line string) {
	t.Helper()
	var f *os.File
	testutil.WaitForResult(t, func() (bool, error) {
		var err error
		f, err = os.OpenFile(filepath.Join(cfg.TaskDir, "ctl"), os.O_WRONLY|syscall.O_NONBLOCK, 0)
		return err == nil, err
	})
	_, err := f.WriteString(line + "\n")
	must.NoError(t, err)
	must.NoError(t, f.Close())
}

// waitOutput waits until the task's stdout contains s.
func waitOutput(t *testing.T, cfg *drivers.TaskConfig, s string) {
	t.Helper()
	testutil.WaitForResult(t, func() (bool, error) {
		out, errOut := output(t, cfg)
		return strings.Contains(out, s), &outputError{out, errOut}
	})
}

type outputError struct{ out, err string }

func (e *outputError) Error() string { return "stdout " + quote(e.out) + ", stderr " + quote(e.err) }

func quote(s string) string { return "\"" + strings.ReplaceAll(s, "\n", `\n`) + "\"" }

// mountsUnder returns this process's mount points at or below dir, from
// /proc/self/mountinfo.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	must.NoError(t, err)
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPoint(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	must.NoError(t, sc.Err())
	return out
}

// unescapeMountPoint undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPoint(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			ok := true
			for _, d := range s[i+1 : i+4] {
				if d < '0' || d > '7' {
					ok = false
					break
				}
				c = c*8 + byte(d-'0')
			}
			if ok {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
