package taskrunner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"golang.org/x/sys/unix"

	"github.com/berth-io/berth/client/dynamicplugins"
	"github.com/berth-io/berth/client/internal/testlog"
	"github.com/berth-io/berth/client/pluginmanager/csimanager"
	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi/fake"
	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/testutil"
)

func TestPluginLayout(t *testing.T) {
	const alloc = "a1b2c3d4-0000-0000-0000-000000000001"
	node := &structs.TaskCSIPluginConfig{ID: "hostpath", Type: structs.CSIPluginTypeNode}
	cases := []struct {
		name     string
		root     string
		pc       *structs.TaskCSIPluginConfig
		canMount bool
		check    func(t *testing.T, l *pluginLayout)
		wantErr  string
	}{
		{name: "raw_exec sees host paths", root: "/var/lib/berth/client/csi", pc: node,
			check: func(t *testing.T, l *pluginLayout) {
				must.Eq(t, "/var/lib/berth/client/csi/p/a1b2c3d4-"+fmt.Sprintf("%08x", crc("plugin")), l.SocketDir)
				must.Eq(t, l.SocketDir+"/csi.sock", l.Socket)
				must.Eq(t, "unix://"+l.Socket, l.Endpoint)
				must.Eq(t, "/var/lib/berth/client/csi/hostpath", l.HostBase)
				must.Eq(t, l.HostBase, l.PluginBase)
				must.SliceEmpty(t, l.Mounts)
			}},
		{name: "exec gets its dirs bound in", root: "/var/lib/berth/client/csi", pc: node, canMount: true,
			check: func(t *testing.T, l *pluginLayout) {
				must.Eq(t, "unix:///csi/csi.sock", l.Endpoint)
				must.Eq(t, "/local/csi", l.PluginBase)
				must.Eq(t, []*drivers.MountConfig{
					{HostPath: l.SocketDir, TaskPath: "/csi", PropagationMode: "private"},
					{HostPath: "/var/lib/berth/client/csi/hostpath", TaskPath: "/local/csi", PropagationMode: "bidirectional"},
				}, l.Mounts)
			}},
		{name: "exec with its own dirs", root: "/d/client/csi", canMount: true,
			pc: &structs.TaskCSIPluginConfig{ID: "hp", Type: structs.CSIPluginTypeMonolith, MountDir: "/run/csi/", StagePublishBaseDir: "/mnt/base"},
			check: func(t *testing.T, l *pluginLayout) {
				must.Eq(t, "unix:///run/csi/csi.sock", l.Endpoint)
				must.Eq(t, "/mnt/base", l.PluginBase)
				must.Eq(t, "/run/csi", l.Mounts[0].TaskPath)
			}},
		{name: "an exec controller gets no staging dir", root: "/d/client/csi", canMount: true,
			pc: &structs.TaskCSIPluginConfig{ID: "hp", Type: structs.CSIPluginTypeController},
			check: func(t *testing.T, l *pluginLayout) {
				must.Eq(t, []*drivers.MountConfig{{HostPath: l.SocketDir, TaskPath: "/csi", PropagationMode: "private"}}, l.Mounts)
			}},
		{name: "socket path too long", root: "/" + strings.Repeat("x", 90) + "/client/csi", pc: node,
			wantErr: "is 131 bytes, longer than the 107 a unix socket allows; use a shorter data_dir"},
		{name: "plugin ID that cannot be a directory", root: "/d", pc: &structs.TaskCSIPluginConfig{ID: "../x", Type: structs.CSIPluginTypeNode},
			wantErr: `csi_plugin "../x": plugin ID`},
		{name: "relative in-task dirs", root: "/d", canMount: true,
			pc:      &structs.TaskCSIPluginConfig{ID: "hp", Type: structs.CSIPluginTypeNode, MountDir: "csi"},
			wantErr: "must be absolute paths in the task"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := pluginLayoutFor(tc.root, alloc, "plugin", tc.pc, tc.canMount)
			if tc.wantErr != "" {
				must.ErrorContains(t, err, tc.wantErr)
				return
			}
			must.NoError(t, err)
			tc.check(t, l)
		})
	}
}

