package allocrunner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/client/allocdir"
	"github.com/berth-io/berth/client/allocrunner/shared"
	"github.com/berth-io/berth/client/allocrunner/taskrunner"
	"github.com/berth-io/berth/client/logs"
	"github.com/berth-io/berth/client/state"
	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/helper/steptrace"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

// StateUpdater receives the alloc's client view whenever it changes. It
// must not block (the client queues and batches).
type StateUpdater interface {
	AllocStateUpdated(alloc *structs.Allocation)
}

// Config is what an alloc runner needs.
type Config struct {
	Alloc *structs.Allocation
	// AllocRoot is <data_dir>/alloc.
	AllocRoot    string
	DB           state.DB
	Drivers      map[string]drivers.Driver
	StateUpdater StateUpdater
	Logger       hclog.Logger
	// Restore rebuilds the runner from the client state after a client
	// restart instead of starting the alloc fresh.
	Restore bool
	// Hooks are extra alloc hooks, after the built-in alloc dir hook.
	Hooks []HookFactory
	// TaskHooks are extra task hooks for every task.
	TaskHooks []taskrunner.HookFactory
	Logs      logs.Config
	// PostrunBackoff paces retries of failed postrun hooks (default 1s
	// doubling to 1m).
	PostrunBackoff helper.Backoff
	// KillGrace: see taskrunner.Config.
	KillGrace time.Duration
	// Node: see taskrunner.Config.
	Node *structs.Node
}

// Runner runs one alloc. Build it with New and call Run once, in a
// goroutine the caller owns; Run returns after Shutdown or Destroy.
type Runner struct {
	id             string
	logger         hclog.Logger
	db             state.DB
	allocDir       *allocdir.AllocDir
	updater        StateUpdater
	hooks          []Hook
	tasks          []*taskrunner.Runner
	restored       bool
	postrunBackoff helper.Backoff
	// claimsDone is closed when the CSI hook's claims are answered
	// (HookConfig.ClaimsDone): prerun builds the alloc dir from then on.
	claimsDone chan struct{}

	// ctx lives until Shutdown or Destroy; stopCtx, its child, also ends
	// when the alloc is stopped (it cancels a Prerun in progress).
	ctx        context.Context
	cancel     context.CancelFunc
	stopCtx    context.Context
	stopCancel context.CancelFunc

	updateCh    chan struct{}
	waitCh      chan struct{}
	postrunDone chan struct{}
	// persistLock orders the alloc's durable writes (prerun's first one,
	// Update's): each writes the latest version, so the last to land is
	// the newest.
	persistLock sync.Mutex

	// lock guards alloc, tasksExited and failEvent.
	lock        sync.Mutex
	alloc       *structs.Allocation
	tasksExited bool
	// failEvent is set by a StopFailed that came before any other stop.
	failEvent *structs.TaskEvent

	// report is a one-slot lock held from taking a state snapshot until
	// the updater has it. The updater (the client's syncer) keeps only the
	// latest snapshot per alloc, so two task runners reporting at once
	// must not hand theirs over in the opposite order: the older one would
	// win and the servers would see, say, pending after running. (A
	// channel rather than a mutex: a goroutine waiting on it counts as
	// blocked for testing/synctest.)
	report chan struct{}
}

