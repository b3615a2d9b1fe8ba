package taskrunner

import (
	"fmt"

	"github.com/berth-io/berth/client/logs"
	"github.com/berth-io/berth/helper/steptrace"
	"github.com/berth-io/berth/plugins/drivers"
)

// recoverTask re-attaches to a task an earlier client process started.
// It returns the handle of a task that runs, or the result to treat as an
// exit when re-attaching failed; shutdown when the client shut down
// meanwhile.
func (r *Runner) recoverTask() (running *drivers.TaskHandle, lost *drivers.ExitResult, shutdown bool) {
	r.stateLock.Lock()
	h := r.restoredHandle
	r.restoredHandle = nil
	r.stateLock.Unlock()
	if h == nil {
		return nil, nil, false
	}
	if err := r.driver.RecoverTask(r.shutdownCtx, h); err != nil {
		if r.shutdownCtx.Err() != nil {
			return nil, nil, true
		}
		r.logger.Warn("could not re-attach to task; treating it as exited", "error", err)
		r.updateState(NewEvent(EventDriverFailure, fmt.Sprintf("Could not re-attach to task after a client restart: %v", err)), nil)
		return nil, &drivers.ExitResult{Err: fmt.Errorf("task lost while the client was down: %w", err)}, false
	}
	r.logger.Info("re-attached to task")
	r.poststartHooks(h, true)
	return h, nil, false
}

// startTask runs prestart hooks, starts the task and persists its handle.
func (r *Runner) startTask() error {
	if st := r.State(); st.Restarts == 0 && st.StartedAt == 0 {
		r.updateState(NewEvent(EventSetup, "Building Task Directory"), nil)
	}
	env, mounts, err := r.prestartHooks(r.killCtx)
	if err != nil {
		if r.killCtx.Err() == nil {
			r.updateState(NewEvent(EventSetupFailure, err.Error()), nil)
		}
		return err
	}
	h, err := r.driver.StartTask(r.shutdownCtx, r.taskConfig(env, mounts))
	if err != nil {
		err = fmt.Errorf("starting task %q of alloc %s: %w", r.task.Name, r.alloc.ID, err)
		if r.shutdownCtx.Err() == nil {
			r.updateState(NewEvent(EventDriverFailure, err.Error()), nil)
		}
		return err
	}
	steptrace.Mark(r.alloc.ID, steptrace.TaskStarted)
	// The handle is how a restarted client finds the task: persist it
	// before anything else can fail or block.
	if err := r.db.PutTaskHandle(r.alloc.ID, r.task.Name, h); err != nil {
		r.logger.Error("persisting task handle failed; a client restart will lose track of this task", "error", err)
	}
	// A restart asked of the previous attempt does not apply to this one.
	select {
	case <-r.restartCh:
	default:
	}
	r.updateState(NewEvent(EventStarted, "Task started by client"), setRunning)
	r.poststartHooks(h, false)
	return nil
}

// taskConfig is what the driver gets.
func (r *Runner) taskConfig(env map[string]string, mounts []*drivers.MountConfig) *drivers.TaskConfig {
	jobName := r.alloc.JobID
	if r.alloc.Job != nil && r.alloc.Job.Name != "" {
		jobName = r.alloc.Job.Name
	}
	return &drivers.TaskConfig{
		ID:         r.taskID,
		AllocID:    r.alloc.ID,
		Name:       r.task.Name,
		JobName:    jobName,
		Config:     interpolateConfig(r.task.Config, env, r.node),
		Env:        interpolateEnv(env, r.node),
		AllocDir:   r.allocDir.SharedDir,
		TaskDir:    r.taskDir.Dir,
		StdoutPath: logs.Path(r.taskDir.LogDir, r.task.Name, logs.Stdout, 0),
		StderrPath: logs.Path(r.taskDir.LogDir, r.task.Name, logs.Stderr, 0),
		Resources:  r.task.Resources,
		Mounts:     mounts,
		User:       r.task.User,
		Privileged: r.task.CSIPluginConfig != nil,
	}
}
