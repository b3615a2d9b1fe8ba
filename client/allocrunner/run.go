package allocrunner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/berth-io/berth/client/allocrunner/taskrunner"
	"github.com/berth-io/berth/client/state"
	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/helper/crashpoint"
	"github.com/berth-io/berth/helper/simbug"
	"github.com/berth-io/berth/helper/steptrace"
	"github.com/berth-io/berth/nomad/structs"
)

// Run runs the alloc until Shutdown or Destroy. Call it once.
func (r *Runner) Run() {
	defer close(r.waitCh)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.updateLoop()
	}()

	r.taskStateUpdated() // report at once, even if nothing changes for a while
	r.runTasks()
	if r.ctx.Err() != nil {
		return // shutdown: tasks keep running
	}
	r.postrun()
	<-r.ctx.Done()
}

// runTasks runs prerun hooks, then every task, until all tasks exited or
// the client shuts down.
func (r *Runner) runTasks() {
	allDead := true
	for _, tr := range r.tasks {
		allDead = allDead && tr.IsDead()
	}
	if allDead {
		// Restored after every task exited: nothing to set up. Run returns
		// at once for a dead task; it just settles the runner.
		for _, tr := range r.tasks {
			tr.Run()
		}
		return
	}
	if err := r.prerun(); err != nil {
		switch {
		case r.ctx.Err() != nil:
			return
		case r.stopCtx.Err() != nil:
			fail := r.failingStop()
			for _, tr := range r.reapRestored(func() *structs.TaskEvent {
				if fail != nil {
					return copyEvent(fail)
				}
				return taskrunner.KillingEvent("Alloc stopped while the client set it up again")
			}) {
				if fail != nil {
					tr.MarkDead(copyEvent(fail), true)
					continue
				}
				tr.MarkDead(taskrunner.NewEvent(taskrunner.EventKilled, "Alloc stopped before its tasks started"), false)
			}
		default:
			r.logger.Error("prerun failed; failing the alloc", "error", err)
			for _, tr := range r.reapRestored(func() *structs.TaskEvent {
				ev := taskrunner.NewEvent(taskrunner.EventSetupFailure, err.Error())
				ev.FailsTask = true
				return ev
			}) {
				tr.MarkDead(taskrunner.NewEvent(taskrunner.EventSetupFailure, err.Error()), true)
			}
		}
		return
	}

	done := make(chan *taskrunner.Runner, len(r.tasks))
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, tr := range r.tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr.Run()
			done <- tr
		}()
	}
	siblingsKilled := false
	for range r.tasks {
		tr := <-done
		if r.ctx.Err() != nil || r.stopCtx.Err() != nil || siblingsKilled || !tr.State().Failed {
			continue // (a stopped alloc's tasks are all being killed already)
		}
		// A failed task takes the alloc down: stop its siblings.
		siblingsKilled = true
		name := tr.Name()
		r.logger.Info("task failed; killing its siblings", "task", name)
		err := r.killTasks(r.ctx, func() *structs.TaskEvent {
			return taskrunner.NewEvent(taskrunner.EventSiblingFailed, fmt.Sprintf("Task %q failed", name))
		})
		if err != nil && r.ctx.Err() == nil {
			r.logger.Warn("killing siblings of a failed task", "error", err)
		}
	}
}

// reapRestored kills the tasks that were restored running (the client
// restarted while they ran) when prerun did not get through: they still
// run in the driver, and marking them dead would leak them while postrun
// releases their volumes under them (found by testutil/sim). A task whose
// handle was restored counts as running whatever its stored state says
// (taskrunner.MayRun). Each is reattached and killed with ev; the tasks
// that never ran are returned for the caller to mark dead.
func (r *Runner) reapRestored(ev func() *structs.TaskEvent) []*taskrunner.Runner {
	var rest []*taskrunner.Runner
	var wg sync.WaitGroup
	for _, tr := range r.tasks {
		if !tr.MayRun() {
			rest = append(rest, tr)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			go tr.Run() // reattaches, sees the kill, stops the task
			if err := tr.Kill(r.ctx, ev()); err != nil {
				r.logger.Warn("killing a restored task whose alloc did not set up again", "task", tr.Name(), "error", err)
			}
		}()
	}
	wg.Wait()
	return rest
}