func crc(s string) uint32 {
	l, _ := pluginLayoutFor("/r", "a", s, &structs.TaskCSIPluginConfig{ID: "x"}, false)
	var n uint32
	fmt.Sscanf(filepath.Base(l.SocketDir), "a-%08x", &n)
	return n
}

// pluginHarness runs a csi_plugin task on the fake host with the plugin
// supervisor.
type pluginHarness struct {
	*harness
	registry *dynamicplugins.Registry
	root     string
	layout   *pluginLayout
}

func newPluginHarness(t *testing.T, pc *structs.TaskCSIPluginConfig, policy *structs.RestartPolicy) *pluginHarness {
	h := newHarness(t, structs.JobTypeService, policy, &structs.Task{Name: "plugin", CSIPluginConfig: pc})
	root, err := os.MkdirTemp("", "ps") // short: the socket lives below it
	must.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(root) })
	reg, err := dynamicplugins.New(h.db, testlog.Logger(t))
	must.NoError(t, err)
	l, err := pluginLayoutFor(root, h.alloc.ID, "plugin", pc, false)
	must.NoError(t, err)
	return &pluginHarness{harness: h, registry: reg, root: root, layout: l}
}

func (h *pluginHarness) supervisor() HookFactory {
	return NewPluginSupervisorHookFactory(PluginSupervisorConfig{
		Registry: h.registry, Root: h.root, ProbeInterval: 10 * time.Millisecond,
		StartupBackoff: helper.Backoff{Base: 5 * time.Millisecond, Max: 20 * time.Millisecond},
	})
}

func goRun(t *testing.T, r *Runner) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run()
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.Shutdown(ctx)
		<-done
	})
}

func hasEvent(ts *structs.TaskState, typ, sub string) bool {
	for _, e := range ts.Events {
		if e.Type == typ && strings.Contains(e.Message, sub) {
			return true
		}
	}
	return false
}

func TestPluginSupervisor_RegistersWhenHealthyAndDeregistersWhenDone(t *testing.T) {
	pc := &structs.TaskCSIPluginConfig{ID: "fakeplug", Type: structs.CSIPluginTypeMonolith, HealthTimeout: time.Minute}
	h := newPluginHarness(t, pc, &structs.RestartPolicy{Attempts: 0, Interval: time.Hour, Mode: structs.RestartPolicyModeFail})
	r := h.runner(false, h.supervisor())
	goRun(t, r)
	testutil.WaitForResult(t, func() (bool, error) { return h.host.Running(h.taskID()), nil })
	must.Eq(t, "unix://"+h.layout.Socket, h.host.Config(h.taskID()).Env["CSI_ENDPOINT"])
	must.Nil(t, h.registry.Plugin(dynamicplugins.PluginTypeCSINode, "fakeplug"), must.Sprint("not before it is healthy"))

	// The plugin comes up on its socket.
	p := fake.Start(t, h.layout.Socket)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	for _, typ := range []string{dynamicplugins.PluginTypeCSINode, dynamicplugins.PluginTypeCSIController} {
		info, err := h.registry.WaitForPlugin(ctx, typ, "fakeplug")
		must.NoError(t, err)
		must.Eq(t, h.alloc.ID, info.AllocID)
		must.Eq(t, h.layout.Socket, info.SocketPath)
		must.Eq(t, "1.0.0", info.Version)
		must.Eq(t, "fake.csi.berth.io", info.Options[dynamicplugins.OptionProvider])
		must.Eq(t, h.layout.HostBase, info.Options[dynamicplugins.OptionStagePublishHostDir])
		must.Eq(t, h.layout.HostBase, info.Options[dynamicplugins.OptionStagePublishPluginDir])
	}
	testutil.WaitForResult(t, func() (bool, error) { return hasEvent(r.State(), EventPluginHealthy, "is healthy"), nil })

	// Health changes become task events.
	notReady := false
	p.Configure(func(s *fake.Settings) { s.Ready = &notReady })
	testutil.WaitForResult(t, func() (bool, error) {
		return hasEvent(r.State(), EventPluginUnhealthy, "plugin says it is not ready"), nil
	})
	p.Configure(func(s *fake.Settings) { s.Ready = nil })
	testutil.WaitForResult(t, func() (bool, error) { return hasEvent(r.State(), EventPluginHealthy, "healthy again"), nil })

	// The task ends for good: the plugin is gone from the registry.
	must.NoError(t, h.host.Exit(h.taskID(), 0))
	<-r.WaitCh()
	must.Nil(t, h.registry.Plugin(dynamicplugins.PluginTypeCSINode, "fakeplug"))
	must.Nil(t, h.registry.Plugin(dynamicplugins.PluginTypeCSIController, "fakeplug"))
	_, err := os.Stat(h.layout.SocketDir)
	must.True(t, os.IsNotExist(err), must.Sprint("the socket dir is removed"))
}

