package taskrunner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/helper/steptrace"
	"github.com/berth-io/berth/plugins/drivers"
)

// waitTask waits for the task to exit, handling kill and restart requests.
func (r *Runner) waitTask() (*drivers.ExitResult, waitOutcome) {
	ch, err := r.driver.WaitTask(r.shutdownCtx, r.taskID)
	if err != nil {
		if r.shutdownCtx.Err() != nil {
			return nil, outcomeShutdown
		}
		return &drivers.ExitResult{Err: fmt.Errorf("waiting for task: %w", err)}, outcomeExited
	}
	select {
	case res, ok := <-ch:
		if !ok && r.shutdownCtx.Err() != nil {
			// The driver closed the wait because the client is shutting
			// down (WaitTask's ctx), not because the task exited.
			return nil, outcomeShutdown
		}
		return exitResult(res, ok), outcomeExited
	case <-r.killCtx.Done():
		if r.shutdownCtx.Err() != nil {
			return nil, outcomeShutdown
		}
		r.stateLock.Lock()
		ev := r.killEvent
		r.stateLock.Unlock()
		r.updateState(withDetail(ev, "kill_timeout", r.killTimeout.String()), nil)
		steptrace.Mark(r.alloc.ID, steptrace.KillSent)
		res := r.stopTask(ch)
		steptrace.Mark(r.alloc.ID, steptrace.TaskExited)
		if r.shutdownCtx.Err() != nil && res == nil {
			return nil, outcomeShutdown
		}
		return res, outcomeKilled
	case req := <-r.restartCh:
		r.updateState(req.ev, nil)
		res := r.stopTask(ch)
		if r.shutdownCtx.Err() != nil && res == nil {
			return nil, outcomeShutdown
		}
		if req.failure {
			return res, outcomeExited
		}
		return res, outcomeRestart
	}
}

// stopTask asks the driver to stop the task within its kill timeout and
// waits for the exit; nil if the client shut down first. A driver that
// does not manage it within the kill grace gets a forced destroy, so a
// hung driver delays a kill by at most killTimeout + 3×killGrace.
func (r *Runner) stopTask(ch <-chan *drivers.ExitResult) *drivers.ExitResult {
	ctx, cancel := context.WithTimeout(r.shutdownCtx, r.killTimeout+r.killGrace)
	defer cancel()
	if err := r.driver.StopTask(ctx, r.taskID, r.killTimeout, ""); err != nil && r.shutdownCtx.Err() == nil {
		r.logger.Warn("stopping task failed; destroying it", "error", err)
		dctx, dcancel := context.WithTimeout(r.shutdownCtx, r.killGrace)
		err := r.driver.DestroyTask(dctx, r.taskID, true)
		dcancel()
		if err != nil && !errors.Is(err, drivers.ErrTaskNotFound) {
			r.logger.Error("destroying task failed", "error", err)
		}
	}
	wait := time.NewTimer(r.killGrace)
	defer wait.Stop()
	select {
	case res, ok := <-ch:
		if !ok && r.shutdownCtx.Err() != nil {
			// The driver closed the wait because the client is shutting
			// down, not because the task exited: it may well still run
			// (StopTask was cut short too), so it must not be recorded
			// dead, or the alloc runner would release its volumes.
			return nil
		}
		return exitResult(res, ok)
	case <-wait.C:
		return &drivers.ExitResult{Err: fmt.Errorf("task did not exit within its kill timeout %v and the grace after it", r.killTimeout)}
	case <-r.shutdownCtx.Done():
		return nil
	}
}

func exitResult(res *drivers.ExitResult, ok bool) *drivers.ExitResult {
	if !ok || res == nil {
		return &drivers.ExitResult{Err: errors.New("driver ended the wait without a result")}
	}
	return res
}

// taskExited releases the driver's resources for an exited task, forgets
// its handle, records how it ended and runs exited hooks.
func (r *Runner) taskExited(res *drivers.ExitResult) {
	ctx, cancel := context.WithTimeout(r.shutdownCtx, hookTimeout)
	defer cancel()
	if err := r.driver.DestroyTask(ctx, r.taskID, false); err != nil && !errors.Is(err, drivers.ErrTaskNotFound) {
		r.logger.Warn("releasing exited task in its driver failed", "error", err)
	}
	// A restarted client must not re-attach to an attempt that ended.
	if err := r.db.DeleteTaskHandle(r.alloc.ID, r.task.Name); err != nil {
		r.logger.Warn("forgetting task handle failed", "error", err)
	}
	r.updateState(terminatedEvent(res), nil)
	r.exitedHooks(ctx, res)
}

// sleep waits d, or returns the error of killCtx.
func (r *Runner) sleep(d time.Duration) error {
	if !helper.SleepCtx(r.killCtx, d) {
		return r.killCtx.Err()
	}
	return nil
}