// prerun runs the prerun hooks in order, but for the alloc dir's: it is
// built beside them. None of them needs it (the CSI hook claims and mounts
// under the CSI root), the tasks that do start only after all of prerun,
// and building it (~1 ms of mkdirs, more under load) was the largest step
// between a new alloc and its Claim RPC (issue 20's step trace). The
// build starts once the CSI hook's claims are answered (or the hooks are
// done), beside the mounts rather than the claims: where the servers'
// Raft log shares the client's file system (one agent, -dev, the bench),
// ext4's fsync of the Claim's entry commits the journal transaction that
// holds the build's mkdirs, and the Claim's WAL append took 0.94–1.08 ms
// instead of 0.61–0.65 (K=1 step trace, 40 claims, two runs each). A
// hook's failure is reported first; either way prerun returns only once
// the build is over, and what the hooks did is undone by postrun as
// before.
func (r *Runner) prerun() error {
	steptrace.Mark(r.id, steptrace.PrerunStarted)
	hooks := r.hooks
	dir, ok := hooks[0].(*allocDirHook)
	if !ok {
		return errors.Join(r.prerunHooks(hooks), r.persistNew())
	}
	dirDone := make(chan error, 1)
	hooksDone := make(chan struct{})
	go func() {
		select {
		case <-r.claimsDone:
		case <-hooksDone:
		case <-r.stopCtx.Done():
			// Stopped or shut down first (a hook hung before the claims):
			// build nothing, as the build itself would stop.
			dirDone <- r.stopCtx.Err()
			return
		}
		dirDone <- dir.Prerun(r.stopCtx)
	}()
	err := r.prerunHooks(hooks[1:])
	close(hooksDone)
	if derr := <-dirDone; derr != nil && err == nil {
		err = fmt.Errorf("prerun hook %q failed: %w", dir.Name(), derr)
	}
	return errors.Join(err, r.persistNew())
}

// persistNew writes a new alloc to state.db (New wrote it to the
// node-local file only), after its claims and mounts and before its
// tasks. A failed write fails the alloc like a failed hook. A restored
// alloc is in state.db already.
func (r *Runner) persistNew() error {
	if r.restored {
		return nil
	}
	crashpoint.Hit(crashpoint.AllocLocal)
	if err := r.persist(); err != nil {
		return fmt.Errorf("persisting alloc %s: %w", r.id, err)
	}
	return nil
}

func (r *Runner) prerunHooks(hooks []Hook) error {
	for _, h := range hooks {
		ph, ok := h.(PrerunHook)
		if !ok {
			continue
		}
		start := time.Now()
		if err := ph.Prerun(r.stopCtx); err != nil {
			return fmt.Errorf("prerun hook %q failed: %w", h.Name(), err)
		}
		r.logger.Trace("prerun hook done", "hook", h.Name(), "duration", time.Since(start))
	}
	return nil
}

// postrun runs postrun hooks in reverse order, retrying the failed ones
// with backoff, then records TasksExited. It closes postrunDone when it
// is finished or gives up (Shutdown, Destroy).
func (r *Runner) postrun() {
	defer close(r.postrunDone)
	r.lock.Lock()
	exited := r.tasksExited
	r.lock.Unlock()
	if exited {
		return
	}
	steptrace.Mark(r.id, steptrace.PostrunStarted)
	var pending []PostrunHook
	for _, h := range slices.Backward(r.hooks) {
		if ph, ok := h.(PostrunHook); ok {
			pending = append(pending, ph)
		}
	}
	for attempt := 0; len(pending) > 0; attempt++ {
		var failed []PostrunHook
		for _, h := range pending {
			if err := h.Postrun(r.ctx); err != nil {
				if r.ctx.Err() != nil {
					return
				}
				r.logger.Warn("postrun hook failed; will retry", "hook", h.Name(), "error", err)
				failed = append(failed, h)
			}
		}
		if pending = failed; len(pending) == 0 {
			break
		}
		if !helper.SleepCtx(r.ctx, r.postrunBackoff.Delay(attempt)) {
			return
		}
	}
	r.lock.Lock()
	r.tasksExited = true
	r.lock.Unlock()
	if err := r.db.PutAllocState(r.id, &state.AllocState{TasksExited: true}); err != nil {
		r.logger.Error("persisting alloc state failed", "error", err)
	}
	r.taskStateUpdated()
}

