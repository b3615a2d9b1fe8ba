// Package drivers defines the task driver interface and Berth's drivers:
// raw_exec (a plain child process, no isolation, no volume mounts), exec
// (Linux, root: a private mount namespace and a chroot built from bind
// mounts; volumes are bind-mounted into it) and mock (scripted, for tests).
//
// Tasks outlive a client restart: a driver starts each task under a small
// detached executor and describes it in a TaskHandle (pid, start time,
// status file) that the client persists. A restarted client hands the
// handle back to RecoverTask, which re-attaches instead of restarting, and
// learns the exit code of a task that ended in the meantime from its
// status file.
package drivers

import (
	"context"
	"errors"
	"time"

	"github.com/berth-io/berth/nomad/structs"
)

// Driver runs tasks. Every method is safe for concurrent use; task IDs are
// unique per client (TaskConfig.ID).
//
// Call order for one task: StartTask (or RecoverTask after a restart) →
// WaitTask → StopTask (optional) → DestroyTask. DestroyTask is idempotent.
type Driver interface {
	// Name is the driver name jobs use ("raw_exec", "exec", "mock").
	Name() string

	// Fingerprint reports whether the driver can run on this machine and
	// its capabilities; it is cheap and called periodically.
	Fingerprint(ctx context.Context) *structs.DriverInfo

	// Capabilities are static.
	Capabilities() Capabilities

	// StartTask starts the task and returns its handle, which the caller
	// persists before doing anything else.
	StartTask(ctx context.Context, cfg *TaskConfig) (*TaskHandle, error)

	// RecoverTask re-attaches to a task started by an earlier client
	// process. It returns ErrTaskNotFound if the task's process is gone
	// and left no exit status to learn.
	RecoverTask(ctx context.Context, h *TaskHandle) error

	// WaitTask returns a channel that receives the task's exit result
	// once, then is closed. ctx cancels the wait, not the task: if it ends
	// first, the channel is closed without a result.
	WaitTask(ctx context.Context, taskID string) (<-chan *ExitResult, error)

	// StopTask signals the task (signal "" means SIGTERM) and kills it if
	// it has not exited within timeout. It returns once the task exited.
	StopTask(ctx context.Context, taskID string, timeout time.Duration, signal string) error

	// DestroyTask releases the driver's resources for the task; with
	// force, a still-running task is killed first.
	DestroyTask(ctx context.Context, taskID string, force bool) error

	// InspectTask returns the task's current status.
	InspectTask(taskID string) (*TaskStatus, error)
}

// Signaler is a Driver that can send a task a signal without stopping it
// (alloc signal). Drivers without it cannot be signalled.
type Signaler interface {
	// SignalTask sends the named signal ("SIGHUP", "HUP"; "" is
	// SIGKILL) to the task. The task's state is otherwise untouched: if
	// the signal ends it, WaitTask reports that as any exit.
	SignalTask(taskID, signal string) error
}

// Capabilities are what a driver supports.
type Capabilities struct {
	// MountConfig says whether the driver can mount volumes into tasks; a
	// group with CSI volumes needs "all" for tasks that mount them.
	MountConfig structs.MountConfigSupport
}

// MountConfig is one volume mount into a task.
type MountConfig struct {
	TaskPath        string // inside the task
	HostPath        string // on the host
	Readonly        bool
	PropagationMode string // "private" (default), "host-to-task", "bidirectional"
}

// TaskConfig is everything a driver needs to start a task.
type TaskConfig struct {
	// ID is unique per client: "<alloc id>/<task name>".
	ID      string
	AllocID string
	Name    string
	JobName string

	// Config is the task's driver config from the jobspec.
	Config map[string]any
	Env    map[string]string

	// AllocDir is the alloc's shared dir; TaskDir the task's own dir
	// (with local/ and secrets/); the task runs with TaskDir as its
	// working directory (raw_exec) or root (exec).
	AllocDir string
	TaskDir  string

	// StdoutPath and StderrPath are files the task's output goes to.
	StdoutPath string
	StderrPath string

	Resources *structs.Resources
	Mounts    []*MountConfig

	// User is who the task runs as ("" is the driver's default).
	// Privileged marks a task that must keep every capability: a CSI
	// plugin, which mounts volumes for the node.
	User       string
	Privileged bool
}

// TaskState is a task's lifecycle state as a driver sees it.
type TaskState string

const (
	TaskStateRunning TaskState = "running"
	TaskStateExited  TaskState = "exited"
	TaskStateUnknown TaskState = "unknown"
)

// TaskHandle is what the client persists to re-attach to a task later.
type TaskHandle struct {
	// Version lets a driver change DriverState's format.
	Version int
	Config  *TaskConfig
	State   TaskState
	// DriverState is the driver's own encoding (pid, start time, status
	// file path, ...).
	DriverState []byte
}

// ExitResult is how a task ended.
type ExitResult struct {
	// ExitCode is -1 when a signal killed the task; Signal says which.
	ExitCode int
	Signal   int
	// Err is set when the driver could not learn how the task ended.
	Err error
}

// Successful reports whether the task exited 0 without a signal.
func (r *ExitResult) Successful() bool { return r.ExitCode == 0 && r.Signal == 0 && r.Err == nil }

// TaskStatus is InspectTask's answer.
type TaskStatus struct {
	ID          string
	State       TaskState
	StartedAt   time.Time
	CompletedAt time.Time
	ExitResult  *ExitResult
	// PID of the task's process, for operators and tests.
	PID int
}

// Sentinel errors.
var (
	// ErrTaskNotFound: the driver knows no task with that ID (or, from
	// RecoverTask, the task is gone without a trace).
	ErrTaskNotFound = errors.New("task not found")
	// ErrInvalidConfig: the task's driver config is wrong; the message says
	// which key and what was expected.
	ErrInvalidConfig = errors.New("invalid task driver config")
)
