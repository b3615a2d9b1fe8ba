// Package mock is a task driver for tests: it runs no processes. A task's
// driver config scripts what it does:
//
//	run_for          duration string: the task exits by itself after this
//	                 long, with exit_code; "" or "0" runs until stopped
//	exit_code        int: the exit code when run_for elapses
//	start_error      string: StartTask fails with this message
//	start_block_for  duration string: StartTask takes this long (or until
//	                 its ctx ends)
//	kill_after       duration string: how long the task takes to exit after
//	                 StopTask's signal; if that is longer than StopTask's
//	                 timeout, it is killed (SIGKILL) at the timeout
//	stdout_string    string: written to the task's stdout file at start
//
// Tasks live in a registry shared by every mock Driver in the process, so
// a new Driver's RecoverTask finds a task an old one started: that is how
// tests simulate a client restart. ExitTask makes a running task exit,
// Forget makes one vanish without a trace, and StartedConfig returns the
// config a task was started with. Task IDs must be unique across the tests
// of a process (the client's "<alloc id>/<task>" are).
package mock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/plugins/drivers/internal/procdriver"
)

// Name is the driver's name in jobspecs.
const Name = "mock"

// Config configures a mock driver.
type Config struct {
	// MountConfig is the mount support the driver claims; "" means none,
	// so client tests can exercise "driver cannot mount".
	MountConfig structs.MountConfigSupport
}

// Driver is the mock driver. One process may hold several; they share
// their tasks through the registry, but each knows only the tasks it
// started or recovered.
type Driver struct {
	logger hclog.Logger
	caps   drivers.Capabilities

	// mu guards tasks.
	mu    sync.Mutex
	tasks map[string]*task
}

var (
	_ drivers.Driver   = (*Driver)(nil)
	_ drivers.Signaler = (*Driver)(nil)
)

// New returns a mock driver.
func New(logger hclog.Logger, cfg Config) *Driver {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if cfg.MountConfig == "" {
		cfg.MountConfig = structs.MountConfigSupportNone
	}
	return &Driver{
		logger: logger.Named(Name),
		caps:   drivers.Capabilities{MountConfig: cfg.MountConfig},
		tasks:  map[string]*task{},
	}
}

// Name implements drivers.Driver.
func (d *Driver) Name() string { return Name }

// Capabilities implements drivers.Driver.
func (d *Driver) Capabilities() drivers.Capabilities { return d.caps }

// Fingerprint implements drivers.Driver.
func (d *Driver) Fingerprint(context.Context) *structs.DriverInfo {
	return &structs.DriverInfo{
		Detected:          true,
		Healthy:           true,
		HealthDescription: "healthy",
		MountConfig:       d.caps.MountConfig,
		Attributes:        map[string]string{"driver.mock": "1"},
	}
}

// StartTask implements drivers.Driver.
func (d *Driver) StartTask(ctx context.Context, cfg *drivers.TaskConfig) (*drivers.TaskHandle, error) {
	if cfg == nil || cfg.ID == "" {
		return nil, fmt.Errorf("starting task: the task config has no ID: %w", drivers.ErrInvalidConfig)
	}
	sc, err := parseConfig(cfg)
	if err != nil {
		return nil, err
	}
	if sc.startBlockFor > 0 {
		timer := time.NewTimer(sc.startBlockFor)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, fmt.Errorf("starting task %q: %w", cfg.ID, ctx.Err())
		case <-timer.C:
		}
	}
	if sc.startError != "" {
		return nil, fmt.Errorf("starting task %q: %s", cfg.ID, sc.startError)
	}
	if sc.stdout != "" && cfg.StdoutPath != "" {
		if err := appendFile(cfg.StdoutPath, sc.stdout); err != nil {
			return nil, fmt.Errorf("starting task %q: %w", cfg.ID, err)
		}
	}
	t := newTask(cfg, sc)
	if err := register(t); err != nil {
		return nil, err
	}
	t.run(sc)
	d.mu.Lock()
	d.tasks[cfg.ID] = t
	d.mu.Unlock()
	d.logger.Debug("task started", "task_id", cfg.ID)
	return t.handle(), nil
}

