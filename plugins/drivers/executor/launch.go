package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Files in an executor's directory.
const (
	specFile   = "spec.json"
	statusFile = "status.json"
	logFile    = "executor.log"
)

// logTail is how much of executor.log a start error quotes.
const logTail = 2048

// Launch starts an executor for spec and returns once the executor has
// started the task, or failed to (the error then says why, quoting the
// executor's log). binary is the program to run as `<binary> executor
// <spec file>`: the berth binary, or a test binary whose TestMain calls
// RunIfExecutor; "" means os.Executable(). dir is the executor's own
// directory, created if missing: it holds spec.json, status.json and
// executor.log, and must be private to this task.
//
// The executor runs in its own session, so it survives this process; it
// is this process's child, though, and a Wait on the returned Process
// collects it when it exits. If ctx ends first, the executor and any task
// it started are killed.
func Launch(ctx context.Context, binary, dir string, spec *Spec) (*Process, error) {
	if binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("launching executor for task %q: finding this program: %w", spec.TaskID, err)
		}
		binary = exe
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("launching executor for task %q: %w", spec.TaskID, err)
	}
	s := *spec
	s.StatusPath = filepath.Join(dir, statusFile)
	// A status left by an earlier run in this directory would pass for
	// this run's.
	if err := os.Remove(s.StatusPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("launching executor for task %q: removing old status: %w", spec.TaskID, err)
	}
	specPath := filepath.Join(dir, specFile)
	if err := writeSpec(specPath, &s); err != nil {
		return nil, fmt.Errorf("launching executor: %w", err)
	}
	logPath := filepath.Join(dir, logFile)
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("launching executor for task %q: %w", spec.TaskID, err)
	}
	defer logf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("launching executor for task %q: %w", spec.TaskID, err)
	}
	defer pr.Close()

	cmd := exec.Command(binary, Command, specPath)
	cmd.Env = append(os.Environ(), EnvReexec+"=1")
	cmd.Dir = "/"
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.ExtraFiles = []*os.File{pw} // fd 3: reportFD
	// Its own session: no signal aimed at this process's group or terminal
	// reaches it, and it outlives this process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	pw.Close() // the executor has its copy; ours would hide its EOF
	if err != nil {
		return nil, fmt.Errorf("launching executor for task %q: %w", spec.TaskID, err)
	}
	pid := cmd.Process.Pid
	// Waits and collection go through watched from here on.
	_ = cmd.Process.Release()
	st, err := readProcStat(pid) // our child, not yet collected: it is there
	var exe *watched
	if err == nil {
		exe, err = watch(pid, st.StartTime)
	}
	if err != nil {
		_ = unix.Kill(pid, unix.SIGKILL)
		var info unix.Siginfo
		_ = unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED, nil)
		return nil, fmt.Errorf("launching executor for task %q: %w", spec.TaskID, err)
	}

	rep, err := readReport(ctx, pr, exe)
	if err != nil || rep.Error != "" || rep.TaskPID == 0 {
		// The executor exits right after a failure; collect it.
		_ = exe.wait(context.Background())
		exe.reap()
		exe.close()
		switch {
		case err != nil:
			return nil, fmt.Errorf("launching executor for task %q: %w", spec.TaskID, err)
		case rep.Error != "":
			return nil, errors.New(rep.Error)
		default:
			return nil, fmt.Errorf("launching executor for task %q: it exited without starting the task; its log %s ends with: %s",
				spec.TaskID, logPath, tail(logPath))
		}
	}
	p := &Process{
		state: State{
			ExecutorPID:       pid,
			ExecutorStartTime: st.StartTime,
			TaskPID:           rep.TaskPID,
			TaskStartTime:     rep.TaskStartTime,
			StatusPath:        s.StatusPath,
		},
		exe:  exe,
		done: make(chan struct{}),
	}
	// The task may be gone already (a task that exits at once): then the
	// executor alone tells how it ended.
	p.task, _ = watch(rep.TaskPID, rep.TaskStartTime)
	return p, nil
}

// readReport reads the executor's report until the executor closes the
// pipe. If ctx ends first it kills the executor and any task it started.
func readReport(ctx context.Context, pr *os.File, exe *watched) (*report, error) {
	stop := context.AfterFunc(ctx, func() { _ = pr.SetReadDeadline(time.Unix(1, 0)) })
	b, err := io.ReadAll(pr)
	stop()
	if err != nil && ctx.Err() != nil {
		// Kill the executor, then read what it wrote before dying: if it
		// started the task, the task must die too.
		_ = unix.Kill(exe.pid, unix.SIGKILL)
		_ = pr.SetReadDeadline(time.Time{})
		rest, _ := io.ReadAll(pr)
		var r report
		if json.Unmarshal(append(b, rest...), &r) == nil && r.TaskPID > 0 {
			if t, werr := watch(r.TaskPID, r.TaskStartTime); werr == nil {
				_ = t.signalGroup(unix.SIGKILL)
				t.close()
			}
		}
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("reading the executor's report: %w", err)
	}
	var r report
	if len(bytes.TrimSpace(b)) == 0 {
		return &r, nil // exited without a word
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decoding the executor's report %q: %w", b, err)
	}
	return &r, nil
}

// tail returns the end of a log file, for error messages.
func tail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(unreadable: %v)", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > logTail {
		_, _ = f.Seek(-logTail, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "(empty)"
	}
	return s
}
