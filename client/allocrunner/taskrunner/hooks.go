package taskrunner

import (
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/client/allocdir"
	"github.com/berth-io/berth/client/allocrunner/shared"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

// Hook is a task hook. A hook implements one or more phase interfaces
// below; the runner calls each phase's hooks in order, from its one run
// goroutine, so a hook sees its phases in this order for each attempt:
//
//	Prestart ─► (driver starts the task) ─► Poststart ─► Exited ─┐
//	   ▲                                                         │ restart
//	   └─────────────────────────────────────────────────────────┘
//	Stop (once, when the task is done for good)
//	Shutdown (instead of Stop, when the client shuts down and leaves the
//	task running)
//
// After a client restart a recovered task gets Poststart (Recovered set)
// without Prestart. A hook that starts goroutines owns them: it stops and
// waits for them in Stop and in Shutdown (either may be the last call).
// Hooks must honour ctx and return ctx.Err() when it is done.
type Hook interface {
	// Name names the hook in logs, errors and hook data.
	Name() string
}

// PrestartHook prepares a start: env vars, mounts, files. It runs before
// every start (restarts included), so it must be idempotent. An error
// fails the attempt (the restart policy decides what next).
type PrestartHook interface {
	Hook
	Prestart(ctx context.Context, req *PrestartRequest, resp *PrestartResponse) error
}

// PrestartRequest is what a prestart hook sees. It must not modify Alloc
// or Task.
type PrestartRequest struct {
	Alloc    *structs.Allocation
	Task     *structs.Task
	AllocDir *allocdir.AllocDir
	TaskDir  *allocdir.TaskDir
	// Env is what earlier hooks set (a copy).
	Env map[string]string
}

// PrestartResponse is what a prestart hook adds: Env is merged over what
// earlier hooks set; Mounts are appended.
type PrestartResponse struct {
	Env    map[string]string
	Mounts []*drivers.MountConfig
}

// PoststartHook runs once the task runs: after a start, or after
// re-attaching to it following a client restart. Errors are logged.
type PoststartHook interface {
	Hook
	Poststart(ctx context.Context, req *PoststartRequest) error
}

// PoststartRequest describes the running task.
type PoststartRequest struct {
	Handle *drivers.TaskHandle
	// Status is the driver's view (PID, start time); nil if unavailable.
	Status *drivers.TaskStatus
	// Recovered is set when the task was started by an earlier client
	// process and re-attached to.
	Recovered bool
}

// ExitedHook runs after every exit, before the restart decision. Errors
// are logged.
type ExitedHook interface {
	Hook
	Exited(ctx context.Context, req *ExitedRequest) error
}

// ExitedRequest says how the task ended.
type ExitedRequest struct {
	Result *drivers.ExitResult
}

// StopHook runs once when the task is done for good (completed, failed or
// killed). Errors are logged.
type StopHook interface {
	Hook
	Stop(ctx context.Context, req *StopRequest) error
}

// StopRequest says how the task ended for good.
type StopRequest struct {
	Failed bool
}

// ShutdownHook runs when the client shuts down and leaves the task running.
// ctx bounds it.
type ShutdownHook interface {
	Hook
	Shutdown(ctx context.Context)
}

// Lifecycle is what hooks may do to their task (a plugin supervisor
// restarts an unhealthy plugin, ...).
type Lifecycle interface {
	// Restart stops the running task and starts it again. With failure
	// set the exit counts against the restart policy. It returns once the
	// request is queued; ErrTaskNotRunning if the task is not running.
	Restart(ctx context.Context, ev *structs.TaskEvent, failure bool) error
	// Kill stops the task for good and waits for the runner to finish.
	Kill(ctx context.Context, ev *structs.TaskEvent) error
	// EmitEvent records a task event.
	EmitEvent(ev *structs.TaskEvent)
}

// HookConfig is what a HookFactory gets.
type HookConfig struct {
	Alloc     *structs.Allocation
	Task      *structs.Task
	AllocDir  *allocdir.AllocDir
	TaskDir   *allocdir.TaskDir
	Resources *shared.HookResources
	Lifecycle Lifecycle
	Logger    hclog.Logger
}

// HookFactory builds a hook for one task runner.
type HookFactory func(*HookConfig) Hook
