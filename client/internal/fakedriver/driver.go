// Package fakedriver is an in-memory task driver for the client's tests.
// A Host plays the machine: tasks live on it, so a second Driver on the
// same Host (a restarted client process) can re-attach to them. Tests make
// tasks exit on demand with Host.Exit. No goroutines: timers deliver
// scheduled exits, which keeps tests under testing/synctest simple.
//
// Task config keys:
//
//	run_for        duration string; the task exits by itself after it
//	exit_code      exit code for run_for exits (int)
//	start_error    StartTask fails with this message
//	invalid        StartTask fails with drivers.ErrInvalidConfig
//	stdout         written to the task's stdout file at start
//	stop_hangs     StopTask blocks until its ctx ends (a hung driver)
//	ignore_sigterm StopTask waits the kill timeout, then kills (signal 9)
package fakedriver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

// Host holds tasks across Driver instances.
type Host struct {
	// lock guards everything below.
	lock    sync.Mutex
	tasks   map[string]*task
	starts  map[string]int
	stops   map[string]int
	nextPID int
}

type task struct {
	cfg       *drivers.TaskConfig
	pid       int
	startedAt time.Time
	endedAt   time.Time
	result    *drivers.ExitResult // nil while running
	waiters   []chan *drivers.ExitResult
	timer     *time.Timer
	exited    chan struct{}
}

// NewHost returns an empty host.
func NewHost() *Host {
	return &Host{tasks: map[string]*task{}, starts: map[string]int{}, stops: map[string]int{}, nextPID: 1000}
}

// Driver returns a new driver instance named "mock" on h.
func (h *Host) Driver() *Driver { return h.NamedDriver("mock") }

// NamedDriver returns a new driver instance with the given name on h.
func (h *Host) NamedDriver(name string) *Driver {
	return &Driver{name: name, host: h, attached: map[string]bool{}}
}

// Exit makes a running task exit with code.
func (h *Host) Exit(taskID string, code int) error {
	h.lock.Lock()
	defer h.lock.Unlock()
	t, ok := h.tasks[taskID]
	if !ok || t.result != nil {
		return fmt.Errorf("task %q is not running", taskID)
	}
	h.exitLocked(t, &drivers.ExitResult{ExitCode: code})
	return nil
}

// Starts is how many times a task ID was started.
func (h *Host) Starts(taskID string) int {
	h.lock.Lock()
	defer h.lock.Unlock()
	return h.starts[taskID]
}

// Stops is how many times StopTask was called for a task ID.
func (h *Host) Stops(taskID string) int {
	h.lock.Lock()
	defer h.lock.Unlock()
	return h.stops[taskID]
}

// PID is the task's pid, 0 if the host has no such task.
func (h *Host) PID(taskID string) int {
	h.lock.Lock()
	defer h.lock.Unlock()
	if t, ok := h.tasks[taskID]; ok {
		return t.pid
	}
	return 0
}

// Running reports whether the task runs.
func (h *Host) Running(taskID string) bool {
	h.lock.Lock()
	defer h.lock.Unlock()
	t, ok := h.tasks[taskID]
	return ok && t.result == nil
}

// Config is the config the task was last started with, or nil.
func (h *Host) Config(taskID string) *drivers.TaskConfig {
	h.lock.Lock()
	defer h.lock.Unlock()
	if t, ok := h.tasks[taskID]; ok {
		return t.cfg
	}
	return nil
}

// Forget removes a task as if the machine rebooted.
func (h *Host) Forget(taskID string) {
	h.lock.Lock()
	defer h.lock.Unlock()
	if t, ok := h.tasks[taskID]; ok && t.timer != nil {
		t.timer.Stop()
	}
	delete(h.tasks, taskID)
}

func (h *Host) exitLocked(t *task, res *drivers.ExitResult) {
	if t.result != nil {
		return
	}
	if t.timer != nil {
		t.timer.Stop()
	}
	t.result = res
	t.endedAt = time.Now()
	close(t.exited)
	for _, w := range t.waiters {
		w <- res
		close(w)
	}
	t.waiters = nil
}

// Driver is one client process's view of the host.
type Driver struct {
	name string
	host *Host

	// lock guards attached.
	lock     sync.Mutex
	attached map[string]bool
}

var _ drivers.Driver = (*Driver)(nil)

func (d *Driver) Name() string { return d.name }

func (d *Driver) Fingerprint(context.Context) *structs.DriverInfo {
	return &structs.DriverInfo{Detected: true, Healthy: true, HealthDescription: "healthy", MountConfig: structs.MountConfigSupportNone}
}

func (d *Driver) Capabilities() drivers.Capabilities {
	return drivers.Capabilities{MountConfig: structs.MountConfigSupportNone}
}

