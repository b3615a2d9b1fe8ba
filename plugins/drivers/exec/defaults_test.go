package exec

import (
	"context"
	"encoding/json"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/plugins/drivers/executor"
	"github.com/berth-io/berth/testutil"
)

// Capability bits (capability.h).
const (
	capNetBindService = 10
	capSysAdmin       = 21
)

// report is what probeScript prints, parsed.
type report map[string]string

// probeScript prints the task's identity, capabilities, IPC namespace,
// whether it can see pid, and whether it can write its own dirs.
func probeScript(pid int) string {
	return `echo uid=$(id -u)
echo pid=$$
echo ppid=$PPID
grep -E '^Cap(Eff|Bnd):' /proc/self/status | tr -d '\t' | sed 's/:/=/'
echo ipc=$(readlink /proc/self/ns/ipc)
if [ -e /proc/` + strconv.Itoa(pid) + ` ]; then echo seesagent=yes; else echo seesagent=no; fi
if echo x > /local/probe && echo x > /tmp/probe; then echo writes=yes; else echo writes=no; fi
`
}

func runProbe(t *testing.T, d drivers.Driver, cfg *drivers.TaskConfig) report {
	t.Helper()
	start(t, d, cfg)
	res := wait(t, d, cfg.ID)
	out, errOut := output(t, cfg)
	must.True(t, res.Successful(), must.Sprintf("stdout %q stderr %q", out, errOut))
	r := report{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(line, "=")
		r[k] = v
	}
	return r
}

func (r report) has(t *testing.T, set string, bit uint) bool {
	t.Helper()
	v, err := strconv.ParseUint(r[set], 16, 64)
	must.NoError(t, err, must.Sprintf("%s = %q", set, r[set]))
	return v&(1<<bit) != 0
}

// TestDefaults_NobodyNoAdminNoAgent: a task run by default is nobody
// (65534), holds no capability (sys_admin least of all), has its own IPC
// namespace, cannot see the agent's process, and can still use its own
// task dir (which is 0700).
func TestDefaults_NobodyNoAdminNoAgent(t *testing.T) {
	d := newDriver(t, t.TempDir())
	cfg := newTask(t, "probe", probeScript(os.Getpid()))
	cfg.User = "" // the default
	r := runProbe(t, d, cfg)
	must.Eq(t, "65534", r["uid"])
	must.Eq(t, "1", r["ppid"], must.Sprint("the task is the child of its PID namespace's init"))
	smallPID(t, r["pid"])
	must.Eq(t, "0000000000000000", r["CapEff"])
	must.False(t, r.has(t, "CapBnd", capSysAdmin))
	must.Eq(t, "no", r["seesagent"])
	must.Eq(t, "yes", r["writes"])
	host, err := os.Readlink("/proc/self/ns/ipc")
	must.NoError(t, err)
	must.NotEq(t, host, r["ipc"])

	fi, err := os.Stat(cfg.TaskDir)
	must.NoError(t, err)
	must.Eq(t, "nobody", ownerName(t, fi))
}

// TestDefaults_RootTaskHasOnlyTheAllowList: user = "root" runs as root
// with the default bounding set (no sys_admin); a CSI plugin task keeps
// sys_admin; allow_caps replaces the default set.
func TestDefaults_RootTaskHasOnlyTheAllowList(t *testing.T) {
	d := newDriver(t, t.TempDir())
	cfg := newTask(t, "root", probeScript(os.Getpid()))
	r := runProbe(t, d, cfg)
	must.Eq(t, "0", r["uid"])
	must.False(t, r.has(t, "CapBnd", capSysAdmin))
	must.False(t, r.has(t, "CapEff", capSysAdmin))
	must.True(t, r.has(t, "CapEff", capNetBindService))

	cfg = newTask(t, "plugin", probeScript(os.Getpid()))
	cfg.User = ""
	cfg.Privileged = true
	r = runProbe(t, d, cfg)
	must.Eq(t, "0", r["uid"])
	must.True(t, r.has(t, "CapEff", capSysAdmin))

	narrow := New(hclog.NewNullLogger(), Config{StateDir: t.TempDir(), AllowCaps: []string{"net_bind_service"}})
	cfg = newTask(t, "narrow", probeScript(os.Getpid()))
	r = runProbe(t, narrow, cfg)
	must.Eq(t, "0000000000000400", r["CapBnd"])
}

