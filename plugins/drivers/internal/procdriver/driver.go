// Package procdriver implements drivers.Driver for tasks run by a detached
// executor (package executor). The raw_exec and exec drivers are each a
// procdriver.Driver with their own name, fingerprint and way of turning a
// TaskConfig into an executor.Spec.
//
// A task's life, as the driver sees it:
//
//	StartTask ── Launch ──► running ──(task exits)──► exited ── DestroyTask ──► forgotten
//	                          ▲   │                      ▲
//	RecoverTask ── Attach ────┘   └─ StopTask: signal, ──┘
//	(client restart)                 SIGKILL after timeout
//
// The driver keeps no goroutine of its own: WaitTask's goroutine ends when
// the task ends or when the caller's ctx does.
package procdriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/plugins/drivers/executor"
)

// Config makes a Driver.
type Config struct {
	Name   string
	Logger hclog.Logger
	// StateDir holds one executor directory per started task (spec,
	// status file, executor log). "" means DefaultStateDir().
	StateDir string
	// ExecutorPath is the program run as the executor; "" means this
	// program (os.Executable).
	ExecutorPath string
	Capabilities drivers.Capabilities
	// Fingerprint reports detection and health; the driver fills in
	// MountConfig from Capabilities.
	Fingerprint func(ctx context.Context) *structs.DriverInfo
	// Spec validates a task's config and says what the executor runs.
	Spec func(cfg *drivers.TaskConfig) (*executor.Spec, error)
}

// DefaultStateDir is where executor directories go when the client names
// none. Clients should pass a directory under their data_dir instead, which
// they keep across restarts and clean up with it.
func DefaultStateDir() string { return filepath.Join(os.TempDir(), "berth-executor") }

// Driver runs tasks under executors. It is safe for concurrent use.
type Driver struct {
	cfg    Config
	logger hclog.Logger

	// mu guards tasks and starting.
	mu    sync.Mutex
	tasks map[string]*task
	// starting holds the IDs of tasks being started, so two StartTasks of
	// one ID cannot both launch.
	starting map[string]bool
}

// task is one task the driver knows.
type task struct {
	cfg       *drivers.TaskConfig
	proc      *executor.Process
	dir       string // the executor's directory
	startedAt time.Time
}

var (
	_ drivers.Driver   = (*Driver)(nil)
	_ drivers.Signaler = (*Driver)(nil)
)

// New makes a Driver.
func New(cfg Config) *Driver {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.StateDir == "" {
		cfg.StateDir = DefaultStateDir()
	}
	return &Driver{
		cfg:      cfg,
		logger:   cfg.Logger,
		tasks:    map[string]*task{},
		starting: map[string]bool{},
	}
}

// Name implements drivers.Driver.
func (d *Driver) Name() string { return d.cfg.Name }

// Capabilities implements drivers.Driver.
func (d *Driver) Capabilities() drivers.Capabilities { return d.cfg.Capabilities }

// Fingerprint implements drivers.Driver.
func (d *Driver) Fingerprint(ctx context.Context) *structs.DriverInfo {
	info := d.cfg.Fingerprint(ctx)
	info.MountConfig = d.cfg.Capabilities.MountConfig
	return info
}

// StartTask implements drivers.Driver.
func (d *Driver) StartTask(ctx context.Context, cfg *drivers.TaskConfig) (*drivers.TaskHandle, error) {
	if cfg == nil || cfg.ID == "" {
		return nil, fmt.Errorf("starting task: the task config has no ID: %w", drivers.ErrInvalidConfig)
	}
	spec, err := d.cfg.Spec(cfg)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	if d.tasks[cfg.ID] != nil || d.starting[cfg.ID] {
		d.mu.Unlock()
		return nil, fmt.Errorf("starting task %q: a task with this ID exists; destroy it first", cfg.ID)
	}
	d.starting[cfg.ID] = true
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.starting, cfg.ID)
		d.mu.Unlock()
	}()

	// A fresh directory per start: a restarted task never reads an
	// earlier run's status file.
	dir := filepath.Join(d.cfg.StateDir, url.PathEscape(cfg.ID)+"-"+helper.UUID()[:8])
	started := time.Now().UTC()
	proc, err := executor.Launch(ctx, d.cfg.ExecutorPath, dir, spec)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err // names the task already
	}
	t := &task{cfg: cfg, proc: proc, dir: dir, startedAt: started}
	h, err := t.handle()
	if err != nil {
		_ = proc.Signal(unix.SIGKILL)
		_, _ = proc.Wait(context.Background())
		return nil, fmt.Errorf("starting task %q: %w", cfg.ID, err)
	}
	d.mu.Lock()
	d.tasks[cfg.ID] = t
	d.mu.Unlock()
	d.logger.Info("task started", "alloc_id", cfg.AllocID, "task_id", cfg.ID, "pid", proc.PID(), "executor_pid", proc.State().ExecutorPID)
	return h, nil
}