func TestPluginSupervisor_RestartsAPluginThatNeverBecomesHealthy(t *testing.T) {
	pc := &structs.TaskCSIPluginConfig{ID: "fakeplug", Type: structs.CSIPluginTypeNode, HealthTimeout: 100 * time.Millisecond}
	h := newPluginHarness(t, pc, &structs.RestartPolicy{Attempts: 1, Interval: time.Hour, Delay: time.Millisecond, Mode: structs.RestartPolicyModeFail})
	r := h.runner(false, h.supervisor())
	goRun(t, r)
	testutil.WaitForResult(t, func() (bool, error) {
		return h.host.Starts(h.taskID()) == 2, fmt.Errorf("starts: %d", h.host.Starts(h.taskID()))
	})
	must.True(t, hasEvent(r.State(), EventPluginUnhealthy, "did not become healthy within 100ms"))
	must.Nil(t, h.registry.Plugin(dynamicplugins.PluginTypeCSINode, "fakeplug"))
}

func TestPluginSupervisor_StaysRegisteredAcrossAClientShutdown(t *testing.T) {
	pc := &structs.TaskCSIPluginConfig{ID: "fakeplug", Type: structs.CSIPluginTypeNode}
	h := newPluginHarness(t, pc, nil)
	r := h.runner(false, h.supervisor())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run()
	}()
	testutil.WaitForResult(t, func() (bool, error) { return h.host.Running(h.taskID()), nil })
	fake.Start(t, h.layout.Socket)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	_, err := h.registry.WaitForPlugin(ctx, dynamicplugins.PluginTypeCSINode, "fakeplug")
	must.NoError(t, err)
	must.NoError(t, r.Shutdown(ctx))
	<-done
	must.True(t, h.host.Running(h.taskID()))
	must.NotNil(t, h.registry.Plugin(dynamicplugins.PluginTypeCSINode, "fakeplug"))

	// The next client process re-attaches and supervises again.
	r2 := h.runner(true, h.supervisor())
	goRun(t, r2)
	testutil.WaitForResult(t, func() (bool, error) { return hasEvent(r2.State(), EventPluginHealthy, "is healthy"), nil })
	must.Eq(t, 1, h.host.Starts(h.taskID()))
}

func TestMakeSharedMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: binds a directory on itself")
	}
	dir := t.TempDir()
	t.Cleanup(func() {
		for mounted, _ := csimanager.IsMountpoint(dir); mounted; mounted, _ = csimanager.IsMountpoint(dir) {
			must.NoError(t, unix.Unmount(dir, unix.UMOUNT_NOFOLLOW))
		}
	})
	must.NoError(t, makeSharedMount(dir))
	must.NoError(t, makeSharedMount(dir), must.Sprint("idempotent"))
	var found []string
	raw, err := os.ReadFile("/proc/self/mountinfo")
	must.NoError(t, err)
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) > 6 && f[4] == dir {
			found = append(found, line)
		}
	}
	must.Len(t, 1, found, must.Sprint("bound once, not stacked"))
	must.StrContains(t, found[0], " shared:")
}
