package rawexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"golang.org/x/sys/unix"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/plugins/drivers/executor"
	"github.com/berth-io/berth/testutil"
)

func TestFingerprint(t *testing.T) {
	d := newDriver(t, t.TempDir())
	info := d.Fingerprint(context.Background())
	must.True(t, info.Detected)
	must.True(t, info.Healthy)
	must.Eq(t, structs.MountConfigSupportNone, info.MountConfig)
	must.Eq(t, structs.MountConfigSupportNone, d.Capabilities().MountConfig)
	must.Eq(t, Name, d.Name())
}

func TestOutputAndExitCode(t *testing.T) {
	d := newDriver(t, t.TempDir())
	cfg := newTask(t, "web", `echo out; echo err >&2; exit 4`)
	// Output is appended: what a previous run wrote stays.
	must.NoError(t, os.WriteFile(cfg.StdoutPath, []byte("before\n"), 0o644))
	start(t, d, cfg)

	res := wait(t, d, cfg.ID)
	must.Eq(t, 4, res.ExitCode)
	must.Eq(t, 0, res.Signal)
	must.NoError(t, res.Err)
	must.False(t, res.Successful())

	out, err := os.ReadFile(cfg.StdoutPath)
	must.NoError(t, err)
	must.Eq(t, "before\nout\n", string(out))
	errOut, err := os.ReadFile(cfg.StderrPath)
	must.NoError(t, err)
	must.Eq(t, "err\n", string(errOut))

	st, err := d.InspectTask(cfg.ID)
	must.NoError(t, err)
	must.Eq(t, drivers.TaskStateExited, st.State)
	must.Eq(t, 4, st.ExitResult.ExitCode)
	must.False(t, st.CompletedAt.Before(st.StartedAt))
	must.Positive(t, st.PID)
}

func TestEnvAndWorkingDir(t *testing.T) {
	d := newDriver(t, t.TempDir())
	cfg := newTask(t, "env", `echo "$FOO"; pwd; echo "$PATH"`)
	cfg.Env = map[string]string{"FOO": "bar"}
	start(t, d, cfg)
	must.True(t, wait(t, d, cfg.ID).Successful())
	out, err := os.ReadFile(cfg.StdoutPath)
	must.NoError(t, err)
	must.Eq(t, "bar\n"+cfg.TaskDir+"\n"+executor.DefaultPath+"\n", string(out))
}

func TestCommandLookup(t *testing.T) {
	cases := []struct {
		name    string
		command string
		setup   func(dir string)
		wantErr string
	}{
		{name: "in PATH", command: "true"},
		{name: "absolute", command: "/bin/true"},
		{
			name:    "relative to the task dir",
			command: "local/run.sh",
			setup: func(dir string) {
				must.NoError(t, os.MkdirAll(filepath.Join(dir, "local"), 0o755))
				must.NoError(t, os.WriteFile(filepath.Join(dir, "local", "run.sh"), []byte("#!/bin/sh\nexit 0\n"), 0o755))
			},
		},
		{name: "not found", command: "no-such-command-berth", wantErr: "executable file not found"},
		{
			name:    "not executable",
			command: "./data",
			setup:   func(dir string) { must.NoError(t, os.WriteFile(filepath.Join(dir, "data"), nil, 0o644)) },
			wantErr: "is not executable",
		},
	}
	d := newDriver(t, t.TempDir())
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := newTask(t, "lookup", "")
			cfg.ID += tc.name
			cfg.Config = map[string]any{"command": tc.command}
			if tc.setup != nil {
				tc.setup(cfg.TaskDir)
			}
			if tc.wantErr != "" {
				_, err := d.StartTask(context.Background(), cfg)
				must.ErrorContains(t, err, tc.wantErr)
				must.StrContains(t, err.Error(), cfg.ID)
				return
			}
			start(t, d, cfg)
			must.True(t, wait(t, d, cfg.ID).Successful())
		})
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		name    string
		config  map[string]any
		wantErr string
	}{
		{name: "no command", config: map[string]any{}, wantErr: `task "web": config key "command" is required (a string)`},
		{name: "empty command", config: map[string]any{"command": ""}, wantErr: `config key "command" is required`},
		{name: "command not a string", config: map[string]any{"command": 3}, wantErr: `config key "command" must be a string, not the number 3`},
		{name: "args not a list", config: map[string]any{"command": "x", "args": "-v"}, wantErr: `config key "args" must be a list of strings`},
		{name: "args element", config: map[string]any{"command": "x", "args": []any{"a", 2}}, wantErr: `element 1 is the number 2`},
		{name: "unknown key", config: map[string]any{"command": "x", "comand": "y"}, wantErr: `unknown config key "comand"`},
	}
	d := newDriver(t, t.TempDir())
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := newTask(t, "web", "")
			cfg.Config = tc.config
			_, err := d.StartTask(context.Background(), cfg)
			must.ErrorIs(t, err, drivers.ErrInvalidConfig)
			must.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestMountsRefused(t *testing.T) {
	d := newDriver(t, t.TempDir())
	cfg := newTask(t, "vol", "true")
	cfg.Mounts = []*drivers.MountConfig{{HostPath: t.TempDir(), TaskPath: "/data"}}
	_, err := d.StartTask(context.Background(), cfg)
	must.ErrorContains(t, err, "cannot mount volumes")
}

