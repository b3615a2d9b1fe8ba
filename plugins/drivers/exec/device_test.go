package exec

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/plugins/drivers"
)

// loopDevice attaches a 1 MiB loop device backed by a file starting with
// "HELO" and returns the device and the file; both go at cleanup.
func loopDevice(t *testing.T) (dev, backing string) {
	t.Helper()
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Skip("losetup is not installed")
	}
	backing = filepath.Join(t.TempDir(), "disk.img")
	must.NoError(t, os.WriteFile(backing, append([]byte("HELO"), make([]byte, 1<<20-4)...), 0o600))
	out, err := exec.Command("losetup", "--find", "--show", backing).CombinedOutput()
	must.NoError(t, err, must.Sprintf("losetup: %s", out))
	dev = strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })
	return dev, backing
}

// backingPrefix reads the first n bytes the loop device wrote through to
// its file (detaching flushes; the cleanup's detach is then a no-op).
func backingPrefix(t *testing.T, dev, backing string, n int) string {
	t.Helper()
	out, err := exec.Command("losetup", "-d", dev).CombinedOutput()
	must.NoError(t, err, must.Sprintf("losetup -d: %s", out))
	b, err := os.ReadFile(backing)
	must.NoError(t, err)
	return string(b[:n])
}

// TestReadOnlyBlockDevice: a block device bound read-only into a task can
// be read but not written, by a task running as root with every
// capability, through the bound node or a node it makes itself; bound
// read-write it can be written. A read-only bind mount alone would not
// stop the writes (the kernel checks device access in the device cgroup,
// not in the mount).
func TestReadOnlyBlockDevice(t *testing.T) {
	d := newDriver(t, t.TempDir())
	for _, readonly := range []bool{true, false} {
		name := map[bool]string{true: "read-only", false: "read-write"}[readonly]
		t.Run(name, func(t *testing.T) {
			dev, backing := loopDevice(t)
			cfg := newTask(t, "blk", `head -c 4 /srv/blk; echo; printf RWOK > /srv/blk && echo wrote-node;
				mknod /tmp/again b $(stat -c '%t %T' /srv/blk | awk '{printf "%d %d", "0x"$1, "0x"$2}') && printf MKOK > /tmp/again && echo wrote-mknod; true`)
			cfg.Mounts = []*drivers.MountConfig{{HostPath: dev, TaskPath: "/srv/blk", Readonly: readonly}}
			start(t, d, cfg)
			res := wait(t, d, cfg.ID)
			out, errOut := output(t, cfg)
			must.True(t, res.Successful(), must.Sprintf("stdout %q stderr %q", out, errOut))
			must.StrContains(t, out, "HELO", must.Sprintf("the task reads the device; stderr %q", errOut))
			if readonly {
				must.StrNotContains(t, out, "wrote", must.Sprintf("stderr %q", errOut))
				must.StrContains(t, errOut, "Operation not permitted")
				must.Eq(t, "HELO", backingPrefix(t, dev, backing, 4))
			} else {
				must.StrContains(t, out, "wrote-node", must.Sprintf("stderr %q", errOut))
				must.StrContains(t, out, "wrote-mknod", must.Sprintf("stderr %q", errOut))
				must.Eq(t, "MKOK", backingPrefix(t, dev, backing, 4))
			}
			must.SliceEmpty(t, mountsUnder(t, cfg.TaskDir))
			for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
				entries, _ := os.ReadDir(filepath.Join(root, "berth"))
				for _, e := range entries {
					must.False(t, bytes.Contains([]byte(e.Name()), []byte("alloc-blk")), must.Sprintf("cgroup %s left behind", e.Name()))
				}
			}
		})
	}
}
