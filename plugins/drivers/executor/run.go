package executor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// forwarded are the signals the executor passes on to the task's process
// group, so that `kill <executor>` stops the task instead of orphaning it.
var forwarded = []os.Signal{unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT}

// run starts the task, reports, waits for it and writes its status.
func run(spec *Spec, rep *os.File, logger *execLogger) int {
	// Never unlocked: with Isolation the mount namespace belongs to this
	// thread only, and the task must be forked from it. Go creates new
	// threads from a template thread, never from a locked one, and a
	// locked thread dies with its goroutine, so the namespace stays here.
	runtime.LockOSThread()

	// Orphans of the task are re-parented to the executor rather than to
	// init, so it can collect what it kills when the task ends.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		logger.Warn("cannot become a child subreaper; the task's orphans go to init", "error", err)
	}

	// Catch termination signals before the task starts, so one sent as
	// soon as the client hears of the task is forwarded, not fatal.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	cmd, cg, err := command(spec)
	if cg != nil {
		defer func() {
			// After collectGroup: the cgroup can go once nothing is in it.
			if err := cg.remove(); err != nil {
				logger.Warn("cannot remove the task's device cgroup", "error", err)
			}
		}()
	}
	// With NewPID the task is init's child (init.go), not ours.
	var ini *initProcess
	if err == nil {
		if spec.NewPID {
			ini, err = startInit(spec, cmd)
		} else {
			err = cmd.Start()
		}
		closeOutputs(cmd)
	}
	if err != nil {
		err = fmt.Errorf("starting task %q: %w", spec.TaskID, err)
		logger.Error("cannot start the task", "error", err)
		_ = sendReport(rep, &report{Error: err.Error()})
		return 1
	}
	var pid int
	var st procStat
	if ini != nil {
		// init holds the task uncollected until released.
		pid, st = ini.pid, ini.stat
	} else {
		pid = cmd.Process.Pid
		// The task is our child and not yet collected, so its /proc
		// entry is there even if it has already exited.
		st, err = readProcStat(pid)
	}
	logger = logger.With("task_pid", pid)
	if err == nil {
		err = sendReport(rep, &report{TaskPID: pid, TaskStartTime: st.StartTime})
	}
	if err != nil {
		// The client gave up on this start (it closed its end of the pipe)
		// or we cannot describe the task: it must not run on unseen.
		logger.Error("killing the task: cannot report its start", "error", err)
		if ini != nil {
			ini.kill() // and the namespace with it
			return 1
		}
		_ = unix.Kill(-pid, unix.SIGKILL)
		_ = cmd.Wait()
		return 1
	}
	logger.Info("task started")

	stopForwarding := forwardSignals(sigs, pid, logger)
	var status *Status
	if ini != nil {
		if err := ini.release(); err != nil {
			logger.Warn("the task's init did not hear its go; it goes on at EOF", "error", err)
		}
		status = ini.wait()
	} else {
		status = wait(cmd)
	}
	stopForwarding()

	logger.Info("task exited", "exit_code", status.ExitCode, "signal", status.Signal, "wait_error", status.Err)
	if err := writeStatus(spec.StatusPath, status); err != nil {
		logger.Error("cannot record the task's exit status", "error", err)
		return 1
	}
	// Only now, so the status is out even if one of them is stuck.
	collectGroup(pid)
	return 0
}

// collectGroup collects the killed members of the task's process group
// that were re-parented to the executor.
func collectGroup(pgid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PGID, pgid, &info, unix.WEXITED, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil { // ECHILD: none left
			return
		}
	}
}