// smallPID checks a pid from inside a task's PID namespace: past init (1)
// and init's threads, which take pids there too, and far below any pid
// of the busy host.
func smallPID(t *testing.T, s string) {
	t.Helper()
	n, err := strconv.Atoi(s)
	must.NoError(t, err)
	must.Between(t, 2, n, 999)
}

// TestPIDNamespace: a task, root in the task included, is a small pid under the
// namespace's init (pid 1, the executor's binary), sees only those in its
// /proc, and cannot see or signal the agent; the host knows the task by
// its host pid, in another PID namespace.
func TestPIDNamespace(t *testing.T) {
	d := newDriver(t, t.TempDir())
	agent := strconv.Itoa(os.Getpid())
	cfg := newTask(t, "pidns", `echo pid=$$
echo init=$(tr '\0' ' ' < /proc/1/cmdline)
echo procs=$(cd /proc && echo [0-9]*)
if [ -e /proc/`+agent+` ]; then echo seesagent=yes; else echo seesagent=no; fi
if kill -0 `+agent+` 2>/dev/null; then echo signals=yes; else echo signals=no; fi
echo pidns=$(readlink /proc/self/ns/pid)
`)
	h := start(t, d, cfg)
	res := wait(t, d, cfg.ID)
	out, errOut := output(t, cfg)
	must.True(t, res.Successful(), must.Sprintf("stdout %q stderr %q", out, errOut))
	r := report{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(line, "=")
		r[k] = v
	}
	smallPID(t, r["pid"])
	must.StrContains(t, r["init"], "executor -init", must.Sprint("pid 1 is the task's init"))
	// init, the shell, and the subshell of $(...); never a host process.
	procs := strings.Fields(r["procs"])
	must.SliceContains(t, procs, "1")
	must.SliceContains(t, procs, r["pid"])
	must.LessEq(t, 3, len(procs), must.Sprintf("/proc of the task shows %s", r["procs"]))
	must.Eq(t, "no", r["seesagent"])
	must.Eq(t, "no", r["signals"], must.Sprint("root in the task cannot signal the agent"))
	host, err := os.Readlink("/proc/self/ns/pid")
	must.NoError(t, err)
	must.NotEq(t, host, r["pidns"])
	must.NotEq(t, "", r["pidns"])
	_ = h
}

// TestPIDNamespace_SignalsAndExitCode: the task's own exit code comes
// through init; a signal from StopTask and one sent to init itself reach
// the task; a task that ignores SIGTERM is killed at the kill timeout.
func TestPIDNamespace_SignalsAndExitCode(t *testing.T) {
	d := newDriver(t, t.TempDir())
	trap := `trap 'echo got-term; exit 7' TERM; trap 'echo got-usr1' USR1; echo ready; while :; do sleep 1 & wait $!; done`

	cfg := newTask(t, "code", "exit 42")
	start(t, d, cfg)
	must.Eq(t, 42, wait(t, d, cfg.ID).ExitCode)

	cfg = newTask(t, "term", trap)
	start(t, d, cfg)
	waitOutput(t, cfg, "ready")
	must.NoError(t, d.(drivers.Signaler).SignalTask(cfg.ID, "SIGUSR1"))
	waitOutput(t, cfg, "got-usr1")
	must.NoError(t, d.StopTask(context.Background(), cfg.ID, testutil.WaitTimeout, ""))
	res := wait(t, d, cfg.ID)
	must.Eq(t, 7, res.ExitCode)
	must.Eq(t, 0, res.Signal)
	waitOutput(t, cfg, "got-term")

	// A signal sent to init (by its pid, as `kill` of the process tree's
	// root would) is passed on to the task.
	cfg = newTask(t, "viainit", trap)
	h := start(t, d, cfg)
	waitOutput(t, cfg, "ready")
	task := taskPID(t, h)
	initPID := parentPID(t, task)
	must.NotEq(t, os.Getpid(), initPID)
	must.NoError(t, syscall.Kill(initPID, syscall.SIGTERM))
	must.Eq(t, 7, wait(t, d, cfg.ID).ExitCode)

	cfg = newTask(t, "stubborn", `trap '' TERM; echo ready; while :; do sleep 1 & wait $!; done`)
	start(t, d, cfg)
	waitOutput(t, cfg, "ready")
	must.NoError(t, d.StopTask(context.Background(), cfg.ID, 100*time.Millisecond, ""))
	res = wait(t, d, cfg.ID)
	must.Eq(t, int(syscall.SIGKILL), res.Signal)
}