// New builds a runner; it persists a new alloc before anything else.
//
// A new alloc is written to the node-local file before New returns
// (state.DB.PutAllocLocal: no fsync, and a process crash keeps it), and
// to state.db at the end of prerun, before the tasks start (see
// persistNew): the claim and the mounts do not wait for that fsync (it was
// ~1 ms of issue 20's K=1 claim path), nor share the disk with it. A
// client killed before the durable write finds the alloc in the local
// file and writes it to state.db at its next start, so it still knows,
// and releases, what the alloc claimed and mounted; after a machine crash
// the local file is gone, but so are the hook records of what the alloc
// claimed and the mounts themselves: the servers' NodeDetach frees those
// claims either way (DESIGN.md §3).
func New(cfg *Config) (*Runner, error) {
	a := cfg.Alloc.Copy()
	if a.Job == nil {
		return nil, fmt.Errorf("alloc %s: missing job", a.ID)
	}
	tg := a.Job.LookupTaskGroup(a.TaskGroup)
	if tg == nil {
		return nil, fmt.Errorf("alloc %s: job %q has no group %q", a.ID, a.JobID, a.TaskGroup)
	}
	r := &Runner{
		id:             a.ID,
		logger:         cfg.Logger.Named("alloc_runner").With("alloc_id", a.ID),
		db:             cfg.DB,
		allocDir:       allocdir.New(cfg.AllocRoot, a.ID),
		updater:        cfg.StateUpdater,
		restored:       cfg.Restore,
		postrunBackoff: cfg.PostrunBackoff,
		updateCh:       make(chan struct{}, 1),
		report:         make(chan struct{}, 1),
		waitCh:         make(chan struct{}),
		postrunDone:    make(chan struct{}),
		alloc:          a,
	}
	if r.postrunBackoff.Base <= 0 {
		r.postrunBackoff = helper.Backoff{Base: time.Second, Max: time.Minute}
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.stopCtx, r.stopCancel = context.WithCancel(r.ctx)

	if cfg.Restore {
		st, err := cfg.DB.GetAllocState(a.ID)
		if err != nil {
			return nil, fmt.Errorf("restoring alloc %s: %w", a.ID, err)
		}
		r.tasksExited = st != nil && st.TasksExited
		if a.DesiredStatus != structs.AllocDesiredStatusRun {
			r.restoreStop()
		}
	}
	var first map[string]*structs.TaskState
	if !cfg.Restore {
		// The tasks' first states ride the alloc's commit.
		first = make(map[string]*structs.TaskState, len(tg.Tasks))
		for _, t := range tg.Tasks {
			first[t.Name] = taskrunner.FirstState()
		}
		if err := cfg.DB.PutAllocLocal(a, first); err != nil {
			return nil, fmt.Errorf("persisting alloc %s: %w", a.ID, err)
		}
		steptrace.Mark(a.ID, steptrace.AllocPersisted)
	}

	res := shared.NewHookResources()
	names := make([]string, 0, len(tg.Tasks))
	for _, t := range tg.Tasks {
		names = append(names, t.Name)
		tr, err := taskrunner.New(&taskrunner.Config{
			Alloc: a, Task: t, Driver: cfg.Drivers[t.Driver], AllocDir: r.allocDir, DB: cfg.DB,
			Logger: r.logger, Resources: res, StateUpdated: r.taskStateUpdated, Hooks: cfg.TaskHooks,
			Logs: cfg.Logs, Restore: cfg.Restore, State: first[t.Name], KillGrace: cfg.KillGrace, Node: cfg.Node,
		})
		if err != nil {
			return nil, fmt.Errorf("alloc %s: %w", a.ID, err)
		}
		r.tasks = append(r.tasks, tr)
	}

	r.claimsDone = make(chan struct{})
	hc := &HookConfig{Alloc: a, AllocDir: r.allocDir, Resources: res, Data: hookData{db: cfg.DB, allocID: a.ID}, Restored: cfg.Restore, Logger: r.logger,
		ClaimsDone: sync.OnceFunc(func() { close(r.claimsDone) })}
	r.hooks = []Hook{&allocDirHook{dir: r.allocDir, tasks: names}}
	for _, f := range cfg.Hooks {
		r.hooks = append(r.hooks, f(hc))
	}
	return r, nil
}

// persist writes the latest version of the alloc to state.db.
func (r *Runner) persist() error {
	r.persistLock.Lock()
	defer r.persistLock.Unlock()
	return r.db.PutAlloc(r.latestAlloc())
}

// restoreStop applies, in a restored runner, a stop the previous client
// process stored but may not have carried out: it persisted the stopped
// alloc (Update) and was killed before its tasks were killed, so they run
// on, re-attached, and the servers, whose version the stored one is, send
// nothing newer. Without it the tasks ran forever and postrun never
// released the alloc's CSI volumes (seeds 40071, 40859: a claim left
// taken, the volume published on the restarted node). Prerun gets a
// stopped context, so a restored alloc never claims again, and the update
// loop kills the tasks as for any stop.
func (r *Runner) restoreStop() {
	r.stopCancel()
	r.updateCh <- struct{}{}
}

// ID is the alloc's ID.
func (r *Runner) ID() string { return r.id }

// AllocDir is the alloc's directory tree.
func (r *Runner) AllocDir() *allocdir.AllocDir { return r.allocDir }

// HasTask reports whether the alloc runs a task of that name.
func (r *Runner) HasTask(name string) bool {
	for _, tr := range r.tasks {
		if tr.Name() == name {
			return true
		}
	}
	return false
}

// TaskPIDs is the process ID of each running task, by task name.
func (r *Runner) TaskPIDs() map[string]int {
	out := map[string]int{}
	for _, tr := range r.tasks {
		if pid := tr.PID(); pid > 0 {
			out[tr.Name()] = pid
		}
	}
	return out
}

// Alloc returns the client's view of the alloc: the servers' latest
// version with this client's task states, status and TasksExited.
func (r *Runner) Alloc() *structs.Allocation {
	states := make(map[string]*structs.TaskState, len(r.tasks))
	for _, tr := range r.tasks {
		states[tr.Name()] = tr.State()
	}
	r.lock.Lock()
	defer r.lock.Unlock()
	a := r.alloc.Copy()
	a.TaskStates = states
	a.ClientStatus, a.ClientDescription = ClientStatus(states)
	a.TasksExited = r.tasksExited
	return a
}

// WaitCh is closed once Run returned.
func (r *Runner) WaitCh() <-chan struct{} { return r.waitCh }

func (r *Runner) taskStateUpdated() {
	r.report <- struct{}{}
	defer func() { <-r.report }()
	r.updater.AllocStateUpdated(r.Alloc())
}

// Update takes a new version of the alloc from the servers: the runner's
// goroutine runs update hooks and, when the alloc is to stop, kills its
// tasks, while Update persists the new version. It blocks only for that
// write.
//
// The write comes after the signal, so that a stop does not wait for the
// fsync of state.db before the kill starts. A client that crashes in
// between restores the previous version, and the servers' next answer,
// with a higher AllocModifyIndex, updates it again.
func (r *Runner) Update(a *structs.Allocation) {
	a = a.Copy()
	if a.DesiredStatus != structs.AllocDesiredStatusRun {
		steptrace.Mark(a.ID, steptrace.StopReceived)
	}
	r.lock.Lock()
	r.alloc = a
	r.lock.Unlock()
	select {
	case r.updateCh <- struct{}{}:
	default: // one is pending; it will read the latest alloc
	}
	if err := r.persist(); err != nil {
		r.logger.Error("persisting alloc update failed", "error", err)
	}
}

func (r *Runner) latestAlloc() *structs.Allocation {
	r.lock.Lock()
	defer r.lock.Unlock()
	return r.alloc
}

// killTasks kills every task with ev, in parallel, and waits (or ctx).
func (r *Runner) killTasks(ctx context.Context, ev func() *structs.TaskEvent) error {
	var (
		wg   sync.WaitGroup
		lock sync.Mutex
		errs []error
	)
	for _, tr := range r.tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := tr.Kill(ctx, ev()); err != nil {
				lock.Lock()
				errs = append(errs, err)
				lock.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ErrUnknownTask: the alloc has no task of that name.
var ErrUnknownTask = errors.New("alloc has no such task")

// RestartTasks restarts the named task, or every running task when task
// is "" (alloc restart). A task that is not running cannot be restarted.
func (r *Runner) RestartTasks(ctx context.Context, task string) error {
	return r.eachTask(task, func(tr *taskrunner.Runner) error {
		return tr.Restart(ctx, taskrunner.NewEvent(taskrunner.EventRestartSignal, "User requested task to restart"), false)
	})
}

// SignalTasks sends sig to the named task, or to every running task when
// task is "" (alloc signal).
func (r *Runner) SignalTasks(task, sig string) error {
	return r.eachTask(task, func(tr *taskrunner.Runner) error { return tr.Signal(sig) })
}

// eachTask runs fn on the named task, or on every running task when task
// is "" (an error when none runs).
func (r *Runner) eachTask(task string, fn func(*taskrunner.Runner) error) error {
	if task != "" {
		for _, tr := range r.tasks {
			if tr.Name() == task {
				return fn(tr)
			}
		}
		return fmt.Errorf("alloc %s has no task %q: %w", r.id, task, ErrUnknownTask)
	}
	var errs []error
	ran := 0
	for _, tr := range r.tasks {
		if tr.State().State != structs.TaskStateRunning {
			continue
		}
		ran++
		errs = append(errs, fn(tr))
	}
	if ran == 0 {
		return fmt.Errorf("alloc %s: %w", r.id, taskrunner.ErrTaskNotRunning)
	}
	return errors.Join(errs...)
}