func TestStopTask(t *testing.T) {
	cases := []struct {
		name       string
		script     string
		timeout    time.Duration
		signal     string
		wantSignal syscall.Signal
		escalates  bool
	}{
		{
			name:       "exits on SIGTERM",
			script:     `echo ready; exec sleep 300`,
			timeout:    10 * time.Second,
			wantSignal: syscall.SIGTERM,
		},
		{
			name:       "exits on the signal asked",
			script:     `echo ready; exec sleep 300`,
			timeout:    10 * time.Second,
			signal:     "SIGINT",
			wantSignal: syscall.SIGINT,
		},
		{
			// The shell ignores TERM, and so does its sleep, which inherits
			// that: SIGKILL follows the timeout.
			name:       "killed after the timeout",
			script:     `trap '' TERM; echo ready; exec sleep 300`,
			timeout:    500 * time.Millisecond,
			wantSignal: syscall.SIGKILL,
			escalates:  true,
		},
	}
	d := newDriver(t, t.TempDir())
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := newTask(t, "stop", tc.script)
			start(t, d, cfg)
			waitOutput(t, cfg, "ready")

			begin := time.Now()
			must.NoError(t, d.StopTask(context.Background(), cfg.ID, tc.timeout, tc.signal))
			took := time.Since(begin)

			st, err := d.InspectTask(cfg.ID)
			must.NoError(t, err)
			must.Eq(t, drivers.TaskStateExited, st.State, must.Sprint("StopTask returned before the task exited"))
			must.Eq(t, int(tc.wantSignal), st.ExitResult.Signal)
			must.Eq(t, -1, st.ExitResult.ExitCode)
			if tc.escalates {
				must.GreaterEq(t, tc.timeout, took)
			} else {
				must.Less(t, tc.timeout, took)
			}
			must.Eq(t, byte(0), procState(st.PID), must.Sprint("task process still exists"))
		})
	}
}

// TestLeftoversKilled: a task ends when its main process does; what it
// left running in its process group is killed and collected.
func TestLeftoversKilled(t *testing.T) {
	d := newDriver(t, t.TempDir())
	cfg := newTask(t, "leftovers", `sleep 300 & echo "child $!"`)
	start(t, d, cfg)
	must.True(t, wait(t, d, cfg.ID).Successful())
	b, err := os.ReadFile(cfg.StdoutPath)
	must.NoError(t, err)
	var child int
	_, err = fmt.Sscanf(string(b), "child %d", &child)
	must.NoError(t, err)
	must.Eq(t, byte(0), procState(child), must.Sprintf("child %d still exists", child))
}

func TestDestroyTask(t *testing.T) {
	d := newDriver(t, t.TempDir())
	cfg := newTask(t, "destroy", `exec sleep 300`)
	h := start(t, d, cfg)
	dir := driverState(t, h)["Dir"].(string)
	must.DirExists(t, dir)

	err := d.DestroyTask(context.Background(), cfg.ID, false)
	must.ErrorContains(t, err, "still running")

	must.NoError(t, d.DestroyTask(context.Background(), cfg.ID, true))
	must.DirNotExists(t, dir)
	_, err = d.InspectTask(cfg.ID)
	must.ErrorIs(t, err, drivers.ErrTaskNotFound)
	must.NoError(t, d.DestroyTask(context.Background(), cfg.ID, true), must.Sprint("DestroyTask is idempotent"))
}