// RecoverTask implements drivers.Driver.
func (d *Driver) RecoverTask(ctx context.Context, h *drivers.TaskHandle) error {
	if h == nil || h.Config == nil || h.Config.ID == "" {
		return fmt.Errorf("recovering task: the handle has no task config: %w", drivers.ErrInvalidConfig)
	}
	id := h.Config.ID
	d.mu.Lock()
	known := d.tasks[id] != nil
	d.mu.Unlock()
	if known {
		return nil
	}
	hs, err := decodeHandle(h)
	if err != nil {
		return fmt.Errorf("recovering task %q: %w", id, err)
	}
	proc, err := executor.Attach(hs.State)
	if errors.Is(err, executor.ErrGone) {
		return fmt.Errorf("recovering task %q: %w: %w", id, drivers.ErrTaskNotFound, err)
	}
	if err != nil {
		return fmt.Errorf("recovering task %q: %w", id, err)
	}
	t := &task{cfg: h.Config, proc: proc, dir: hs.Dir, startedAt: hs.StartedAt}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.tasks[id] != nil { // recovered concurrently
		proc.Close()
		return nil
	}
	d.tasks[id] = t
	_, exited := proc.Exited()
	d.logger.Info("task recovered", "alloc_id", h.Config.AllocID, "task_id", id, "pid", proc.PID(), "exited", exited)
	return nil
}

// WaitTask implements drivers.Driver. If ctx ends first, the channel is
// closed without a result.
func (d *Driver) WaitTask(ctx context.Context, taskID string) (<-chan *drivers.ExitResult, error) {
	t, err := d.get("waiting for", taskID)
	if err != nil {
		return nil, err
	}
	ch := make(chan *drivers.ExitResult, 1)
	// Ends when the task ends or ctx is done; the caller owns ctx.
	go func() {
		defer close(ch)
		st, err := t.proc.Wait(ctx)
		if err != nil {
			return
		}
		ch <- exitResult(st)
	}()
	return ch, nil
}

// StopTask implements drivers.Driver.
func (d *Driver) StopTask(ctx context.Context, taskID string, timeout time.Duration, signal string) error {
	t, err := d.get("stopping", taskID)
	if err != nil {
		return err
	}
	sig, err := ParseSignal(signal)
	if err != nil {
		return fmt.Errorf("stopping task %q: %w", taskID, err)
	}
	if err := t.proc.Signal(sig); err != nil {
		return fmt.Errorf("stopping task %q: %w", taskID, err)
	}
	if sig != unix.SIGKILL && timeout > 0 {
		wctx, cancel := context.WithTimeout(ctx, timeout)
		_, err := t.proc.Wait(wctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("stopping task %q: %w", taskID, ctx.Err())
		}
		d.logger.Info("task did not exit in time: killing it", "task_id", taskID, "signal", unix.SignalName(sig), "timeout", timeout)
	}
	return d.kill(ctx, taskID, t)
}

// SignalTask implements drivers.Signaler.
func (d *Driver) SignalTask(taskID, signal string) error {
	t, err := d.get("signalling", taskID)
	if err != nil {
		return err
	}
	if signal == "" {
		signal = "SIGKILL"
	}
	sig, err := ParseSignal(signal)
	if err != nil {
		return fmt.Errorf("signalling task %q: %w: %w", taskID, drivers.ErrInvalidConfig, err)
	}
	if err := t.proc.Signal(sig); err != nil {
		return fmt.Errorf("signalling task %q: %w", taskID, err)
	}
	return nil
}

