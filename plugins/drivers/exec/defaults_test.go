package exec

import (
	"context"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/plugins/drivers"
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
