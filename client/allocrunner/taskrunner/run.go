package taskrunner

import (
	"fmt"
	"time"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

// waitOutcome is why waiting on a task ended.
type waitOutcome int

const (
	outcomeExited waitOutcome = iota
	outcomeKilled
	outcomeRestart
	outcomeShutdown
)

// step is what the run loop does after an attempt.
type step int

const (
	// stepDecide: apply the restart policy to the attempt.
	stepDecide step = iota
	// stepAgain: start again at once (a requested restart).
	stepAgain
	// stepDead: the task is done for good.
	stepDead
	// stepShutdown: the client shuts down; the task keeps running.
	stepShutdown
)

// Run runs the task until it is done for good or the client shuts down.
// It is the runner's only goroutine; call it once.
func (r *Runner) Run() {
	defer r.finish()
	r.stateLock.Lock()
	if r.shutdownCtx.Err() != nil || r.state.State == structs.TaskStateDead {
		r.stateLock.Unlock()
		return
	}
	r.started = true
	r.stateLock.Unlock()
	if r.driver == nil {
		ev := failing(NewEvent(EventDriverFailure, fmt.Sprintf("Driver %q is not available on this node", r.task.Driver)))
		r.updateState(ev, setDead(true))
		r.stopHooks(true)
		return
	}
	if r.run() == stepShutdown {
		r.shutdownHooks()
		return
	}
	r.stopHooks(r.State().Failed)
}

// run loops over attempts until the task is dead (stepDead) or the client
// shuts down (stepShutdown).
func (r *Runner) run() step {
	running, lost, shutdown := r.recoverTask()
	if shutdown {
		return stepShutdown
	}
	for {
		var (
			attempt Attempt
			next    step
		)
		if lost != nil {
			r.taskExited(lost)
			attempt, next = Attempt{Exit: lost}, stepDecide
			lost = nil
		} else {
			attempt, next = r.runAttempt(running)
			running = nil
		}
		switch next {
		case stepAgain:
			continue
		case stepDead, stepShutdown:
			return next
		}

		d := DecideRestart(r.policy, r.jobType, r.tracker, attempt, time.Now())
		r.tracker = d.Tracker
		if d.Action != ActionRestart {
			ev := NewEvent(EventNotRestarting, d.Reason)
			if d.Action == ActionFail {
				failing(ev)
			}
			r.updateState(ev, setDead(d.Action == ActionFail))
			return stepDead
		}
		r.updateState(restartingEvent(d.Delay, d.Reason), setRestarting)
		if err := r.sleep(d.Delay); err != nil {
			return r.killed("Task killed while waiting to restart")
		}
	}
}

// runAttempt starts the task (unless running, a re-attached handle, says
// it runs already), waits for it to end, and says what next.
func (r *Runner) runAttempt(running *drivers.TaskHandle) (Attempt, step) {
	if running == nil {
		if r.killCtx.Err() != nil {
			return Attempt{}, r.killed("Task killed before it started")
		}
		err := r.startTask()
		switch {
		case r.shutdownCtx.Err() != nil:
			return Attempt{}, stepShutdown
		case err != nil && r.killCtx.Err() != nil:
			return Attempt{}, r.killed("Task killed while starting")
		case err != nil:
			return Attempt{StartErr: err}, stepDecide
		}
	}
	res, how := r.waitTask()
	if how == outcomeShutdown {
		return Attempt{}, stepShutdown
	}
	r.taskExited(res)
	switch how {
	case outcomeKilled:
		r.updateState(NewEvent(EventKilled, "Task successfully killed"), setDead(false))
		return Attempt{}, stepDead
	case outcomeRestart:
		r.updateState(restartingEvent(0, "Restart requested"), setRestarting)
		return Attempt{}, stepAgain
	}
	return Attempt{Exit: res}, stepDecide
}

// killed ends the loop once killCtx is done: a shutdown, or a kill that
// found no running task, recorded with msg. A kill event that fails the
// task is recorded too, and fails it: the reason of such a kill must show
// whether or not the task was running.
func (r *Runner) killed(msg string) step {
	if r.shutdownCtx.Err() != nil {
		return stepShutdown
	}
	r.stateLock.Lock()
	ev := r.killEvent
	r.stateLock.Unlock()
	failed := ev != nil && ev.FailsTask
	if failed {
		r.updateState(ev, nil)
	}
	r.updateState(NewEvent(EventKilled, msg), setDead(failed))
	return stepDead
}
