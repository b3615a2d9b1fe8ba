package allocrunner

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/client/allocdir"
	"github.com/berth-io/berth/client/allocrunner/shared"
	"github.com/berth-io/berth/client/state"
	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/structs"
)

// Minimal is an alloc runner without tasks: it runs the alloc hooks of its
// config (the CSI hook claims, stages and publishes volumes in Prerun and
// releases them in Postrun) and moves the alloc through pending, running
// once Prerun succeeded, and complete once it is stopped and Postrun
// succeeded (failed if Prerun failed). It persists the alloc and hook data
// like the real runner, so a restored Minimal releases what its
// predecessor took. It exists for berth-nodesim, which runs thousands of
// clients in one process: it shows what the node side of an alloc costs
// without drivers, task runners or alloc dirs.
type Minimal struct {
	id             string
	logger         hclog.Logger
	db             state.DB
	allocDir       *allocdir.AllocDir
	updater        StateUpdater
	hooks          []Hook
	restored       bool
	postrunBackoff helper.Backoff

	ctx        context.Context
	cancel     context.CancelFunc
	stopCtx    context.Context
	stopCancel context.CancelFunc

	updateCh    chan struct{}
	waitCh      chan struct{}
	postrunDone chan struct{}
	// report serializes handing snapshots to the updater (see Runner).
	report chan struct{}

	// lock guards the fields below.
	lock        sync.Mutex
	alloc       *structs.Allocation
	status      string
	description string
	tasksExited bool
}

// NewMinimal builds a Minimal; it persists a new alloc first. cfg.Drivers,
// TaskHooks, Logs and KillGrace are ignored; no alloc dir is made.
func NewMinimal(cfg *Config) (AllocRunner, error) {
	a := cfg.Alloc.Copy()
	if a.Job == nil || a.Job.LookupTaskGroup(a.TaskGroup) == nil {
		return nil, fmt.Errorf("alloc %s: job %q has no group %q", a.ID, a.JobID, a.TaskGroup)
	}
	m := &Minimal{
		id:             a.ID,
		logger:         cfg.Logger.Named("minimal_alloc_runner").With("alloc_id", a.ID),
		db:             cfg.DB,
		allocDir:       allocdir.New(cfg.AllocRoot, a.ID),
		updater:        cfg.StateUpdater,
		restored:       cfg.Restore,
		postrunBackoff: cfg.PostrunBackoff,
		updateCh:       make(chan struct{}, 1),
		waitCh:         make(chan struct{}),
		postrunDone:    make(chan struct{}),
		report:         make(chan struct{}, 1),
		alloc:          a,
		status:         structs.AllocClientStatusPending,
	}
	if m.postrunBackoff.Base <= 0 {
		m.postrunBackoff = helper.Backoff{Base: time.Second, Max: time.Minute}
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.stopCtx, m.stopCancel = context.WithCancel(m.ctx)
	if cfg.Restore {
		st, err := cfg.DB.GetAllocState(a.ID)
		if err != nil {
			return nil, fmt.Errorf("restoring alloc %s: %w", a.ID, err)
		}
		if st != nil && st.TasksExited {
			m.tasksExited, m.status = true, structs.AllocClientStatusComplete
		}
		if a.DesiredStatus != structs.AllocDesiredStatusRun {
			// A stop the previous process stored (see Runner.restoreStop).
			m.stopCancel()
		}
	} else if err := cfg.DB.PutAlloc(a); err != nil {
		return nil, fmt.Errorf("persisting alloc %s: %w", a.ID, err)
	}
	hc := &HookConfig{
		Alloc: a, AllocDir: m.allocDir, Resources: shared.NewHookResources(),
		Data: hookData{db: cfg.DB, allocID: a.ID}, Restored: cfg.Restore, Logger: m.logger,
	}
	for _, f := range cfg.Hooks {
		m.hooks = append(m.hooks, f(hc))
	}
	return m, nil
}

// ID is the alloc's ID.
func (m *Minimal) ID() string { return m.id }

// AllocDir is the alloc's directory tree; Minimal never builds it.
func (m *Minimal) AllocDir() *allocdir.AllocDir { return m.allocDir }

// HasTask is false: a Minimal runs no tasks.
func (m *Minimal) HasTask(string) bool { return false }

// WaitCh is closed once Run returned.
func (m *Minimal) WaitCh() <-chan struct{} { return m.waitCh }

// Alloc is the servers' latest version with this runner's status.
func (m *Minimal) Alloc() *structs.Allocation {
	m.lock.Lock()
	defer m.lock.Unlock()
	a := m.alloc.Copy()
	a.TaskStates = map[string]*structs.TaskState{}
	a.ClientStatus, a.ClientDescription = m.status, m.description
	a.TasksExited = m.tasksExited
	return a
}

func (m *Minimal) setStatus(status, description string) {
	m.lock.Lock()
	m.status, m.description = status, description
	m.lock.Unlock()
	m.reportState()
}

func (m *Minimal) reportState() {
	m.report <- struct{}{}
	defer func() { <-m.report }()
	m.updater.AllocStateUpdated(m.Alloc())
}

// Run runs Prerun hooks, reports running, waits for a stop and runs
// Postrun hooks; it returns after Shutdown or Destroy.
func (m *Minimal) Run() {
	defer close(m.waitCh)
	m.reportState()
	m.lock.Lock()
	exited := m.tasksExited
	m.lock.Unlock()
	if exited {
		close(m.postrunDone)
		<-m.ctx.Done()
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(m.updateLoop)

	if err := m.prerun(); err != nil {
		switch {
		case m.ctx.Err() != nil:
			return // shutdown
		case m.stopCtx.Err() != nil:
			m.setStatus(structs.AllocClientStatusComplete, "stopped before it ran")
		default:
			m.logger.Error("prerun failed; failing the alloc", "error", err)
			m.setStatus(structs.AllocClientStatusFailed, err.Error())
		}
	} else {
		m.setStatus(structs.AllocClientStatusRunning, "")
		select {
		case <-m.stopCtx.Done():
		case <-m.ctx.Done():
		}
		if m.ctx.Err() != nil {
			return // shutdown: the "workload" keeps its volumes
		}
		m.setStatus(structs.AllocClientStatusComplete, "")
	}
	m.postrun()
	<-m.ctx.Done()
}

func (m *Minimal) prerun() error {
	for _, h := range m.hooks {
		if ph, ok := h.(PrerunHook); ok {
			if err := ph.Prerun(m.stopCtx); err != nil {
				return fmt.Errorf("prerun hook %q failed: %w", h.Name(), err)
			}
		}
	}
	return nil
}

// postrun runs Postrun hooks in reverse, retrying failed ones, then
// records TasksExited (see Runner.postrun).
func (m *Minimal) postrun() {
	defer close(m.postrunDone)
	var pending []PostrunHook
	for _, h := range slices.Backward(m.hooks) {
		if ph, ok := h.(PostrunHook); ok {
			pending = append(pending, ph)
		}
	}
	for attempt := 0; len(pending) > 0; attempt++ {
		var failed []PostrunHook
		for _, h := range pending {
			if err := h.Postrun(m.ctx); err != nil {
				if m.ctx.Err() != nil {
					return
				}
				m.logger.Warn("postrun hook failed; will retry", "hook", h.Name(), "error", err)
				failed = append(failed, h)
			}
		}
		if pending = failed; len(pending) == 0 {
			break
		}
		if !helper.SleepCtx(m.ctx, m.postrunBackoff.Delay(attempt)) {
			return
		}
	}
	if err := m.db.PutAllocState(m.id, &state.AllocState{TasksExited: true}); err != nil {
		m.logger.Error("persisting alloc state failed", "error", err)
	}
	m.lock.Lock()
	m.tasksExited = true
	m.lock.Unlock()
	m.reportState()
}

func (m *Minimal) updateLoop() {
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-m.updateCh:
		}
		m.lock.Lock()
		a := m.alloc
		m.lock.Unlock()
		for _, h := range m.hooks {
			if uh, ok := h.(UpdateHook); ok {
				if err := uh.Update(m.ctx, &UpdateRequest{Alloc: a}); err != nil && m.ctx.Err() == nil {
					m.logger.Warn("update hook failed", "hook", h.Name(), "error", err)
				}
			}
		}
		if a.DesiredStatus != structs.AllocDesiredStatusRun {
			m.stopCancel()
		}
	}
}

