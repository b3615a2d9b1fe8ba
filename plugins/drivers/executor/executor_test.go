package executor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/shoenig/test/must"
	"golang.org/x/sys/unix"

	"github.com/berth-io/berth/testutil"
)

// shSpec is a spec running sh -c script in a fresh dir.
func shSpec(t *testing.T, script string) (*Spec, string) {
	t.Helper()
	dir := t.TempDir()
	return &Spec{
		TaskID:     t.Name(),
		Command:    "sh",
		Args:       []string{"-c", script},
		Env:        []string{"PATH=" + DefaultPath},
		Dir:        dir,
		StdoutPath: filepath.Join(dir, "stdout"),
		StderrPath: filepath.Join(dir, "stderr"),
	}, filepath.Join(dir, "executor")
}

// launch launches and makes sure executor and task are gone after the test.
func launch(t *testing.T, spec *Spec, dir string) *Process {
	t.Helper()
	p, err := Launch(context.Background(), "", dir, spec)
	must.NoError(t, err)
	t.Cleanup(func() {
		_ = p.Signal(unix.SIGKILL)
		_ = unix.Kill(p.State().ExecutorPID, unix.SIGKILL)
		ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
		defer cancel()
		_, err := p.Wait(ctx)
		must.NoError(t, err)
		p.Close()
	})
	return p
}

func TestLaunchAndAttach(t *testing.T) {
	eachWaitMode(t, func(t *testing.T) {
		spec, dir := shSpec(t, `read code < ctl; echo "exiting $code"; exit "$code"`)
		must.NoError(t, syscall.Mkfifo(filepath.Join(spec.Dir, "ctl"), 0o600))
		p := launch(t, spec, dir)
		_, exited := p.Exited()
		must.False(t, exited)

		a, err := Attach(p.State())
		must.NoError(t, err)
		defer a.Close()
		must.Eq(t, p.PID(), a.PID())

		must.NoError(t, os.WriteFile(filepath.Join(spec.Dir, "ctl"), []byte("6\n"), 0o600))
		st, err := a.Wait(context.Background())
		must.NoError(t, err)
		must.Eq(t, 6, st.ExitCode)
		must.Eq(t, "", st.Err)
		st, err = p.Wait(context.Background())
		must.NoError(t, err)
		must.Eq(t, 6, st.ExitCode)

		out, err := os.ReadFile(spec.StdoutPath)
		must.NoError(t, err)
		must.Eq(t, "exiting 6\n", string(out))
		for _, f := range []string{specFile, statusFile, logFile} {
			must.FileExists(t, filepath.Join(dir, f))
		}
	})
}

// TestExecutorKilled: an executor killed by hand leaves the task running;
// the client follows the task itself, and learns that its exit status is
// unknown.
func TestExecutorKilled(t *testing.T) {
	eachWaitMode(t, func(t *testing.T) {
		subreaper(t) // the orphaned task comes to us, not to init
		spec, dir := shSpec(t, `exec sleep 300`)
		p := launch(t, spec, dir)
		exe, task := p.State().ExecutorPID, p.PID()
		must.NoError(t, unix.Kill(exe, unix.SIGKILL))
		testutil.WaitForResult(t, func() (bool, error) {
			st, err := readProcStat(exe)
			return err != nil || st.exited(), err
		})

		a, err := Attach(p.State())
		must.NoError(t, err)
		defer a.Close()
		_, exited := a.Exited()
		must.False(t, exited, must.Sprint("the task lives on"))

		must.NoError(t, unix.Kill(task, unix.SIGKILL))
		st, err := a.Wait(context.Background())
		must.NoError(t, err)
		must.StrContains(t, st.Err, "exited without recording")

		_, err = Attach(p.State())
		must.ErrorIs(t, err, ErrGone)
	})
}

func TestExecutorForwardsSignals(t *testing.T) {
	spec, dir := shSpec(t, `exec sleep 300`)
	p := launch(t, spec, dir)
	must.NoError(t, unix.Kill(p.State().ExecutorPID, unix.SIGTERM))
	st, err := p.Wait(context.Background())
	must.NoError(t, err)
	must.Eq(t, int(unix.SIGTERM), st.Signal)
}

func TestLaunchErrors(t *testing.T) {
	t.Run("command not found", func(t *testing.T) {
		spec, dir := shSpec(t, "")
		spec.Command = "no-such-command-berth"
		_, err := Launch(context.Background(), "", dir, spec)
		must.ErrorContains(t, err, `starting task "TestLaunchErrors/command_not_found": command "no-such-command-berth": executable file not found`)
	})
	t.Run("not an executor", func(t *testing.T) {
		spec, dir := shSpec(t, "")
		_, err := Launch(context.Background(), "/bin/true", dir, spec)
		must.ErrorContains(t, err, "exited without starting the task")
	})
	t.Run("cancelled", func(t *testing.T) {
		subreaper(t) // a task killed with its executor comes to us, not to init
		marker := "berth-cancelled-" + strings.ReplaceAll(t.Name(), "/", "-")
		spec, dir := shSpec(t, `exec -a `+marker+` sleep 300`)
		spec.Command = "bash" // for exec -a
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := Launch(ctx, "", dir, spec)
		must.ErrorIs(t, err, context.Canceled)
		testutil.WaitForResult(t, func() (bool, error) {
			return !running(marker), nil
		})
	})
}

// running reports whether a live (non-zombie) process has argv[0] name.
func running(name string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.HasPrefix(string(b), name+"\x00") {
			continue
		}
		if st, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil && !strings.Contains(string(st), ") Z ") {
			return true
		}
	}
	return false
}

// subreaper makes this process adopt orphaned descendants for the test,
// and collects those that exited when it ends: init does not collect
// orphans everywhere (some containers' pid 1 does not).
func subreaper(t *testing.T) {
	t.Helper()
	must.NoError(t, unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))
	t.Cleanup(func() {
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
		for {
			var info unix.Siginfo
			err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG, nil)
			if err != nil || info.Signo == 0 { // ECHILD, or none has exited
				return
			}
		}
	})
}

// A PID namespace without Isolation would leave the task the host's
// /proc: it is refused, naming why.
func TestNewPIDNeedsIsolation(t *testing.T) {
	spec, dir := shSpec(t, "true")
	spec.NewPID = true
	_, err := Launch(context.Background(), "", dir, spec)
	must.ErrorContains(t, err, "a new PID namespace needs Isolation")
}
