package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// pollInterval is how often a process is checked through /proc when the
// kernel offers no pidfd (pidfd_open is Linux 5.3+; seccomp may forbid it).
const pollInterval = 100 * time.Millisecond

// usePidfd is false in tests that exercise the /proc fallback.
var usePidfd = true

// watched is one process, named by its pid and start time, that the client
// waits for and signals. With a pidfd the kernel says when it exits and the
// pid cannot be confused with a later process that reuses it; without one,
// /proc is polled and the start time tells the two apart.
type watched struct {
	pid   int
	start uint64

	// mu guards pidfd against close while a waiter uses it.
	mu sync.RWMutex
	// pidfd is -1 when the kernel gave none, or after close.
	pidfd int

	// reapOnce collects the process if it is this process's child.
	reapOnce sync.Once
}

// errGone: no process with that pid and start time exists any more.
var errGone = errors.New("process is gone")

// watch starts watching the process with that pid and start time. It
// returns errGone if there is none. A zombie (exited, not yet collected by
// its parent) counts as existing: watching it tells that it has exited.
func watch(pid int, start uint64) (*watched, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("watching pid %d: %w", pid, errGone)
	}
	w := &watched{pid: pid, start: start, pidfd: -1}
	if usePidfd {
		// Open the pidfd before checking the start time: if the pid was
		// reused in between, the pidfd names the newer process and the
		// check below rejects it; the other order would let a reuse slip
		// in after the check.
		fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
		switch {
		case err == nil:
			w.pidfd = fd
		case errors.Is(err, unix.ESRCH):
			return nil, fmt.Errorf("watching pid %d: %w", pid, errGone)
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
			// No pidfds here: fall back to polling /proc.
		default:
			return nil, fmt.Errorf("opening pidfd of pid %d: %w", pid, err)
		}
	}
	st, err := readProcStat(pid)
	if err == nil && st.StartTime != start {
		err = errGone // the pid now names another process
	}
	if errors.Is(err, errNoProcess) {
		err = errGone
	}
	if err != nil {
		w.close()
		return nil, fmt.Errorf("watching pid %d: %w", pid, err)
	}
	return w, nil
}

// exited reports, without blocking, whether the process has exited.
func (w *watched) exited() bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.exitedLocked()
}

func (w *watched) exitedLocked() bool {
	if w.pidfd >= 0 {
		return pidfdReadable(w.pidfd)
	}
	st, err := readProcStat(w.pid)
	return err != nil || st.StartTime != w.start || st.exited()
}

// wait blocks until the process has exited or ctx is done.
func (w *watched) wait(ctx context.Context) error {
	f, err := w.dupPidfd()
	if err != nil {
		return err
	}
	if f == nil {
		return w.poll(ctx)
	}
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("waiting for pid %d: %w", w.pid, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	err = rc.Read(func(fd uintptr) bool { return pidfdReadable(int(fd)) })
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	default:
		// The poller could not take the pidfd ("unsupported file type"):
		// fall back to /proc.
		return w.poll(ctx)
	}
}

// dupPidfd returns a duplicate of the pidfd as a file, or nil without one.
// Waiting in Go's network poller rather than in a blocked thread: the
// duplicate is non-blocking (PIDFD_NONBLOCK), so os.NewFile registers it
// with epoll; it polls readable when the process exits, and a read
// deadline set on cancel wakes the wait. Each waiter has its own
// duplicate, so close never pulls an fd from under a waiter.
func (w *watched) dupPidfd() (*os.File, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.pidfd < 0 {
		return nil, nil
	}
	fd, err := unix.FcntlInt(uintptr(w.pidfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("waiting for pid %d: duplicating its pidfd: %w", w.pid, err)
	}
	return os.NewFile(uintptr(fd), "pidfd"), nil
}

// pidfdReadable reports, without blocking, whether a pidfd polls readable,
// which it does once its process has exited.
func pidfdReadable(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n > 0 && fds[0].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) != 0
	}
}

// poll waits for the process to exit by reading /proc on a ticker.
func (w *watched) poll(ctx context.Context) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for !w.exited() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// reap collects the exited process if it is this process's child, so it
// does not stay a zombie: the client starts executors as its children, and
// whichever of its waiters sees an executor exit collects it. For anyone
// else's process it does nothing. Call it only after exited is true.
func (w *watched) reap() {
	w.reapOnce.Do(func() {
		w.mu.RLock()
		defer w.mu.RUnlock()
		var info unix.Siginfo
		if w.pidfd >= 0 {
			_ = unix.Waitid(unix.P_PIDFD, w.pidfd, &info, unix.WEXITED|unix.WNOHANG, nil)
			return
		}
		// Without a pidfd the pid is checked first: a zombie keeps its pid,
		// so if it still has our start time it is the process we mean.
		if st, err := readProcStat(w.pid); err == nil && st.StartTime == w.start && st.exited() {
			_ = unix.Waitid(unix.P_PID, w.pid, &info, unix.WEXITED|unix.WNOHANG, nil)
		}
	})
}

// signalGroup sends sig to the process group the process leads. It returns
// errGone if the process has exited (its group may live on, but the pid
// could no longer be trusted to name it).
func (w *watched) signalGroup(sig unix.Signal) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.exitedLocked() {
		return errGone
	}
	// While the leader exists (even as a zombie) its pid cannot be reused,
	// so the group id still names its group.
	err := unix.Kill(-w.pid, sig)
	if errors.Is(err, unix.ESRCH) {
		return errGone
	}
	if err != nil {
		return fmt.Errorf("sending %v to process group %d: %w", sig, w.pid, err)
	}
	return nil
}

// close releases the pidfd. The watched process can still be checked
// and waited for, through /proc.
func (w *watched) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pidfd >= 0 {
		_ = unix.Close(w.pidfd)
		w.pidfd = -1
	}
}