// command builds the task's command: it sets up the isolation if asked
// (with the device cgroup that keeps read-only devices read-only, which
// the caller removes once the task and its group are gone), resolves the
// program and opens the output files.
func command(spec *Spec) (*exec.Cmd, *deviceCgroup, error) {
	// Open the outputs while this thread still sees the host's mounts.
	stdout, err := openOutput(spec.StdoutPath)
	if err != nil {
		return nil, nil, err
	}
	stderr, err := openOutput(spec.StderrPath)
	if err != nil {
		stdout.Close()
		return nil, nil, err
	}
	cmd := &exec.Cmd{
		Args:        append([]string{spec.Command}, spec.Args...),
		Env:         spec.Env,
		Dir:         spec.Dir,
		Stdout:      stdout,
		Stderr:      stderr,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true}, // StopTask signals the whole group
	}
	root := ""
	var cg *deviceCgroup
	if spec.NewPID && spec.Isolation == nil {
		closeOutputs(cmd)
		return nil, nil, errors.New("a new PID namespace needs Isolation: the task must get a /proc of its own")
	}
	if spec.Isolation != nil {
		root = spec.Isolation.Root
		devs, err := readOnlyDevices(spec.Isolation)
		if err == nil && len(devs) > 0 {
			// Before isolate: the cgroup file system is a host mount.
			if cg, err = newDeviceCgroup(spec.TaskID, devs); err == nil {
				cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, cg.fd
			}
		}
		if err == nil {
			// With NewPID, init mounts the task's /proc from inside.
			err = isolate(spec.Isolation, !spec.NewPID)
		}
		if err != nil {
			closeOutputs(cmd)
			return nil, cg, err
		}
		cmd.SysProcAttr.Chroot = root
		if cmd.Dir == "" {
			cmd.Dir = "/"
		}
	}
	if err := restrict(spec, cmd); err != nil {
		closeOutputs(cmd)
		return nil, cg, err
	}
	cmd.Path, err = lookPath(root, cmd.Dir, spec.Command, pathOf(spec.Env))
	if err != nil {
		closeOutputs(cmd)
		return nil, cg, err
	}
	return cmd, cg, nil
}

// openOutput opens a task output file for appending; "" is /dev/null.
func openOutput(path string) (*os.File, error) {
	if path == "" {
		path = os.DevNull
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("opening task output %q: %w", path, err)
	}
	return f, nil
}

// closeOutputs closes the executor's copies of the task's output files.
func closeOutputs(cmd *exec.Cmd) {
	for _, w := range []any{cmd.Stdout, cmd.Stderr} {
		if f, ok := w.(*os.File); ok {
			f.Close()
		}
	}
}

// wait waits for the task to exit, kills what it left running in its
// process group, collects it and returns how it ended.
func wait(cmd *exec.Cmd) *Status {
	pid := cmd.Process.Pid
	// Learn that the task exited without collecting it (WNOWAIT): while it
	// is a zombie its pid, which is also its group's id, cannot be reused,
	// so the kill below cannot hit a stranger's group.
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	// A task ends when its main process does; background processes it left
	// in its group would otherwise live on unowned (and, with Isolation,
	// keep its mount namespace alive).
	_ = unix.Kill(-pid, unix.SIGKILL)

	return statusOf(cmd, cmd.Wait())
}

// statusOf is how cmd ended, from its Wait's err.
func statusOf(cmd *exec.Cmd, err error) *Status {
	st := &Status{FinishedAt: timeNow()}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		st.ExitCode = -1
		st.Err = fmt.Sprintf("waiting for the task: %v", err)
		return st
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		st.ExitCode = cmd.ProcessState.ExitCode()
	case ws.Signaled():
		st.ExitCode = -1
		st.Signal = int(ws.Signal())
	default:
		st.ExitCode = ws.ExitStatus()
	}
	return st
}

func timeNow() time.Time { return time.Now().UTC() }

// forwardSignals passes the signals caught on sigs on to the task's
// process group until the returned stop function is called; stop waits for
// the forwarding goroutine to end.
func forwardSignals(sigs <-chan os.Signal, pid int, logger *execLogger) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case s := <-sigs:
				logger.Info("forwarding signal to the task", "signal", s)
				_ = unix.Kill(-pid, s.(syscall.Signal))
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}
