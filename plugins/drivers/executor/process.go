package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// State is what a client persists to re-attach to a task after a restart.
// Start times are /proc/<pid>/stat's field 22: a pid with another start
// time is another process.
type State struct {
	ExecutorPID       int
	ExecutorStartTime uint64
	TaskPID           int
	TaskStartTime     uint64
	StatusPath        string
}

// ErrGone: neither the executor nor the task exists any more, and no status
// file says how the task ended.
var ErrGone = errors.New("executor and task are gone and left no exit status")

// errRunning: a non-blocking check found the task still running.
var errRunning = errors.New("still running")

// Process is a task under an executor, as the client sees it: started by
// Launch or re-attached by Attach. Its methods are safe for concurrent use.
//
// The task has ended when its executor has exited; the executor's status
// file then says how. Should the executor die without writing one (killed
// by hand), the task is followed directly and ends with an unknown status.
type Process struct {
	state State
	// exe is nil if the executor was already gone at Attach; task is nil
	// if the task was.
	exe  *watched
	task *watched

	// mu guards status; done is closed once it is set.
	mu     sync.Mutex
	status *Status
	done   chan struct{}
}

// Attach re-attaches to the executor and task st describes. If the task
// has already ended, the returned Process knows how (Exited reports it).
// It returns ErrGone if nothing is left to attach to or learn from.
func Attach(st State) (*Process, error) {
	p := &Process{state: st, done: make(chan struct{})}
	exe, err := watch(st.ExecutorPID, st.ExecutorStartTime)
	switch {
	case err == nil && !exe.exited():
		p.exe = exe
		p.task, _ = watch(st.TaskPID, st.TaskStartTime)
		return p, nil
	case err == nil:
		// A zombie: the executor has finished (and is our child, if this
		// process started it and has not collected it yet).
		exe.reap()
		exe.close()
	case !errors.Is(err, errGone):
		return nil, fmt.Errorf("attaching to the executor: %w", err)
	}
	status, err := readStatus(st.StatusPath)
	if err == nil {
		p.finish(status)
		return p, nil
	}
	if !errors.Is(err, errNoStatus) {
		return nil, fmt.Errorf("attaching to the executor: %w", err)
	}
	// The executor died without a word; the task may live on.
	if task, err := watch(st.TaskPID, st.TaskStartTime); err == nil {
		if !task.exited() {
			p.task = task
			return p, nil
		}
		task.close()
	}
	return nil, fmt.Errorf("attaching to executor pid %d, task pid %d: %w", st.ExecutorPID, st.TaskPID, ErrGone)
}

// State returns what to persist to re-attach later.
func (p *Process) State() State { return p.state }

// PID is the task's pid.
func (p *Process) PID() int { return p.state.TaskPID }

// Wait blocks until the task has ended and returns how, or returns
// ctx.Err(). It collects the executor if it is this process's child.
func (p *Process) Wait(ctx context.Context) (*Status, error) {
	return p.await(ctx, true)
}

// Exited reports, without blocking, whether the task has ended, and how.
func (p *Process) Exited() (*Status, bool) {
	st, err := p.await(context.Background(), false)
	return st, err == nil
}

// await waits for the end (block) or checks for it (!block: errRunning if
// the task has not ended).
//
// The status file is written just before the executor exits, so it alone
// says that the task has ended; a blocking wait also waits for the
// executor to be gone, and collects it if it is our child.
func (p *Process) await(ctx context.Context, block bool) (*Status, error) {
	if p.exe != nil {
		exited := p.exe.exited()
		if !exited && block {
			if err := p.exe.wait(ctx); err != nil {
				return nil, err
			}
			exited = true
		}
		if exited {
			p.exe.reap()
		}
		if st := p.result(); st != nil {
			return st, nil
		}
		st, err := readStatus(p.state.StatusPath)
		switch {
		case err == nil:
			return p.finish(st), nil
		case !errors.Is(err, errNoStatus):
			return p.finish(&Status{ExitCode: -1, FinishedAt: time.Now().UTC(), Err: err.Error()}), nil
		case !exited:
			return nil, errRunning
		}
		// The executor died without recording the status (killed by
		// hand?): follow the task itself, whose exit code nobody learns.
	} else if st := p.result(); st != nil {
		return st, nil
	}
	if p.task != nil {
		if block {
			if err := p.task.wait(ctx); err != nil {
				return nil, err
			}
		} else if !p.task.exited() {
			return nil, errRunning
		}
		p.task.reap() // ours only if this process is a subreaper
	}
	return p.finish(&Status{
		ExitCode:   -1,
		FinishedAt: time.Now().UTC(),
		Err:        fmt.Sprintf("executor pid %d exited without recording the task's exit status", p.state.ExecutorPID),
	}), nil
}

// finish records st as the end unless one is recorded, and returns the
// recorded one.
func (p *Process) finish(st *Status) *Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.status == nil {
		p.status = st
		close(p.done)
	}
	return p.status
}

func (p *Process) result() *Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.status
}

// Signal sends sig to the task's process group. Signalling a task that has
// ended does nothing.
func (p *Process) Signal(sig unix.Signal) error {
	if p.task == nil {
		return nil
	}
	if err := p.task.signalGroup(sig); err != nil && !errors.Is(err, errGone) {
		return fmt.Errorf("signalling task pid %d: %w", p.state.TaskPID, err)
	}
	return nil
}

// Close releases the pidfds. The Process still works after it, watching
// through /proc.
func (p *Process) Close() {
	if p.exe != nil {
		p.exe.close()
	}
	if p.task != nil {
		p.task.close()
	}
}