func TestStartTwice(t *testing.T) {
	d := newDriver(t, t.TempDir())
	cfg := newTask(t, "twice", `exec sleep 300`)
	start(t, d, cfg)
	_, err := d.StartTask(context.Background(), cfg)
	must.ErrorContains(t, err, "exists")
}

func TestWaitTaskCancel(t *testing.T) {
	d := newDriver(t, t.TempDir())
	cfg := newTask(t, "cancel", `exec sleep 300`)
	start(t, d, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := d.WaitTask(ctx, cfg.ID)
	must.NoError(t, err)
	cancel()
	res, ok := <-ch
	must.False(t, ok, must.Sprintf("got %+v from a cancelled wait", res))
	st, err := d.InspectTask(cfg.ID)
	must.NoError(t, err)
	must.Eq(t, drivers.TaskStateRunning, st.State, must.Sprint("cancelling the wait must not stop the task"))
}

func TestUnknownTask(t *testing.T) {
	d := newDriver(t, t.TempDir())
	_, err := d.WaitTask(context.Background(), "nope")
	must.ErrorIs(t, err, drivers.ErrTaskNotFound)
	err = d.StopTask(context.Background(), "nope", time.Second, "")
	must.ErrorIs(t, err, drivers.ErrTaskNotFound)
	_, err = d.InspectTask("nope")
	must.ErrorIs(t, err, drivers.ErrTaskNotFound)
}

// TestRecoverRunning simulates a client restart: the driver that started
// the task is dropped (its executor is detached and lives on), and a new
// driver re-attaches from the persisted handle.
func TestRecoverRunning(t *testing.T) {
	stateDir := t.TempDir()
	old := newDriver(t, stateDir)
	cfg := fifoTask(t, "db")
	h := persist(t, start(t, old, cfg))
	waitOutput(t, cfg, "started")
	before, err := old.InspectTask(cfg.ID)
	must.NoError(t, err)

	d := newDriver(t, stateDir)
	must.NoError(t, d.RecoverTask(context.Background(), h))
	t.Cleanup(func() { must.NoError(t, d.DestroyTask(context.Background(), cfg.ID, true)) })
	st, err := d.InspectTask(cfg.ID)
	must.NoError(t, err)
	must.Eq(t, drivers.TaskStateRunning, st.State)
	must.Eq(t, before.PID, st.PID)
	must.Eq(t, before.StartedAt, st.StartedAt)
	must.NoError(t, d.RecoverTask(context.Background(), h), must.Sprint("RecoverTask of a known task is a no-op"))

	release(t, cfg, "3")
	res := wait(t, d, cfg.ID)
	must.Eq(t, 3, res.ExitCode)
	must.NoError(t, res.Err)
}

// TestRecoverExitedWhileDown: the task exits while no client watches; the
// restarted client learns its exit code from the status file.
func TestRecoverExitedWhileDown(t *testing.T) {
	stateDir := t.TempDir()
	old := newDriver(t, stateDir)
	cfg := fifoTask(t, "batch")
	h := persist(t, start(t, old, cfg))
	exePID := int(driverState(t, h)["ExecutorPID"].(float64))

	release(t, cfg, "5")
	// Nobody waits for the executor: once done it stays a zombie child of
	// this test process, which the new driver collects.
	testutil.WaitForResult(t, func() (bool, error) {
		s := procState(exePID)
		return s == 'Z' || s == 0, fmt.Errorf("executor in state %c", s)
	})

	d := newDriver(t, stateDir)
	must.NoError(t, d.RecoverTask(context.Background(), h))
	t.Cleanup(func() { must.NoError(t, d.DestroyTask(context.Background(), cfg.ID, true)) })
	st, err := d.InspectTask(cfg.ID)
	must.NoError(t, err)
	must.Eq(t, drivers.TaskStateExited, st.State)
	must.Eq(t, 5, st.ExitResult.ExitCode)
	must.Eq(t, 5, wait(t, d, cfg.ID).ExitCode)
	must.Eq(t, byte(0), procState(exePID), must.Sprint("the recovering driver collects its zombie child"))
}

// TestRecoverGone: handles that name nothing alive and no status file.
func TestRecoverGone(t *testing.T) {
	stateDir := t.TempDir()
	old := newDriver(t, stateDir)
	cfg := newTask(t, "live", `exec sleep 300`)
	live := persist(t, start(t, old, cfg))

	gone := exec.Command("true")
	must.NoError(t, gone.Run())
	deadPID := gone.Process.Pid

	cases := []struct {
		name  string
		patch func(m map[string]any)
	}{
		{
			// The pids are alive but started at other times: reused.
			name: "pid reused",
			patch: func(m map[string]any) {
				m["ExecutorStartTime"] = m["ExecutorStartTime"].(float64) + 1
				m["TaskStartTime"] = m["TaskStartTime"].(float64) + 1
				m["StatusPath"] = filepath.Join(t.TempDir(), "status.json")
			},
		},
		{
			name: "process gone without status",
			patch: func(m map[string]any) {
				m["ExecutorPID"] = deadPID
				m["TaskPID"] = deadPID
				m["StatusPath"] = filepath.Join(t.TempDir(), "status.json")
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := driverState(t, live)
			tc.patch(m)
			b, err := json.Marshal(m)
			must.NoError(t, err)
			h := persist(t, live)
			h.DriverState = b
			d := newDriver(t, stateDir)
			err = d.RecoverTask(context.Background(), h)
			must.ErrorIs(t, err, drivers.ErrTaskNotFound)
			must.ErrorIs(t, err, executor.ErrGone)
			_, err = d.InspectTask(cfg.ID)
			must.ErrorIs(t, err, drivers.ErrTaskNotFound)
		})
	}
}

func TestRecoverBadHandle(t *testing.T) {
	d := newDriver(t, t.TempDir())
	cfg := newTask(t, "bad", "true")
	err := d.RecoverTask(context.Background(), &drivers.TaskHandle{Version: 99, Config: cfg})
	must.ErrorContains(t, err, "version 99")
	err = d.RecoverTask(context.Background(), &drivers.TaskHandle{Version: 1, Config: cfg, DriverState: []byte("{")})
	must.ErrorContains(t, err, "decoding task handle")
	must.True(t, !errors.Is(err, drivers.ErrTaskNotFound))
}

// TestSurvivesClientKill: the process that started the task is SIGKILLed,
// as a crashing client would be; the task lives on, and this process, a
// new client, re-attaches to it.
func TestSurvivesClientKill(t *testing.T) {
	// Orphaned executors come to this process instead of init, so that it
	// can collect them (init does not always).
	must.NoError(t, unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })

	stateDir := t.TempDir()
	cfg := fifoTask(t, "survivor")
	arg, err := json.Marshal(clientHelperArgs{StateDir: stateDir, Task: cfg})
	must.NoError(t, err)
	self, err := os.Executable()
	must.NoError(t, err)
	client := exec.Command(self)
	client.Env = append(os.Environ(), envClientHelper+"="+string(arg))
	stdin, err := client.StdinPipe()
	must.NoError(t, err)
	defer stdin.Close()
	stdout, err := client.StdoutPipe()
	must.NoError(t, err)
	client.Stderr = os.Stderr
	must.NoError(t, client.Start())
	var h drivers.TaskHandle
	must.NoError(t, json.NewDecoder(stdout).Decode(&h))

	must.NoError(t, client.Process.Kill())
	_ = client.Wait()

	d := newDriver(t, stateDir)
	must.NoError(t, d.RecoverTask(context.Background(), &h))
	t.Cleanup(func() { must.NoError(t, d.DestroyTask(context.Background(), cfg.ID, true)) })
	st, err := d.InspectTask(cfg.ID)
	must.NoError(t, err)
	must.Eq(t, drivers.TaskStateRunning, st.State)
	must.Eq(t, int(driverState(t, &h)["TaskPID"].(float64)), st.PID)

	release(t, cfg, "3")
	must.Eq(t, 3, wait(t, d, cfg.ID).ExitCode)
	exePID := int(driverState(t, &h)["ExecutorPID"].(float64))
	must.Eq(t, byte(0), procState(exePID), must.Sprint("the executor was collected"))
}
