package client

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers/executor"
)

// ExecRequest is a command to run inside a running task (alloc exec).
type ExecRequest struct {
	AllocID string
	// Task may be empty when the alloc has exactly one task.
	Task string
	Argv []string
	// TTY runs the command on a new pseudo-terminal; its output then comes
	// on Stdout only.
	TTY bool
}

// ExecSession is a running command. Write to Stdin (close it for EOF),
// read Stdout and Stderr until EOF, then Wait. Kill ends it early.
type ExecSession struct {
	// Task is the task the command runs in.
	Task   string
	Stdin  io.WriteCloser
	Stdout io.Reader
	// Stderr is nil with a TTY.
	Stderr io.Reader

	cmd  *exec.Cmd
	pty  *os.File // the terminal's master, nil without TTY
	once sync.Once
	res  int
	err  error

	// lock guards waited: once the command is reaped its pid may be
	// reused, so Kill must not signal it any more.
	lock   sync.Mutex
	waited bool
}

// Exec starts req's command in its task's environment (see
// executor.EnterTask): namespaces, root, user and environment of the
// task's process. The task must be running.
func (c *Client) Exec(req ExecRequest) (*ExecSession, error) {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return nil, fmt.Errorf("exec in alloc %s: %w", req.AllocID, ErrNoCommand)
	}
	pids, err := c.AllocTaskPIDs(req.AllocID)
	if err != nil {
		return nil, err
	}
	r, err := c.runner(req.AllocID)
	if err != nil {
		return nil, err
	}
	task := req.Task
	if task == "" {
		names := taskNames(r.Alloc())
		if len(names) != 1 {
			return nil, fmt.Errorf("alloc %s has tasks %v: name one with -task: %w", req.AllocID, names, ErrTaskRequired)
		}
		task = names[0]
	}
	if !r.HasTask(task) {
		return nil, fmt.Errorf("alloc %s, task %q: %w", req.AllocID, task, ErrUnknownTask)
	}
	pid := pids[task]
	if pid <= 0 {
		return nil, fmt.Errorf("alloc %s, task %q: %w", req.AllocID, task, ErrTaskNotRunning)
	}
	s := &ExecSession{Task: task}
	cfg := executor.EnterConfig{PID: pid, Argv: req.Argv, TTY: req.TTY}
	var childEnds []*os.File
	if req.TTY {
		master, slave, err := openPTY()
		if err != nil {
			return nil, fmt.Errorf("exec in alloc %s, task %q: %w", req.AllocID, task, err)
		}
		s.pty = master
		s.Stdin, s.Stdout = master, master
		cfg.Stdin, cfg.Stdout, cfg.Stderr = slave, slave, slave
		childEnds = append(childEnds, slave)
	} else {
		inR, inW, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		outR, outW, err := os.Pipe()
		if err != nil {
			closeAll(inR, inW)
			return nil, err
		}
		errR, errW, err := os.Pipe()
		if err != nil {
			closeAll(inR, inW, outR, outW)
			return nil, err
		}
		s.Stdin, s.Stdout, s.Stderr = inW, outR, errR
		cfg.Stdin, cfg.Stdout, cfg.Stderr = inR, outW, errW
		childEnds = append(childEnds, inR, outW, errW)
	}
	cmd, err := executor.EnterTask(cfg)
	closeAll(childEnds...) // the child has its copies
	if err != nil {
		s.closeOurs()
		return nil, fmt.Errorf("exec in alloc %s, task %q: %w", req.AllocID, task, err)
	}
	s.cmd = cmd
	c.logger.Info("exec in task", "alloc_id", req.AllocID, "task", task, "command", req.Argv[0], "pid", cmd.Process.Pid)
	return s, nil
}

// Resize sets the terminal's size; without a TTY it does nothing.
func (s *ExecSession) Resize(rows, cols int) error {
	if s.pty == nil || rows <= 0 || cols <= 0 {
		return nil
	}
	return unix.IoctlSetWinsize(int(s.pty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: uint16(rows), Col: uint16(cols)})
}

// Wait waits for the command and returns its exit code (128+n when
// signal n killed it). Call it after reading Stdout and Stderr to EOF;
// it closes the session's streams.
func (s *ExecSession) Wait() (int, error) {
	s.once.Do(func() {
		err := s.cmd.Wait()
		s.lock.Lock()
		s.waited = true
		s.lock.Unlock()
		s.closeOurs()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			if ws, ok := ee.Sys().(unix.WaitStatus); ok && ws.Signaled() {
				s.res = 128 + int(ws.Signal())
			} else {
				s.res = ee.ExitCode()
			}
		default:
			s.res, s.err = -1, err
		}
	})
	return s.res, s.err
}

// Kill ends the command (and, without a TTY, its process group).
func (s *ExecSession) Kill() {
	s.lock.Lock()
	defer s.lock.Unlock()
	if s.cmd == nil || s.cmd.Process == nil || s.waited {
		return
	}
	// Both the group and the session leader: with a TTY the command leads
	// a session, which is also its group.
	_ = unix.Kill(-s.cmd.Process.Pid, unix.SIGKILL)
	_ = s.cmd.Process.Kill()
}

func (s *ExecSession) closeOurs() {
	for _, c := range []any{s.Stdin, s.Stdout, s.Stderr} {
		if f, ok := c.(io.Closer); ok && f != nil {
			f.Close()
		}
	}
}

// openPTY opens a new pseudo-terminal pair.
func openPTY() (master, slave *os.File, err error) {
	mfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("opening a terminal: %w", err)
	}
	master = os.NewFile(uintptr(mfd), "/dev/ptmx")
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("unlocking the terminal: %w", err)
	}
	n, err := unix.IoctlGetUint32(mfd, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("naming the terminal: %w", err)
	}
	name := "/dev/pts/" + strconv.FormatUint(uint64(n), 10)
	sfd, err := unix.Open(name, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("opening terminal %s: %w", name, err)
	}
	return master, os.NewFile(uintptr(sfd), name), nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// taskNames lists the tasks of a's group.
func taskNames(a *structs.Allocation) []string {
	var out []string
	if a == nil || a.Job == nil {
		return out
	}
	if tg := a.Job.LookupTaskGroup(a.TaskGroup); tg != nil {
		for _, t := range tg.Tasks {
			out = append(out, t.Name)
		}
	}
	return out
}

// TaskDriver is the driver of a task of an alloc on this client ("" when
// unknown); with task "" and one task, that task's.
func (c *Client) TaskDriver(allocID, task string) string {
	r, err := c.runner(allocID)
	if err != nil {
		return ""
	}
	a := r.Alloc()
	if a.Job == nil {
		return ""
	}
	tg := a.Job.LookupTaskGroup(a.TaskGroup)
	if tg == nil {
		return ""
	}
	if task == "" && len(tg.Tasks) == 1 {
		return tg.Tasks[0].Driver
	}
	for _, t := range tg.Tasks {
		if t.Name == task {
			return t.Driver
		}
	}
	return ""
}