func (d *Driver) StartTask(_ context.Context, cfg *drivers.TaskConfig) (*drivers.TaskHandle, error) {
	if msg, ok := cfg.Config["start_error"].(string); ok {
		return nil, errors.New(msg)
	}
	if _, ok := cfg.Config["invalid"]; ok {
		return nil, fmt.Errorf("key \"invalid\" is set: %w", drivers.ErrInvalidConfig)
	}
	var runFor time.Duration
	if s, ok := cfg.Config["run_for"].(string); ok {
		var err error
		if runFor, err = time.ParseDuration(s); err != nil {
			return nil, fmt.Errorf("run_for %q: %w", s, drivers.ErrInvalidConfig)
		}
	}
	if s, ok := cfg.Config["stdout"].(string); ok && cfg.StdoutPath != "" {
		f, err := os.OpenFile(cfg.StdoutPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		_, err = f.WriteString(s)
		f.Close()
		if err != nil {
			return nil, err
		}
	}

	h := d.host
	h.lock.Lock()
	if t, ok := h.tasks[cfg.ID]; ok && t.result == nil {
		h.lock.Unlock()
		return nil, fmt.Errorf("task %q is already running", cfg.ID)
	}
	h.nextPID++
	t := &task{cfg: cfg, pid: h.nextPID, startedAt: time.Now(), exited: make(chan struct{})}
	h.tasks[cfg.ID] = t
	h.starts[cfg.ID]++
	if runFor > 0 {
		code := intConfig(cfg.Config, "exit_code")
		t.timer = time.AfterFunc(runFor, func() {
			h.lock.Lock()
			defer h.lock.Unlock()
			h.exitLocked(t, &drivers.ExitResult{ExitCode: code})
		})
	}
	pid := t.pid
	h.lock.Unlock()

	d.lock.Lock()
	d.attached[cfg.ID] = true
	d.lock.Unlock()
	return &drivers.TaskHandle{Version: 1, Config: cfg, State: drivers.TaskStateRunning, DriverState: []byte(fmt.Sprint(pid))}, nil
}

func (d *Driver) RecoverTask(_ context.Context, th *drivers.TaskHandle) error {
	if th == nil || th.Config == nil {
		return errors.New("recover: handle without config")
	}
	d.host.lock.Lock()
	t, ok := d.host.tasks[th.Config.ID]
	d.host.lock.Unlock()
	if !ok || fmt.Sprint(t.pid) != string(th.DriverState) {
		return fmt.Errorf("recovering task %q: %w", th.Config.ID, drivers.ErrTaskNotFound)
	}
	d.lock.Lock()
	d.attached[th.Config.ID] = true
	d.lock.Unlock()
	return nil
}

// task returns an attached task.
func (d *Driver) task(id string) (*task, error) {
	d.lock.Lock()
	ok := d.attached[id]
	d.lock.Unlock()
	if !ok {
		return nil, fmt.Errorf("task %q: %w", id, drivers.ErrTaskNotFound)
	}
	d.host.lock.Lock()
	t, ok := d.host.tasks[id]
	d.host.lock.Unlock()
	if !ok {
		return nil, fmt.Errorf("task %q: %w", id, drivers.ErrTaskNotFound)
	}
	return t, nil
}

func (d *Driver) WaitTask(_ context.Context, id string) (<-chan *drivers.ExitResult, error) {
	t, err := d.task(id)
	if err != nil {
		return nil, err
	}
	ch := make(chan *drivers.ExitResult, 1)
	d.host.lock.Lock()
	defer d.host.lock.Unlock()
	if t.result != nil {
		ch <- t.result
		close(ch)
		return ch, nil
	}
	t.waiters = append(t.waiters, ch)
	return ch, nil
}

func (d *Driver) StopTask(ctx context.Context, id string, timeout time.Duration, _ string) error {
	t, err := d.task(id)
	if err != nil {
		return err
	}
	d.host.lock.Lock()
	d.host.stops[id]++
	hangs := boolConfig(t.cfg.Config, "stop_hangs")
	ignore := boolConfig(t.cfg.Config, "ignore_sigterm")
	if !hangs && !ignore {
		d.host.exitLocked(t, &drivers.ExitResult{ExitCode: 143, Signal: 15})
	}
	d.host.lock.Unlock()
	if hangs {
		<-ctx.Done()
		return ctx.Err()
	}
	if ignore {
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		select {
		case <-t.exited:
			return nil
		case <-timer.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		d.host.lock.Lock()
		d.host.exitLocked(t, &drivers.ExitResult{ExitCode: 137, Signal: 9})
		d.host.lock.Unlock()
	}
	return nil
}

func (d *Driver) DestroyTask(_ context.Context, id string, force bool) error {
	d.lock.Lock()
	delete(d.attached, id)
	d.lock.Unlock()
	h := d.host
	h.lock.Lock()
	defer h.lock.Unlock()
	t, ok := h.tasks[id]
	if !ok {
		return nil
	}
	if t.result == nil {
		if !force {
			return fmt.Errorf("task %q is still running", id)
		}
		h.exitLocked(t, &drivers.ExitResult{ExitCode: 137, Signal: 9})
	}
	delete(h.tasks, id)
	return nil
}

func (d *Driver) InspectTask(id string) (*drivers.TaskStatus, error) {
	t, err := d.task(id)
	if err != nil {
		return nil, err
	}
	d.host.lock.Lock()
	defer d.host.lock.Unlock()
	st := &drivers.TaskStatus{ID: id, State: drivers.TaskStateRunning, StartedAt: t.startedAt, PID: t.pid}
	if t.result != nil {
		st.State, st.CompletedAt, st.ExitResult = drivers.TaskStateExited, t.endedAt, t.result
	}
	return st, nil
}

func intConfig(c map[string]any, k string) int {
	switch v := c[k].(type) {
	case int:
		return v
	case int64:
		return int(v)
	case uint64:
		return int(v)
	case float64:
		return int(v)
	}
	return 0
}

func boolConfig(c map[string]any, k string) bool {
	b, _ := c[k].(bool)
	return b
}
