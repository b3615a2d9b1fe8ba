package taskrunner

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

// Kill stops the task for good (its kill timeout applies) and waits until
// the runner finished, or ctx ends. ev is recorded when the kill reaches a
// running task (nil: a plain Killing event); an ev with FailsTask is
// recorded whatever the task was doing, and fails it. Safe to call more
// than once and from any goroutine; the first ev wins.
func (r *Runner) Kill(ctx context.Context, ev *structs.TaskEvent) error {
	r.stateLock.Lock()
	if r.killEvent == nil {
		if ev == nil {
			ev = KillingEvent("Sent interrupt")
		}
		// The caller may hand the same event to every task: keep a copy.
		c := *ev
		c.Details = maps.Clone(ev.Details)
		r.killEvent = &c
	}
	r.stateLock.Unlock()
	r.killCancel()
	select {
	case <-r.waitCh:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("killing task %q of alloc %s: %w", r.task.Name, r.alloc.ID, ctx.Err())
	}
}

// Restart implements Lifecycle.
func (r *Runner) Restart(ctx context.Context, ev *structs.TaskEvent, failure bool) error {
	if r.State().State != structs.TaskStateRunning {
		return fmt.Errorf("restarting task %q of alloc %s: %w", r.task.Name, r.alloc.ID, ErrTaskNotRunning)
	}
	if ev == nil {
		ev = NewEvent(EventRestartSignal, "Restart requested")
	}
	c := *ev
	c.Details = maps.Clone(ev.Details)
	ev = &c
	select {
	case r.restartCh <- restartRequest{ev: ev, failure: failure}:
	default: // one is already queued
	}
	return nil
}

// EmitEvent implements Lifecycle.
func (r *Runner) EmitEvent(ev *structs.TaskEvent) {
	if ev.FailsTask {
		r.updateState(ev, func(ts *structs.TaskState) { ts.Failed = true })
		return
	}
	r.updateState(ev, nil)
}

// Shutdown stops the runner without touching the task, which keeps
// running for the next client process to re-attach to. It waits for Run
// to return (shutdown hooks included), or for ctx.
func (r *Runner) Shutdown(ctx context.Context) error {
	r.shutdownCancel()
	r.stateLock.Lock()
	started := r.started
	r.stateLock.Unlock()
	if !started {
		// Run never began, and now never will (it checks shutdownCtx
		// under the same lock).
		r.finish()
	}
	select {
	case <-r.waitCh:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("shutting down runner of task %q of alloc %s: %w", r.task.Name, r.alloc.ID, ctx.Err())
	}
}

// MarkDead records ev and marks the task dead without running it: failed
// after an alloc prerun failure, not failed when the alloc was stopped
// before its tasks started. Call it instead of Run, never both.
func (r *Runner) MarkDead(ev *structs.TaskEvent, failed bool) {
	if failed {
		failing(ev)
	}
	r.updateState(ev, setDead(failed))
	r.finish()
}

// ErrSignalUnsupported: the task's driver cannot signal a task.
var ErrSignalUnsupported = errors.New("the task's driver cannot send signals")

// Signal sends the named signal to the running task ("" is SIGKILL) and
// records a Signaling event; the task's lifecycle is otherwise untouched.
func (r *Runner) Signal(sig string) error {
	if r.State().State != structs.TaskStateRunning {
		return fmt.Errorf("signalling task %q of alloc %s: %w", r.task.Name, r.alloc.ID, ErrTaskNotRunning)
	}
	s, ok := r.driver.(drivers.Signaler)
	if !ok {
		return fmt.Errorf("signalling task %q of alloc %s (driver %s): %w", r.task.Name, r.alloc.ID, r.task.Driver, ErrSignalUnsupported)
	}
	if err := s.SignalTask(r.taskID, sig); err != nil {
		return err
	}
	name := sig
	if name == "" {
		name = "SIGKILL"
	}
	r.EmitEvent(NewEvent(EventSignaling, "Task being sent signal "+name))
	return nil
}
