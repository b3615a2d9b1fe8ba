package executor

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"golang.org/x/sys/unix"
)

// eachWaitMode runs f with pidfds and with the /proc fallback.
func eachWaitMode(t *testing.T, f func(t *testing.T)) {
	for _, mode := range []struct {
		name  string
		pidfd bool
	}{{"pidfd", true}, {"proc polling", false}} {
		t.Run(mode.name, func(t *testing.T) {
			usePidfd = mode.pidfd
			t.Cleanup(func() { usePidfd = true })
			f(t)
		})
	}
}

// startChild starts a sleeping child and makes sure it is gone after the
// test.
func startChild(t *testing.T) (int, uint64) {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.SysProcAttr = &unix.SysProcAttr{Setpgid: true}
	must.NoError(t, cmd.Start())
	pid := cmd.Process.Pid
	_ = cmd.Process.Release() // watched collects it
	st, err := readProcStat(pid)
	must.NoError(t, err)
	t.Cleanup(func() {
		_ = unix.Kill(pid, unix.SIGKILL)
		var info unix.Siginfo
		_ = unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED, nil)
	})
	return pid, st.StartTime
}

func TestWatch(t *testing.T) {
	eachWaitMode(t, func(t *testing.T) {
		pid, start := startChild(t)

		_, err := watch(pid, start+1)
		must.ErrorIs(t, err, errGone, must.Sprint("another start time is another process"))

		w, err := watch(pid, start)
		must.NoError(t, err)
		defer w.close()
		must.Eq(t, !usePidfd, w.pidfd < 0)
		must.False(t, w.exited())

		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		err = w.wait(ctx)
		cancel()
		must.ErrorIs(t, err, context.DeadlineExceeded)

		must.NoError(t, w.signalGroup(unix.SIGTERM))
		must.NoError(t, w.wait(context.Background()))
		must.True(t, w.exited())
		must.ErrorIs(t, w.signalGroup(unix.SIGTERM), errGone)

		w.reap()
		_, err = readProcStat(pid)
		must.ErrorIs(t, err, errNoProcess, must.Sprint("reap collects our child"))
		_, err = watch(pid, start)
		must.ErrorIs(t, err, errGone)
	})
}