// RecoverTask implements drivers.Driver: it finds the task in the registry.
func (d *Driver) RecoverTask(_ context.Context, h *drivers.TaskHandle) error {
	if h == nil || h.Config == nil || h.Config.ID == "" {
		return fmt.Errorf("recovering task: the handle has no task config: %w", drivers.ErrInvalidConfig)
	}
	id := h.Config.ID
	t := lookup(id)
	if t == nil {
		return fmt.Errorf("recovering task %q: %w", id, drivers.ErrTaskNotFound)
	}
	d.mu.Lock()
	d.tasks[id] = t
	d.mu.Unlock()
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
		select {
		case <-t.done:
			ch <- t.exitResult()
		case <-ctx.Done():
		}
	}()
	return ch, nil
}

// StopTask implements drivers.Driver.
func (d *Driver) StopTask(ctx context.Context, taskID string, timeout time.Duration, signal string) error {
	t, err := d.get("stopping", taskID)
	if err != nil {
		return err
	}
	sig, err := procdriver.ParseSignal(signal)
	if err != nil {
		return fmt.Errorf("stopping task %q: %w", taskID, err)
	}
	delay, endSig := stopPlan(t.killAfter, timeout, sig)
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-t.done: // exited by itself meanwhile
	case <-ctx.Done():
		return fmt.Errorf("stopping task %q: %w", taskID, ctx.Err())
	case <-timer.C:
		t.exit(&drivers.ExitResult{ExitCode: -1, Signal: int(endSig)})
	}
	return nil
}

// SignalTask implements drivers.Signaler: the mock task records the
// signal (Signals lists them) and keeps running.
func (d *Driver) SignalTask(taskID, signal string) error {
	t, err := d.get("signalling", taskID)
	if err != nil {
		return err
	}
	if signal == "" {
		signal = "SIGKILL"
	}
	sig, err := procdriver.ParseSignal(signal)
	if err != nil {
		return fmt.Errorf("signalling task %q: %w: %w", taskID, drivers.ErrInvalidConfig, err)
	}
	t.mu.Lock()
	t.signals = append(t.signals, unix.SignalName(sig))
	t.mu.Unlock()
	return nil
}

// Signals are the signals SignalTask sent the task, in order.
func (d *Driver) Signals(taskID string) []string {
	t, err := d.get("inspecting", taskID)
	if err != nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.signals...)
}

// stopPlan says when a stopped task exits and of which signal: after
// killAfter of the signal sent, unless the timeout comes first and SIGKILL
// with it.
func stopPlan(killAfter, timeout time.Duration, sig unix.Signal) (time.Duration, unix.Signal) {
	if sig == unix.SIGKILL || killAfter == 0 {
		return 0, sig
	}
	if killAfter >= timeout {
		return timeout, unix.SIGKILL
	}
	return killAfter, sig
}

// DestroyTask implements drivers.Driver.
func (d *Driver) DestroyTask(_ context.Context, taskID string, force bool) error {
	d.mu.Lock()
	t := d.tasks[taskID]
	d.mu.Unlock()
	if t == nil {
		return nil
	}
	if !t.exited() {
		if !force {
			return fmt.Errorf("destroying task %q: it is still running; stop it first or destroy with force", taskID)
		}
		t.exit(&drivers.ExitResult{ExitCode: -1, Signal: int(unix.SIGKILL)})
	}
	d.mu.Lock()
	delete(d.tasks, taskID)
	d.mu.Unlock()
	unregister(t)
	return nil
}

// InspectTask implements drivers.Driver.
func (d *Driver) InspectTask(taskID string) (*drivers.TaskStatus, error) {
	t, err := d.get("inspecting", taskID)
	if err != nil {
		return nil, err
	}
	return t.status(), nil
}

func (d *Driver) get(op, taskID string) (*task, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.tasks[taskID]
	if t == nil {
		return nil, fmt.Errorf("%s task %q: %w", op, taskID, drivers.ErrTaskNotFound)
	}
	return t, nil
}

// handleState is a mock TaskHandle's DriverState.
type handleState struct {
	ID        string
	StartedAt time.Time
}

func (t *task) handle() *drivers.TaskHandle {
	b, _ := json.Marshal(handleState{ID: t.cfg.ID, StartedAt: t.startedAt})
	return &drivers.TaskHandle{Version: 1, Config: t.cfg, State: drivers.TaskStateRunning, DriverState: b}
}

func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("writing stdout_string: %w", err)
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing stdout_string: %w", err)
	}
	return nil
}

// errExited: ExitTask on a task that has already exited.
var errExited = errors.New("task has already exited")