// TestPIDNamespace_BerthBinary: the berth binary itself as the executor
// (so the executor and init run from package early's init, before the rest
// of the binary is initialised): the task runs under `berth executor -init`
// as pid 1, a signal reaches it and its exit code comes back, and the
// executor logs in hclog's line format.
func TestPIDNamespace_BerthBinary(t *testing.T) {
	requireRoot(t)
	bin := testutil.BuildBerth(t)
	stateDir := t.TempDir()
	d := New(hclog.NewNullLogger(), Config{StateDir: stateDir, ExecutorPath: bin})
	cfg := newTask(t, "berthbin", `echo pid=$$
echo init=$(tr '\0' ' ' < /proc/1/cmdline)
trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 1 & wait $!; done`)
	start(t, d, cfg)
	waitOutput(t, cfg, "ready")
	out, errOut := output(t, cfg)
	r := report{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(line, "=")
		r[k] = v
	}
	smallPID(t, r["pid"])
	must.Eq(t, bin+" executor -init", r["init"], must.Sprintf("stderr %q", errOut))
	must.NoError(t, d.StopTask(context.Background(), cfg.ID, testutil.WaitTimeout, ""))
	res := wait(t, d, cfg.ID)
	must.Eq(t, 7, res.ExitCode)
	waitOutput(t, cfg, "got-term")

	logs, err := filepath.Glob(filepath.Join(stateDir, "*", "executor.log"))
	must.NoError(t, err)
	must.Len(t, 1, logs, must.Sprintf("executor logs under %s", stateDir))
	b, err := os.ReadFile(logs[0])
	must.NoError(t, err)
	must.RegexMatch(t, regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\S* \[INFO\]  executor: task exited: task_id=\S+ task_pid=\d+ exit_code=7 signal=0 wait_error=""$`), string(b))
}

// taskPID is the task's host pid, from the driver's handle.
func taskPID(t *testing.T, h *drivers.TaskHandle) int {
	t.Helper()
	var st struct{ TaskPID int }
	must.NoError(t, json.Unmarshal(h.DriverState, &st), must.Sprintf("driver state %s", h.DriverState))
	must.Positive(t, st.TaskPID)
	return st.TaskPID
}

// parentPID reads a process's parent from /proc/<pid>/stat.
func parentPID(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	must.NoError(t, err)
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ppid, err := strconv.Atoi(f[1])
	must.NoError(t, err)
	return ppid
}

func TestDefaults_UnknownUser(t *testing.T) {
	d := newDriver(t, t.TempDir())
	cfg := newTask(t, "who", "true")
	cfg.User = "no-such-user-berth"
	_, err := d.StartTask(context.Background(), cfg)
	must.ErrorIs(t, err, drivers.ErrInvalidConfig)
	must.ErrorContains(t, err, `user "no-such-user-berth"`)
}

func ownerName(t *testing.T, fi os.FileInfo) string {
	t.Helper()
	st, ok := fi.Sys().(*syscall.Stat_t)
	must.True(t, ok)
	u, err := user.LookupId(strconv.Itoa(int(st.Uid)))
	must.NoError(t, err)
	return u.Username
}

// TestPIDNamespace_EnterTask: alloc exec's command joins the task's PID
// namespace, so it sees the same processes as the task.
func TestPIDNamespace_EnterTask(t *testing.T) {
	d := newDriver(t, t.TempDir())
	cfg := newTask(t, "entered", `echo ready; read x < /ctl`)
	withControl(t, cfg)
	h := start(t, d, cfg)
	waitOutput(t, cfg, "ready")
	task := taskPID(t, h)
	taskNS, err := os.Readlink("/proc/" + strconv.Itoa(task) + "/ns/pid")
	must.NoError(t, err)

	var out strings.Builder
	cmd, err := executor.EnterTask(executor.EnterConfig{PID: task, Argv: []string{"sh", "-c", "echo $$; readlink /proc/self/ns/pid"}, Stdout: &out, Stderr: &out})
	must.NoError(t, err)
	must.NoError(t, cmd.Wait(), must.Sprint(out.String()))
	lines := strings.Fields(out.String())
	must.Len(t, 2, lines, must.Sprint(out.String()))
	smallPID(t, lines[0])
	must.Eq(t, taskNS, lines[1])
	release(t, cfg, "done")
	must.Eq(t, 0, wait(t, d, cfg.ID).ExitCode)
}
