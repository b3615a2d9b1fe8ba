package taskrunner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/client/allocdir"
	"github.com/berth-io/berth/client/allocrunner/shared"
	"github.com/berth-io/berth/client/logs"
	"github.com/berth-io/berth/client/state"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

// Config is what a task runner needs.
type Config struct {
	Alloc *structs.Allocation
	Task  *structs.Task
	// Driver runs the task; nil when this node has no driver of that name
	// (the task then fails with a Driver Failure event).
	Driver   drivers.Driver
	AllocDir *allocdir.AllocDir
	DB       state.DB
	Logger   hclog.Logger
	// Resources is the alloc's hook resources (shared with alloc hooks).
	Resources *shared.HookResources
	// StateUpdated is called after every change of the task state, with
	// no lock held. It must not block for long.
	StateUpdated func()
	// Hooks are extra hooks, after the built-in ones (env, logs), in order.
	Hooks []HookFactory
	// Logs configures log rotation.
	Logs logs.Config
	// Restore loads the task state and handle from DB instead of starting
	// fresh.
	Restore bool
	// State, for a task not restored, is its first state (FirstState) as
	// the caller persisted it with the alloc (state.DB.PutAllocLocal);
	// nil: New makes and persists it.
	State *structs.TaskState
	// KillGrace is how long past the kill timeout the runner waits for a
	// driver to report the task dead (default 5s).
	KillGrace time.Duration
	// Node is the client's node, for "${node.unique.id}" and the other
	// runtime variables in the task's config and env (interpolate.go);
	// nil leaves them as written.
	Node *structs.Node
}

// DefaultKillTimeout applies to tasks that set none.
const DefaultKillTimeout = 5 * time.Second

// hookTimeout bounds Exited, Stop and Shutdown hook calls.
const hookTimeout = 30 * time.Second

// Sentinel errors.
var (
	// ErrTaskNotRunning: Restart asked of a task that is not running.
	ErrTaskNotRunning = errors.New("task is not running")
)

// Runner runs one task. Build it with New, call Run once in a goroutine
// (the alloc runner owns it), or MarkDead instead when the task must not
// run at all.
type Runner struct {
	alloc       *structs.Allocation
	task        *structs.Task
	taskID      string
	jobType     string
	policy      *structs.RestartPolicy
	driver      drivers.Driver
	db          state.DB
	logger      hclog.Logger
	allocDir    *allocdir.AllocDir
	taskDir     *allocdir.TaskDir
	hooks       []Hook
	notify      func()
	killTimeout time.Duration
	killGrace   time.Duration
	node        *structs.Node

	// shutdownCtx ends when the client shuts down: stop watching, leave
	// the task running. killCtx is its child and also ends on Kill.
	shutdownCtx    context.Context
	shutdownCancel context.CancelFunc
	killCtx        context.Context
	killCancel     context.CancelFunc

	restartCh  chan restartRequest
	waitCh     chan struct{}
	finishOnce sync.Once

	// stateLock guards state, killEvent, restoredHandle and started. DB
	// writes of the state happen under it too, so they land in order.
	stateLock      sync.Mutex
	state          *structs.TaskState
	killEvent      *structs.TaskEvent
	restoredHandle *drivers.TaskHandle
	started        bool

	// tracker is touched only by the Run goroutine.
	tracker RestartTracker
}

type restartRequest struct {
	ev      *structs.TaskEvent
	failure bool
}

// New builds a runner. With cfg.Restore it loads the task's state and
// handle from the DB; a task found dead stays dead.
func New(cfg *Config) (*Runner, error) {
	if cfg.Alloc == nil || cfg.Task == nil || cfg.DB == nil || cfg.AllocDir == nil {
		return nil, errors.New("task runner: missing alloc, task, DB or alloc dir")
	}
	a, t := cfg.Alloc, cfg.Task
	r := &Runner{
		alloc:       a,
		task:        t,
		taskID:      a.ID + "/" + t.Name,
		driver:      cfg.Driver,
		db:          cfg.DB,
		logger:      cfg.Logger.Named("task_runner").With("task", t.Name),
		allocDir:    cfg.AllocDir,
		taskDir:     cfg.AllocDir.TaskDir(t.Name),
		notify:      cfg.StateUpdated,
		killTimeout: t.KillTimeout,
		killGrace:   cfg.KillGrace,
		node:        cfg.Node,
		restartCh:   make(chan restartRequest, 1),
		waitCh:      make(chan struct{}),
	}
	if r.notify == nil {
		r.notify = func() {}
	}
	if r.killTimeout <= 0 {
		r.killTimeout = DefaultKillTimeout
	}
	if r.killGrace <= 0 {
		r.killGrace = 5 * time.Second
	}
	if a.Job != nil {
		r.jobType = a.Job.Type
		if tg := a.Job.LookupTaskGroup(a.TaskGroup); tg != nil {
			r.policy = tg.RestartPolicy
		}
	}
	r.shutdownCtx, r.shutdownCancel = context.WithCancel(context.Background())
	r.killCtx, r.killCancel = context.WithCancel(r.shutdownCtx)

	if cfg.Restore {
		ts, err := cfg.DB.GetTaskState(a.ID, t.Name)
		if err != nil {
			return nil, fmt.Errorf("restoring task %q of alloc %s: %w", t.Name, a.ID, err)
		}
		h, err := cfg.DB.GetTaskHandle(a.ID, t.Name)
		if err != nil {
			return nil, fmt.Errorf("restoring task %q of alloc %s: %w", t.Name, a.ID, err)
		}
		r.state, r.restoredHandle = ts, h
	}
	switch {
	case r.state != nil:
	case cfg.State != nil && !cfg.Restore:
		r.state = cfg.State.Copy()
	default:
		r.state = &structs.TaskState{State: structs.TaskStatePending}
		r.updateState(NewEvent(EventReceived, "Task received by client"), nil)
	}

	hc := &HookConfig{Alloc: a, Task: t, AllocDir: cfg.AllocDir, TaskDir: r.taskDir, Resources: cfg.Resources, Lifecycle: r, Logger: r.logger}
	r.hooks = []Hook{newEnvHook(), newLogsHook(taskLogs(cfg.Logs, t.LogConfig), r.taskDir.LogDir, t.Name, r.logger)}
	for _, f := range cfg.Hooks {
		r.hooks = append(r.hooks, f(hc))
	}
	return r, nil
}