// Update persists a new version of the alloc and applies it in the
// runner's goroutine; a stop ends the "workload".
func (m *Minimal) Update(a *structs.Allocation) {
	a = a.Copy()
	m.lock.Lock()
	m.alloc = a
	m.lock.Unlock()
	if err := m.db.PutAlloc(a); err != nil {
		m.logger.Error("persisting alloc update failed", "error", err)
	}
	select {
	case m.updateCh <- struct{}{}:
	default:
	}
}

// Stop ends the "workload" and waits for Postrun (or ctx).
func (m *Minimal) Stop(ctx context.Context, _ string) error {
	m.stopCancel()
	select {
	case <-m.postrunDone:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stopping alloc %s: %w", m.id, ctx.Err())
	}
}

// StopFailed is Stop; the alloc ends failed with ev's message.
func (m *Minimal) StopFailed(ctx context.Context, ev *structs.TaskEvent) error {
	m.lock.Lock()
	if m.stopCtx.Err() == nil {
		m.description = ev.DisplayMessage
	}
	m.lock.Unlock()
	return m.Stop(ctx, "")
}

// Destroy stops the alloc, ends Run, runs destroy hooks and forgets the
// alloc in the client state.
func (m *Minimal) Destroy(ctx context.Context) error {
	if err := m.Stop(ctx, ""); err != nil {
		m.logger.Warn("destroying alloc before its postrun hooks finished", "error", err)
	}
	m.cancel()
	select {
	case <-m.waitCh:
	case <-ctx.Done():
		return fmt.Errorf("destroying alloc %s: %w", m.id, ctx.Err())
	}
	for _, h := range slices.Backward(m.hooks) {
		if dh, ok := h.(DestroyHook); ok {
			if err := dh.Destroy(ctx); err != nil {
				m.logger.Warn("destroy hook failed", "hook", h.Name(), "error", err)
			}
		}
	}
	if err := m.db.DeleteAlloc(m.id); err != nil {
		return fmt.Errorf("destroying alloc %s: %w", m.id, err)
	}
	return nil
}

// Shutdown stops the runner, leaving volumes published, and runs
// shutdown hooks.
func (m *Minimal) Shutdown(ctx context.Context) error {
	m.cancel()
	var err error
	select {
	case <-m.waitCh:
	case <-ctx.Done():
		err = fmt.Errorf("shutting down alloc %s: %w", m.id, ctx.Err())
	}
	for _, h := range m.hooks {
		if sh, ok := h.(ShutdownHook); ok {
			sh.Shutdown(ctx)
		}
	}
	return err
}