// kill sends SIGKILL and waits for the task to end.
func (d *Driver) kill(ctx context.Context, taskID string, t *task) error {
	if err := t.proc.Signal(unix.SIGKILL); err != nil {
		return fmt.Errorf("killing task %q: %w", taskID, err)
	}
	if _, err := t.proc.Wait(ctx); err != nil {
		return fmt.Errorf("killing task %q: %w", taskID, err)
	}
	return nil
}

// DestroyTask implements drivers.Driver.
func (d *Driver) DestroyTask(ctx context.Context, taskID string, force bool) error {
	d.mu.Lock()
	t := d.tasks[taskID]
	d.mu.Unlock()
	if t == nil {
		return nil
	}
	if _, exited := t.proc.Exited(); !exited {
		if !force {
			return fmt.Errorf("destroying task %q: it is still running; stop it first or destroy with force", taskID)
		}
		if err := d.kill(ctx, taskID, t); err != nil {
			return fmt.Errorf("destroying task %q: %w", taskID, err)
		}
	}
	// The task has ended; wait for its executor to be gone too (it exits
	// right after writing the status), so it is collected.
	if _, err := t.proc.Wait(ctx); err != nil {
		return fmt.Errorf("destroying task %q: %w", taskID, err)
	}
	d.mu.Lock()
	if d.tasks[taskID] == t {
		delete(d.tasks, taskID)
	}
	d.mu.Unlock()
	t.proc.Close()
	// Only ever remove a directory of ours: the dir of a recovered task
	// comes from a handle.
	if t.dir == "" || filepath.Dir(t.dir) != filepath.Clean(d.cfg.StateDir) {
		d.logger.Warn("leaving the task's executor directory: it is not in the state dir",
			"task_id", taskID, "dir", t.dir, "state_dir", d.cfg.StateDir)
		return nil
	}
	if err := os.RemoveAll(t.dir); err != nil {
		return fmt.Errorf("destroying task %q: removing its executor directory: %w", taskID, err)
	}
	return nil
}

// InspectTask implements drivers.Driver.
func (d *Driver) InspectTask(taskID string) (*drivers.TaskStatus, error) {
	t, err := d.get("inspecting", taskID)
	if err != nil {
		return nil, err
	}
	s := &drivers.TaskStatus{
		ID:        taskID,
		State:     drivers.TaskStateRunning,
		StartedAt: t.startedAt,
		PID:       t.proc.PID(),
	}
	if st, exited := t.proc.Exited(); exited {
		s.State = drivers.TaskStateExited
		s.CompletedAt = st.FinishedAt
		s.ExitResult = exitResult(st)
	}
	return s, nil
}

// get returns a known task or ErrTaskNotFound.
func (d *Driver) get(op, taskID string) (*task, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.tasks[taskID]
	if t == nil {
		return nil, fmt.Errorf("%s task %q: %w", op, taskID, drivers.ErrTaskNotFound)
	}
	return t, nil
}

// exitResult translates an executor status.
func exitResult(st *executor.Status) *drivers.ExitResult {
	r := &drivers.ExitResult{ExitCode: st.ExitCode, Signal: st.Signal}
	if st.Err != "" {
		r.Err = errors.New(st.Err)
	}
	return r
}

// handleVersion is the DriverState format this package writes.
const handleVersion = 1

// handleState is a TaskHandle's DriverState, as JSON.
type handleState struct {
	executor.State
	// Dir is the executor's directory.
	Dir       string
	StartedAt time.Time
}

func (t *task) handle() (*drivers.TaskHandle, error) {
	b, err := json.Marshal(handleState{State: t.proc.State(), Dir: t.dir, StartedAt: t.startedAt})
	if err != nil {
		return nil, fmt.Errorf("encoding task handle: %w", err)
	}
	return &drivers.TaskHandle{
		Version:     handleVersion,
		Config:      t.cfg,
		State:       drivers.TaskStateRunning,
		DriverState: b,
	}, nil
}

func decodeHandle(h *drivers.TaskHandle) (*handleState, error) {
	if h.Version != handleVersion {
		return nil, fmt.Errorf("task handle version %d: this driver reads version %d", h.Version, handleVersion)
	}
	var hs handleState
	if err := json.Unmarshal(h.DriverState, &hs); err != nil {
		return nil, fmt.Errorf("decoding task handle: %w", err)
	}
	return &hs, nil
}