// Name is the task's name.
func (r *Runner) Name() string { return r.task.Name }

// PID is the process ID of the running task, as its driver reports it;
// 0 when the task does not run or the driver does not know.
func (r *Runner) PID() int {
	if r.driver == nil {
		return 0
	}
	st, err := r.driver.InspectTask(r.taskID)
	if err != nil || st == nil || st.State != drivers.TaskStateRunning {
		return 0
	}
	return st.PID
}

// State returns a copy of the task state.
func (r *Runner) State() *structs.TaskState {
	r.stateLock.Lock()
	defer r.stateLock.Unlock()
	return r.state.Copy()
}

// IsDead reports whether the task is done for good.
func (r *Runner) IsDead() bool {
	r.stateLock.Lock()
	defer r.stateLock.Unlock()
	return r.state.State == structs.TaskStateDead
}

// MayRun reports whether the task may be running in its driver: its
// state says so, or the runner was restored with the handle of a task an
// earlier client process started and Run has not re-attached to it yet.
// A client that died after it persisted a new task's handle and before
// it recorded the task running restores a pending state with a live task.
func (r *Runner) MayRun() bool {
	r.stateLock.Lock()
	defer r.stateLock.Unlock()
	return r.state.State == structs.TaskStateRunning || r.restoredHandle != nil
}

// WaitCh is closed once Run (or MarkDead) returned, or Shutdown ended a
// runner whose Run never started.
func (r *Runner) WaitCh() <-chan struct{} { return r.waitCh }

func (r *Runner) finish() { r.finishOnce.Do(func() { close(r.waitCh) }) }

// updateState applies fn to the state and appends ev (either may be nil),
// persists the result and tells the alloc runner.
func (r *Runner) updateState(ev *structs.TaskEvent, fn func(*structs.TaskState)) {
	r.stateLock.Lock()
	if fn != nil {
		fn(r.state)
	}
	if ev != nil {
		r.state.Events = append(r.state.Events, ev)
		if n := len(r.state.Events); n > maxEvents {
			r.state.Events = append([]*structs.TaskEvent(nil), r.state.Events[n-maxEvents:]...)
		}
		if ev.FailsTask {
			r.state.Failed = true
		}
	}
	err := r.db.PutTaskState(r.alloc.ID, r.task.Name, r.state)
	r.stateLock.Unlock()
	if err != nil {
		if errors.Is(err, state.ErrUnknownAlloc) {
			r.logger.Debug("not persisting task state of a destroyed alloc")
		} else {
			r.logger.Error("persisting task state failed", "error", err)
		}
	}
	if ev != nil {
		r.logger.Debug("task event", "type", ev.Type, "msg", ev.Message)
	}
	r.notify()
}

// FirstState is a new task's state: pending, with the Received event.
func FirstState() *structs.TaskState {
	return &structs.TaskState{State: structs.TaskStatePending, Events: []*structs.TaskEvent{NewEvent(EventReceived, "Task received by client")}}
}

func setRunning(ts *structs.TaskState) {
	ts.State = structs.TaskStateRunning
	ts.StartedAt = time.Now().UnixNano()
}

func setDead(failed bool) func(*structs.TaskState) {
	return func(ts *structs.TaskState) {
		ts.State = structs.TaskStateDead
		ts.Failed = ts.Failed || failed
		ts.FinishedAt = time.Now().UnixNano()
	}
}

func setRestarting(ts *structs.TaskState) {
	ts.State = structs.TaskStatePending
	ts.Restarts++
	ts.LastRestart = time.Now().UnixNano()
}

// taskLogs is the client's log rotation with what the task's logs block
// sets laid over it.
func taskLogs(client logs.Config, task *structs.LogConfig) logs.Config {
	if task == nil {
		return client
	}
	if task.MaxFiles > 0 {
		client.MaxFiles = task.MaxFiles
	}
	if task.MaxFileSizeMB > 0 {
		client.MaxFileSize = int64(task.MaxFileSizeMB) << 20
	}
	return client
}
