package csimanager

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
	"golang.org/x/sys/unix"

	"github.com/berth-io/berth/client/dynamicplugins"
	"github.com/berth-io/berth/client/internal/testlog"
	"github.com/berth-io/berth/client/state"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi/hostpath"
)

// startHostpath serves Berth's hostpath plugin in node mode, in-process
// (so it sees the test's mount namespace: host paths), until the test ends;
// stage says whether it stages volumes.
func startHostpath(t *testing.T, sock, root string, stage bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p, err := hostpath.New(ctx, hostpath.Config{NodeID: "node-1", Root: root, Mode: hostpath.ModeNode, Stage: stage, Logger: testlog.Logger(t)})
	must.NoError(t, err)
	lis, err := net.Listen("unix", sock)
	must.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- p.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		must.NoError(t, <-served)
		must.NoError(t, p.Close())
	})
}

// mountsUnder lists the mount points under dir in this mount namespace.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	must.NoError(t, err)
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(unescapeMountPath(fields[4]), dir+"/") {
			out = append(out, fields[4])
		}
	}
	must.NoError(t, sc.Err())
	return out
}

// detachMountsUnder lazily unmounts what a failed test left under dir, so
// that removing the temp dir cannot reach into a volume.
func detachMountsUnder(t *testing.T, dir string) {
	for _, m := range mountsUnder(t, dir) {
		_ = unix.Unmount(m, unix.MNT_DETACH)
	}
}

// TestVolumeManager_HostpathPluginReallyMounts mounts a volume for two
// allocs through the hostpath plugin, staging it once when the plugin
// stages and not at all when it does not, and unmounts it across a
// manager restart.
func TestVolumeManager_HostpathPluginReallyMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the hostpath plugin bind-mounts volumes")
	}
	for _, stage := range []bool{true, false} {
		t.Run(fmt.Sprintf("stage=%t", stage), func(t *testing.T) {
			testHostpathReallyMounts(t, stage)
		})
	}
}

func testHostpathReallyMounts(t *testing.T, stage bool) {
	hpRoot, csiRoot, sock := t.TempDir(), t.TempDir(), socketPath(t)
	t.Cleanup(func() { detachMountsUnder(t, csiRoot) })
	startHostpath(t, sock, hpRoot, stage)
	db := state.NewMemDB()
	h := newManagerHarness(t, db, csiRoot, nil) // the real mount point check
	h.register("hostpath", dynamicplugins.PluginTypeCSINode, sock, "plugin-alloc")
	vm := h.nodePlugin("hostpath")
	must.Eq(t, "node-1", vm.ExternalNodeID())

	ctx := context.Background()
	vol := &structs.CSIVolume{ID: "vol1", Namespace: "default", PluginID: "hostpath"}
	u := &UsageOptions{AccessMode: structs.CSIVolumeAccessModeSingleNodeMultiWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}
	a, err := vm.MountVolume(ctx, vol, alloc("alloc-a"), u, nil)
	must.NoError(t, err)
	b, err := vm.MountVolume(ctx, vol, alloc("alloc-b"), u, nil)
	must.NoError(t, err)
	for _, p := range []string{a.Source, b.Source} {
		mounted, err := IsMountpoint(p)
		must.NoError(t, err)
		must.True(t, mounted, must.Sprintf("%s is a mount", p))
	}
	staging := filepath.Join(csiRoot, "hostpath/staging/default/vol1/rw-file-system-single-node-multi-writer")
	mustStaged := func() {
		t.Helper()
		if stage {
			must.SliceContains(t, mountsUnder(t, csiRoot), staging)
			return
		}
		must.SliceNotContains(t, mountsUnder(t, csiRoot), staging)
		_, err := os.Stat(staging)
		must.True(t, os.IsNotExist(err), must.Sprintf("no staging directory for a plugin that does not stage: %v", err))
	}
	mustStaged()

	// What a task writes to its publish path lands in the volume.
	must.NoError(t, os.WriteFile(filepath.Join(a.Source, "hello"), []byte("from a"), 0o644))
	got, err := os.ReadFile(filepath.Join(hpRoot, "volumes", "vol1", "hello"))
	must.NoError(t, err)
	must.Eq(t, "from a", string(got))

	// After a restart, the first alloc leaves; the second still sees it.
	h.stop()
	h2 := newManagerHarness(t, db, csiRoot, nil)
	h2.register("hostpath", dynamicplugins.PluginTypeCSINode, sock, "plugin-alloc")
	vm2 := h2.nodePlugin("hostpath")
	ref := VolumeRef{Namespace: "default", ID: "vol1"}
	must.NoError(t, vm2.UnmountVolume(ctx, ref, "alloc-a", u))
	got, err = os.ReadFile(filepath.Join(b.Source, "hello"))
	must.NoError(t, err)
	must.Eq(t, "from a", string(got))
	mustStaged()

	must.NoError(t, vm2.UnmountVolume(ctx, ref, "alloc-b", u))
	must.SliceEmpty(t, mountsUnder(t, csiRoot))
	_, err = os.Stat(filepath.Join(csiRoot, "hostpath/per-alloc/alloc-a"))
	must.True(t, os.IsNotExist(err), must.Sprint("empty per-alloc dirs are removed"))
}

// TestDetachMountsUnder: a directory about to be removed loses its mounts
// first, and the volume behind them keeps its data.
func TestDetachMountsUnder(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: bind mounts")
	}
	vol, inner, data := t.TempDir(), t.TempDir(), t.TempDir()
	must.NoError(t, os.WriteFile(filepath.Join(vol, "keep"), []byte("x"), 0o644))
	must.NoError(t, os.Mkdir(filepath.Join(vol, "sub"), 0o755))
	for _, p := range []string{"a/publish", "b/staging"} {
		must.NoError(t, os.MkdirAll(filepath.Join(data, p), 0o755))
		must.NoError(t, unix.Mount(vol, filepath.Join(data, p), "", unix.MS_BIND, ""))
	}
	// A mount on top of a mount: detached deepest first.
	must.NoError(t, unix.Mount(inner, filepath.Join(data, "a/publish/sub"), "", unix.MS_BIND, ""))
	t.Cleanup(func() { detachMountsUnder(t, data) })

	must.NoError(t, DetachMountsUnder(data))
	must.SliceEmpty(t, mountsUnder(t, data))
	must.NoError(t, os.RemoveAll(data))
	_, err := os.Stat(filepath.Join(vol, "keep"))
	must.NoError(t, err)
}
