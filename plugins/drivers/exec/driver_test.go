package exec

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

func TestFingerprint(t *testing.T) {
	requireRoot(t)
	d := newDriver(t, t.TempDir())
	info := d.Fingerprint(context.Background())
	must.True(t, info.Detected)
	must.True(t, info.Healthy)
	must.Eq(t, structs.MountConfigSupportAll, info.MountConfig)
	must.Eq(t, structs.MountConfigSupportAll, d.Capabilities().MountConfig)

	geteuid = func() int { return 1000 }
	t.Cleanup(func() { geteuid = os.Geteuid })
	info = d.Fingerprint(context.Background())
	must.False(t, info.Detected)
	must.False(t, info.Healthy)
	must.Eq(t, "exec driver needs root", info.HealthDescription)
}

// TestChrootView: the task sees its root, not the host's.
func TestChrootView(t *testing.T) {
	d := newDriver(t, t.TempDir())
	hostOnly := filepath.Join(t.TempDir(), "host-only")
	must.NoError(t, os.WriteFile(hostOnly, nil, 0o644))
	cfg := newTask(t, "view", `
		ls -a /
		echo ---
		test -e `+hostOnly+` && echo host-visible
		echo tmp > /tmp/f && echo alloc > /alloc/shared && echo local > /local/f
		echo nothing > /dev/null && head -c 4 /dev/urandom | wc -c
		test -r /proc/self/mountinfo && echo proc-ok
		touch /usr/berth-test 2>/dev/null || echo usr-read-only
	`)
	start(t, d, cfg)
	res := wait(t, d, cfg.ID)
	out, errOut := output(t, cfg)
	must.True(t, res.Successful(), must.Sprintf("stdout %s, stderr %s", out, errOut))

	listing, rest, _ := strings.Cut(out, "---\n")
	entries := strings.Fields(listing)
	sort.Strings(entries)
	must.Eq(t, []string{".", "..", "alloc", "bin", "dev", "etc", "lib", "lib64", "local", "proc", "sbin", "tmp", "usr"}, entries)
	must.Eq(t, "4\nproc-ok\nusr-read-only\n", rest)

	for path, want := range map[string]string{
		filepath.Join(cfg.TaskDir, "tmp", "f"):   "tmp\n",
		filepath.Join(cfg.AllocDir, "shared"):    "alloc\n",
		filepath.Join(cfg.TaskDir, "local", "f"): "local\n",
	} {
		b, err := os.ReadFile(path)
		must.NoError(t, err)
		must.Eq(t, want, string(b))
	}
	fi, err := os.Stat(filepath.Join(cfg.TaskDir, "tmp"))
	must.NoError(t, err)
	must.Eq(t, os.ModeDir|os.ModeSticky|0o777, fi.Mode())
	must.SliceEmpty(t, mountsUnder(t, cfg.TaskDir))
}

// TestVolumes: a writable volume shows the task's writes on the host; a
// read-only one refuses them.
func TestVolumes(t *testing.T) {
	cases := []struct {
		name     string
		readonly bool
	}{
		{name: "read-write"},
		{name: "read-only", readonly: true},
	}
	d := newDriver(t, t.TempDir())
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			host := t.TempDir()
			cfg := newTask(t, "vol", `echo hi > /srv/data/out`)
			cfg.Mounts = []*drivers.MountConfig{{HostPath: host, TaskPath: "/srv/data", Readonly: tc.readonly}}
			start(t, d, cfg)
			res := wait(t, d, cfg.ID)
			_, errOut := output(t, cfg)
			b, err := os.ReadFile(filepath.Join(host, "out"))
			if tc.readonly {
				must.Eq(t, 2, res.ExitCode)
				must.StrContains(t, errOut, "Read-only file system")
				must.ErrorIs(t, err, os.ErrNotExist)
			} else {
				must.True(t, res.Successful(), must.Sprintf("stderr %s", errOut))
				must.NoError(t, err)
				must.Eq(t, "hi\n", string(b))
			}
			must.SliceEmpty(t, mountsUnder(t, cfg.TaskDir))
		})
	}
}
