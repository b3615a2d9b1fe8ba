package exec

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"

	"github.com/shoenig/test/must"
	"golang.org/x/sys/unix"

	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/testutil"
)

// TestMountsStayInTheTask: while the task runs, its mounts are in its own
// mount table and not in this process's; once it exits its namespace is
// gone with them.
func TestMountsStayInTheTask(t *testing.T) {
	d := newDriver(t, t.TempDir())
	host := t.TempDir()
	cfg := newTask(t, "leak", `echo started; read x < /ctl`)
	cfg.Mounts = []*drivers.MountConfig{{HostPath: host, TaskPath: "/data"}}
	withControl(t, cfg)
	start(t, d, cfg)
	waitOutput(t, cfg, "started")

	st, err := d.InspectTask(cfg.ID)
	must.NoError(t, err)
	taskMounts, err := os.ReadFile("/proc/" + strconv.Itoa(st.PID) + "/mountinfo")
	must.NoError(t, err)
	must.StrContains(t, string(taskMounts), " /data ")
	ns, err := os.Readlink("/proc/" + strconv.Itoa(st.PID) + "/ns/mnt")
	must.NoError(t, err)
	self, err := os.Readlink("/proc/self/ns/mnt")
	must.NoError(t, err)
	must.NotEq(t, self, ns)
	must.SliceEmpty(t, mountsUnder(t, cfg.TaskDir))
	must.SliceEmpty(t, mountsUnder(t, host))

	release(t, cfg, "")
	must.True(t, wait(t, d, cfg.ID).Successful())
	must.SliceEmpty(t, mountsUnder(t, cfg.TaskDir))
	must.SliceEmpty(t, processesIn(t, ns), must.Sprintf("processes still in the task's mount namespace %s", ns))
}

// TestPropagation checks each propagation mode both ways: a mount the host
// makes below the volume after the task started, and one the task makes.
func TestPropagation(t *testing.T) {
	cases := []struct {
		mode                   string
		hostToTask, taskToHost bool
	}{
		{mode: "private"},
		{mode: "host-to-task", hostToTask: true},
		{mode: "bidirectional", hostToTask: true, taskToHost: true},
	}
	d := newDriver(t, t.TempDir())
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			// Propagation needs a shared mount on the host, as a CSI
			// plugin's publish directory is.
			host := sharedMount(t)
			for _, sub := range []string{"fromhost", "fromtask"} {
				must.NoError(t, os.Mkdir(filepath.Join(host, sub), 0o755))
			}
			cfg := newTask(t, "prop", "")
			// The task mounts, as a CSI plugin does: it needs sys_admin.
			cfg.Privileged = true
			cfg.Config = map[string]any{"command": "/local/helper"}
			cfg.Env = map[string]string{envPropagationHelper: "1", "GORACE": "atexit_sleep_ms=0"}
			cfg.Mounts = []*drivers.MountConfig{{HostPath: host, TaskPath: "/data", PropagationMode: tc.mode}}
			copyTestBinary(t, filepath.Join(cfg.TaskDir, "local", "helper"))
			withControl(t, cfg)
			start(t, d, cfg)

			// The host mounts below the volume after the task started.
			fromHost := filepath.Join(host, "fromhost")
			must.NoError(t, unix.Mount("tmpfs", fromHost, "tmpfs", 0, "size=1m"))
			must.NoError(t, os.WriteFile(filepath.Join(fromHost, "marker"), nil, 0o644))

			release(t, cfg, "go")
			res := wait(t, d, cfg.ID)
			out, errOut := output(t, cfg)
			must.True(t, res.Successful(), must.Sprintf("stdout %s, stderr %s", out, errOut))
			must.Eq(t, tc.hostToTask, out == "host-mount-visible\n", must.Sprintf("stdout %q", out))

			fromTask := filepath.Join(host, "fromtask")
			_, err := os.Stat(filepath.Join(fromTask, "marker"))
			must.Eq(t, tc.taskToHost, err == nil, must.Sprintf("the task's mount on the host: %v", err))
			must.Eq(t, tc.taskToHost, contains(mountsUnder(t, host), fromTask))
			must.SliceEmpty(t, mountsUnder(t, cfg.TaskDir))
		})
	}
}

func TestCommandResolvedInTheChroot(t *testing.T) {
	d := newDriver(t, t.TempDir())
	self, err := os.Executable()
	must.NoError(t, err)
	cases := []struct {
		name, command, wantErr string
	}{
		{name: "host path outside the root", command: self, wantErr: "no such file or directory"},
		{name: "not in PATH", command: "no-such-command-berth", wantErr: "executable file not found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := newTask(t, "lookup", "")
			cfg.Config = map[string]any{"command": tc.command}
			_, err := d.StartTask(context.Background(), cfg)
			must.ErrorContains(t, err, tc.wantErr)
			must.SliceEmpty(t, mountsUnder(t, cfg.TaskDir))
		})
	}
}