// updateLoop applies alloc updates until the runner ends.
func (r *Runner) updateLoop() {
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.updateCh:
		}
		a := r.latestAlloc()
		for _, h := range r.hooks {
			if uh, ok := h.(UpdateHook); ok {
				if err := uh.Update(r.ctx, &UpdateRequest{Alloc: a}); err != nil && r.ctx.Err() == nil {
					r.logger.Warn("update hook failed", "hook", h.Name(), "error", err)
				}
			}
		}
		if a.DesiredStatus == structs.AllocDesiredStatusRun || simbug.On(simbug.IgnoreStop) {
			continue
		}
		r.stopCancel()
		reason := "Alloc was stopped"
		if a.DesiredDescription != "" {
			reason += ": " + a.DesiredDescription
		}
		if err := r.killTasks(r.ctx, func() *structs.TaskEvent { return taskrunner.KillingEvent(reason) }); err != nil && r.ctx.Err() == nil {
			r.logger.Warn("killing tasks of a stopped alloc", "error", err)
		}
	}
}

// Stop kills the alloc's tasks (their kill timeouts apply) and waits for
// postrun hooks, or for ctx. The runner keeps running until Destroy or
// Shutdown. Dev agents stop every alloc this way on shutdown.
func (r *Runner) Stop(ctx context.Context, reason string) error {
	return r.stop(ctx, taskrunner.KillingEvent(reason))
}

// StopFailed is Stop for an alloc the client gives up on by itself, with
// no word from the servers (it lost them past its disconnect deadline):
// every task records ev, running or not yet started, and fails with it,
// so the alloc ends failed and the servers, once told, reschedule it. Like
// every stopped alloc it never runs again, whatever Update brings. ev is
// copied, with FailsTask set. The first Stop or StopFailed decides how
// tasks are killed; later calls only wait.
func (r *Runner) StopFailed(ctx context.Context, ev *structs.TaskEvent) error {
	ev = copyEvent(ev)
	ev.FailsTask = true
	// Before stopCancel: a Prerun it interrupts reads it.
	r.lock.Lock()
	if r.stopCtx.Err() == nil {
		r.failEvent = ev
	}
	r.lock.Unlock()
	return r.stop(ctx, ev)
}

// failingStop is the event of a StopFailed, or nil.
func (r *Runner) failingStop() *structs.TaskEvent {
	r.lock.Lock()
	defer r.lock.Unlock()
	return r.failEvent
}

func copyEvent(ev *structs.TaskEvent) *structs.TaskEvent {
	c := *ev
	c.Details = maps.Clone(ev.Details)
	return &c
}

// stop kills every task with ev (each task keeps a copy) and waits for
// postrun hooks, or ctx.
func (r *Runner) stop(ctx context.Context, ev *structs.TaskEvent) error {
	r.stopCancel()
	err := r.killTasks(ctx, func() *structs.TaskEvent { return ev })
	select {
	case <-r.postrunDone:
	case <-ctx.Done():
		return fmt.Errorf("stopping alloc %s: %w", r.id, ctx.Err())
	}
	return err
}

// Destroy stops the alloc for good: kills its tasks, waits for postrun
// hooks (up to ctx), ends Run, runs destroy hooks (the alloc dir goes
// last) and forgets the alloc in the client state.
func (r *Runner) Destroy(ctx context.Context) error {
	if err := r.Stop(ctx, "Alloc was destroyed"); err != nil {
		r.logger.Warn("destroying alloc before its tasks and postrun hooks finished", "error", err)
	}
	r.cancel()
	select {
	case <-r.waitCh:
	case <-ctx.Done():
		return fmt.Errorf("destroying alloc %s: %w", r.id, ctx.Err())
	}
	for _, h := range slices.Backward(r.hooks) {
		if dh, ok := h.(DestroyHook); ok {
			if err := dh.Destroy(ctx); err != nil {
				r.logger.Warn("destroy hook failed", "hook", h.Name(), "error", err)
			}
		}
	}
	if err := r.db.DeleteAlloc(r.id); err != nil {
		return fmt.Errorf("destroying alloc %s: %w", r.id, err)
	}
	return nil
}

// Shutdown stops the runner without touching its tasks: they keep running
// for the next client process. It waits for Run (up to ctx), then runs
// shutdown hooks.
func (r *Runner) Shutdown(ctx context.Context) error {
	r.cancel()
	var wg sync.WaitGroup
	for _, tr := range r.tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := tr.Shutdown(ctx); err != nil {
				r.logger.Warn("task runner did not shut down in time", "task", tr.Name(), "error", err)
			}
		}()
	}
	wg.Wait()
	var err error
	select {
	case <-r.waitCh:
	case <-ctx.Done():
		err = fmt.Errorf("shutting down alloc %s: %w", r.id, ctx.Err())
	}
	for _, h := range r.hooks {
		if sh, ok := h.(ShutdownHook); ok {
			sh.Shutdown(ctx)
		}
	}
	return err
}