func TestMountConfigErrors(t *testing.T) {
	cases := []struct {
		name    string
		mount   drivers.MountConfig
		wantErr string
	}{
		{name: "relative task path", mount: drivers.MountConfig{HostPath: "/srv", TaskPath: "data"}, wantErr: "the task path must be absolute"},
		{name: "root task path", mount: drivers.MountConfig{HostPath: "/srv", TaskPath: "/"}, wantErr: "the task path must be absolute and not /"},
		{name: "unclean task path", mount: drivers.MountConfig{HostPath: "/srv", TaskPath: "/a/../etc"}, wantErr: "must be clean"},
		{name: "relative host path", mount: drivers.MountConfig{HostPath: "srv", TaskPath: "/data"}, wantErr: "the host path must be absolute"},
		{name: "bad propagation", mount: drivers.MountConfig{HostPath: "/srv", TaskPath: "/data", PropagationMode: "rshared"}, wantErr: `unknown propagation mode "rshared"`},
	}
	d := newDriver(t, t.TempDir())
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := newTask(t, "web", "true")
			m := tc.mount
			cfg.Mounts = []*drivers.MountConfig{&m}
			_, err := d.StartTask(context.Background(), cfg)
			must.ErrorIs(t, err, drivers.ErrInvalidConfig)
			must.ErrorContains(t, err, `task "web": volume mount`)
			must.ErrorContains(t, err, tc.wantErr)
		})
	}
}

// TestRecover: an exec task survives the loss of the driver that started
// it, like a raw_exec one.
func TestRecover(t *testing.T) {
	stateDir := t.TempDir()
	old := newDriver(t, stateDir)
	cfg := newTask(t, "db", `echo started; read code < /ctl; exit "$code"`)
	withControl(t, cfg)
	h := start(t, old, cfg)
	waitOutput(t, cfg, "started")

	d := newDriver(t, stateDir)
	must.NoError(t, d.RecoverTask(context.Background(), h))
	t.Cleanup(func() { must.NoError(t, d.DestroyTask(context.Background(), cfg.ID, true)) })
	st, err := d.InspectTask(cfg.ID)
	must.NoError(t, err)
	must.Eq(t, drivers.TaskStateRunning, st.State)
	release(t, cfg, "3")
	must.Eq(t, 3, wait(t, d, cfg.ID).ExitCode)
}

// sharedMount returns a directory that is a shared bind mount of itself,
// unmounted (with everything below it) when the test ends.
func sharedMount(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	must.NoError(t, unix.Mount(dir, dir, "", unix.MS_BIND, ""))
	t.Cleanup(func() {
		mps := mountsUnder(t, dir)
		sort.Sort(sort.Reverse(sort.StringSlice(mps))) // deepest first
		for _, mp := range mps {
			must.NoError(t, unix.Unmount(mp, 0))
		}
	})
	must.NoError(t, unix.Mount("", dir, "", unix.MS_SHARED, ""))
	return dir
}

// copyTestBinary copies this test binary to dst, to run it as a task.
func copyTestBinary(t *testing.T, dst string) {
	t.Helper()
	self, err := os.Executable()
	must.NoError(t, err)
	src, err := os.Open(self)
	must.NoError(t, err)
	defer src.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	must.NoError(t, err)
	_, err = io.Copy(out, src)
	must.NoError(t, err)
	must.NoError(t, out.Close())
}

// processesIn lists the pids whose mount namespace is ns ("mnt:[...]").
func processesIn(t *testing.T, ns string) []int {
	t.Helper()
	var pids []int
	testutil.WaitForResult(t, func() (bool, error) {
		pids = nil
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return false, err
		}
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if l, err := os.Readlink("/proc/" + e.Name() + "/ns/mnt"); err == nil && l == ns {
				pids = append(pids, pid)
			}
		}
		return true, nil
	})
	return pids
}

func contains(l []string, s string) bool {
	for _, e := range l {
		if e == s {
			return true
		}
	}
	return false
}

// TestNestedVolumes: a volume below another lands on top of it, whatever
// the order of the mounts.
func TestNestedVolumes(t *testing.T) {
	d := newDriver(t, t.TempDir())
	outer, inner := t.TempDir(), t.TempDir()
	// The mount point must exist: nothing is created in a read-only volume.
	must.NoError(t, os.Mkdir(filepath.Join(outer, "sub"), 0o755))
	cfg := newTask(t, "nested", `echo in > /data/sub/f`)
	cfg.Mounts = []*drivers.MountConfig{
		{HostPath: inner, TaskPath: "/data/sub"},
		{HostPath: outer, TaskPath: "/data", Readonly: true},
	}
	start(t, d, cfg)
	res := wait(t, d, cfg.ID)
	_, errOut := output(t, cfg)
	must.True(t, res.Successful(), must.Sprintf("stderr %s", errOut))
	b, err := os.ReadFile(filepath.Join(inner, "f"))
	must.NoError(t, err)
	must.Eq(t, "in\n", string(b))
}
