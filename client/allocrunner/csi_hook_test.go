package allocrunner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/shoenig/test/must"
	"google.golang.org/grpc/codes"

	"github.com/berth-io/berth/client/allocrunner/taskrunner"
	"github.com/berth-io/berth/client/dynamicplugins"
	"github.com/berth-io/berth/client/internal/fakedriver"
	"github.com/berth-io/berth/client/internal/testlog"
	"github.com/berth-io/berth/client/pluginmanager/csimanager"
	"github.com/berth-io/berth/client/state"
	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi"
	"github.com/berth-io/berth/plugins/csi/fake"
	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/testutil"
)

// These tests run the csi_hook in real alloc runners (fake task driver)
// against the fake CSI plugin over a unix socket and a scripted fake of
// the servers' CSI RPCs. They run on real time and wait on conditions.

// csiServer fakes CSIVolume.Get, .Claim and .Unpublish.
type csiServer struct {
	// lock guards everything below.
	lock          sync.Mutex
	volumes       map[string]*structs.CSIVolume
	claimErrs     []error
	unpublishErrs []error
	claims        []*structs.CSIVolumeClaimRequest
	unpublishes   []*structs.CSIVolumeUnpublishRequest
	progress      []*structs.CSIVolumeClaimProgressRequest
	gets          int
	// claimGate, when set, holds each Claim until it is closed; arrived
	// counts the Claims that came in.
	claimGate chan struct{}
	arrived   int
}

func newCSIServer(vols ...*structs.CSIVolume) *csiServer {
	s := &csiServer{volumes: map[string]*structs.CSIVolume{}}
	for _, v := range vols {
		s.volumes[v.ID] = v
	}
	return s
}

func (s *csiServer) RPC(ctx context.Context, method string, args, reply any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if method == "CSIVolume.Claim" {
		s.lock.Lock()
		s.arrived++
		gate := s.claimGate
		s.lock.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	s.lock.Lock()
	defer s.lock.Unlock()
	switch method {
	case "CSIVolume.Get":
		req, resp := args.(*structs.CSIVolumeGetRequest), reply.(*structs.CSIVolumeGetResponse)
		s.gets++
		resp.Volume = s.volumes[req.ID].Copy()
		return nil
	case "CSIVolume.Claim":
		req, resp := args.(*structs.CSIVolumeClaimRequest), reply.(*structs.CSIVolumeClaimResponse)
		c := *req
		s.claims = append(s.claims, &c)
		if len(s.claimErrs) > 0 {
			err := s.claimErrs[0]
			s.claimErrs = s.claimErrs[1:]
			return err
		}
		v := s.volumes[req.VolumeID]
		if v == nil {
			return structs.NotFound("volume", req.VolumeID)
		}
		resp.Volume = v.Copy()
		resp.PublishContext = map[string]string{"attached-to": req.ExternalNodeID}
		return nil
	case "CSIVolume.ReportProgress":
		c := *args.(*structs.CSIVolumeClaimProgressRequest)
		s.progress = append(s.progress, &c)
		return nil
	case "CSIVolume.Unpublish":
		req := args.(*structs.CSIVolumeUnpublishRequest)
		c := *req
		s.unpublishes = append(s.unpublishes, &c)
		if len(s.unpublishErrs) > 0 {
			err := s.unpublishErrs[0]
			s.unpublishErrs = s.unpublishErrs[1:]
			return err
		}
		return nil
	}
	return fmt.Errorf("csi server fake: unknown method %s", method)
}

// reports returns the progress reports of a phase so far.
func (s *csiServer) reports(phase string) []*structs.CSIVolumeClaimProgressRequest {
	s.lock.Lock()
	defer s.lock.Unlock()
	var out []*structs.CSIVolumeClaimProgressRequest
	for _, p := range s.progress {
		if p.Phase == phase {
			out = append(out, p)
		}
	}
	return out
}

func (s *csiServer) claimCount() int {
	s.lock.Lock()
	defer s.lock.Unlock()
	return len(s.claims)
}

func (s *csiServer) unpublished(allocID string) int {
	s.lock.Lock()
	defer s.lock.Unlock()
	n := 0
	for _, u := range s.unpublishes {
		if u.AllocationID == allocID {
			n++
		}
	}
	return n
}

// mountingDriver is the fake driver claiming it can mount volumes.
type mountingDriver struct{ *fakedriver.Driver }

func (mountingDriver) Capabilities() drivers.Capabilities {
	return drivers.Capabilities{MountConfig: structs.MountConfigSupportAll}
}

// fakeMountTable plays the mount table: the fake plugin mounts nothing.
type fakeMountTable struct {
	// lock guards paths.
	lock  sync.Mutex
	paths map[string]bool
}

func (f *fakeMountTable) IsMountpoint(p string) (bool, error) {
	f.lock.Lock()
	defer f.lock.Unlock()
	return f.paths[p], nil
}

func (f *fakeMountTable) set(p string, mounted bool) {
	f.lock.Lock()
	defer f.lock.Unlock()
	f.paths[p] = mounted
}

// csiHarness is one node: its state, a fake plugin, the servers' fake,
// and the task host, which outlive any one client process (csiClient).
type csiHarness struct {
	t       *testing.T
	db      state.DB
	root    string // alloc root
	csiRoot string
	sock    string
	plugin  *fake.Plugin
	server  *csiServer
	host    *fakedriver.Host
	mounts  *fakeMountTable
	updater *fakeUpdater
}

func newCSIHarness(t *testing.T, vols ...*structs.CSIVolume) *csiHarness {
	dir, err := os.MkdirTemp("", "csih")
	must.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "csi.sock")
	return &csiHarness{
		t: t, db: state.NewMemDB(), root: filepath.Join(t.TempDir(), "alloc"), csiRoot: filepath.Join(t.TempDir(), "csi"),
		sock: sock, plugin: fake.Start(t, sock), server: newCSIServer(vols...), host: fakedriver.NewHost(),
		mounts: &fakeMountTable{paths: map[string]bool{}}, updater: &fakeUpdater{},
	}
}

// csiClient is one client process: registry, CSI manager and runners.
type csiClient struct {
	h        *csiHarness
	registry *dynamicplugins.Registry
	mgr      *csimanager.Manager
	events   *CSIEvents
	cancel   context.CancelFunc
	done     chan struct{}
	// lock guards runners.
	lock    sync.Mutex
	runners []*runningAlloc
	// pluginWait is CSIHookConfig.PluginWait.
	pluginWait time.Duration
	// plugins is CSIHookConfig.Plugins, shared by the client's allocs.
	plugins *CSIVolumePlugins
	// setups is CSIHookConfig.Setups, shared likewise.
	setups *CSISetups
}

type runningAlloc struct {
	r    *Runner
	wait func()
}

func (h *csiHarness) client() *csiClient {
	t := h.t
	reg, err := dynamicplugins.New(h.db, testlog.Logger(t))
	must.NoError(t, err)
	mgr, err := csimanager.New(csimanager.Config{
		Registry: reg, DB: h.db, Root: h.csiRoot, Logger: testlog.Logger(t), IsMountpoint: h.mounts.IsMountpoint,
		FingerprintInterval: time.Hour, FingerprintBackoff: helper.Backoff{Base: 10 * time.Millisecond, Max: 50 * time.Millisecond},
		CSIOptions: []csi.Option{csi.WithMaxAttempts(2), csi.WithBackoff(csi.ExponentialBackoff(5*time.Millisecond, 10*time.Millisecond, nil))},
	})
	must.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	c := &csiClient{h: h, registry: reg, mgr: mgr, events: NewCSIEvents(), cancel: cancel, done: make(chan struct{}), pluginWait: 10 * time.Second,
		plugins: NewCSIVolumePlugins(), setups: NewCSISetups()}
	go func() {
		defer close(c.done)
		mgr.Run(ctx)
	}()
	t.Cleanup(c.shutdown)
	return c
}

func (c *csiClient) registerPlugin() {
	c.h.t.Helper()
	must.NoError(c.h.t, c.registry.Register(&dynamicplugins.PluginInfo{
		Name: "fakeplug", Type: dynamicplugins.PluginTypeCSINode, SocketPath: c.h.sock, AllocID: "plugin-alloc",
	}))
}

// run builds and runs a runner for a, as this client process would.
func (c *csiClient) run(a *structs.Allocation, restore bool) *Runner {
	h := c.h
	h.t.Helper()
	hook := NewCSIHookFactory(CSIHookConfig{
		Manager: c.mgr, RPC: h.server.RPC, NodeID: func() string { return "node-1" },
		Drivers: map[string]drivers.Driver{"mock": mountingDriver{h.host.Driver()}, "raw_exec": h.host.NamedDriver("raw_exec")},
		Events:  c.events, PluginWait: c.pluginWait, PostrunWait: 50 * time.Millisecond, Plugins: c.plugins,
		RetryBackoff: helper.Backoff{Base: 10 * time.Millisecond, Max: 40 * time.Millisecond}, Setups: c.setups,
	})
	addEvents := func(hc *taskrunner.HookConfig) taskrunner.Hook {
		c.events.AddTask(hc.Alloc.ID, hc.Task.Name, hc.Lifecycle)
		return taskrunner.NewVolumeMountHook(hc)
	}
	r, err := New(&Config{
		Alloc: a, AllocRoot: h.root, DB: h.db, StateUpdater: h.updater, Logger: testlog.Logger(h.t), Restore: restore,
		Drivers: map[string]drivers.Driver{"mock": mountingDriver{h.host.Driver()}, "raw_exec": h.host.NamedDriver("raw_exec")},
		Hooks:   []HookFactory{hook}, TaskHooks: []taskrunner.HookFactory{addEvents},
		PostrunBackoff: helper.Backoff{Base: 10 * time.Millisecond, Max: 20 * time.Millisecond},
	})
	must.NoError(h.t, err)
	c.lock.Lock()
	c.runners = append(c.runners, &runningAlloc{r: r, wait: run(r)})
	c.lock.Unlock()
	return r
}

// shutdown ends this client process: runners shut down (tasks keep
// running), then the CSI manager.
func (c *csiClient) shutdown() {
	c.lock.Lock()
	runners := c.runners
	c.runners = nil
	c.lock.Unlock()
	for _, ra := range runners {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = ra.r.Shutdown(ctx)
		cancel()
		ra.wait()
	}
	c.cancel()
	<-c.done
}

func csiAlloc(name string, vol *structs.VolumeRequest, driver string) *structs.Allocation {
	return &structs.Allocation{
		ID: helper.UUID(), Name: "web.g[" + name + "]", Namespace: "default", JobID: "web", TaskGroup: "g",
		DesiredStatus: structs.AllocDesiredStatusRun,
		Job: &structs.Job{ID: "web", Name: "web", Type: structs.JobTypeService, TaskGroups: []*structs.TaskGroup{{
			Name: "g", Volumes: map[string]*structs.VolumeRequest{"data": vol},
			RestartPolicy: &structs.RestartPolicy{Attempts: 0, Interval: time.Hour, Delay: time.Second, Mode: structs.RestartPolicyModeFail},
			Tasks: []*structs.Task{
				{Name: "web", Driver: driver, VolumeMounts: []*structs.VolumeMount{{Volume: "data", Destination: "/srv/data"}}},
				{Name: "sidecar", Driver: driver},
			},
		}}},
	}
}

func perAllocVolume() *structs.VolumeRequest {
	return &structs.VolumeRequest{Name: "data", Type: structs.VolumeTypeCSI, Source: "db", PerAlloc: true,
		AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}
}

func sharedVolume() *structs.VolumeRequest {
	return &structs.VolumeRequest{Name: "data", Type: structs.VolumeTypeCSI, Source: "shared",
		AccessMode: structs.CSIVolumeAccessModeMultiNodeMultiWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}
}

func registered(id string) *structs.CSIVolume {
	return &structs.CSIVolume{ID: id, Namespace: "default", PluginID: "fakeplug", ExternalID: "ext-" + id}
}

func taskState(t *testing.T, r *Runner, task string) *structs.TaskState {
	t.Helper()
	ts := r.Alloc().TaskStates[task]
	must.NotNil(t, ts)
	return ts
}

func waitRunning(t *testing.T, r *Runner) {
	t.Helper()
	testutil.WaitForResult(t, func() (bool, error) {
		a := r.Alloc()
		for name, ts := range a.TaskStates {
			if ts.State != structs.TaskStateRunning {
				return false, fmt.Errorf("task %s is %s: %s", name, ts.State, describeEvents(a))
			}
		}
		return true, nil
	})
}

func waitTasksExited(t *testing.T, r *Runner) {
	t.Helper()
	testutil.WaitForResult(t, func() (bool, error) {
		a := r.Alloc()
		return a.TasksExited, fmt.Errorf("tasks exited not yet reported; alloc is %s: %s", a.ClientStatus, describeEvents(a))
	})
}

func describeEvents(a *structs.Allocation) string {
	var out []string
	for name, ts := range a.TaskStates {
		for _, e := range ts.Events {
			out = append(out, fmt.Sprintf("%s: %s: %s", name, e.Type, e.Message))
		}
	}
	return strings.Join(out, "; ")
}

// findEvent returns the first task event of type typ whose message
// contains sub, or nil.
func findEvent(ts *structs.TaskState, typ, sub string) *structs.TaskEvent {
	for _, e := range ts.Events {
		if e.Type == typ && strings.Contains(e.Message, sub) {
			return e
		}
	}
	return nil
}

// findEvents returns every task event of type typ whose message contains
// sub.
func findEvents(ts *structs.TaskState, typ, sub string) []*structs.TaskEvent {
	var out []*structs.TaskEvent
	for _, e := range ts.Events {
		if e.Type == typ && strings.Contains(e.Message, sub) {
			out = append(out, e)
		}
	}
	return out
}

func stop(r *Runner, a *structs.Allocation) {
	s := a.Copy()
	s.DesiredStatus = structs.AllocDesiredStatusStop
	r.Update(s)
}

func (h *csiHarness) publishPath(a *structs.Allocation, volID, usage string) string {
	return filepath.Join(h.csiRoot, "fakeplug", "per-alloc", a.ID, volID, usage)
}

func TestCSIHook_ClaimRetriesWhileNotReadyThenMounts(t *testing.T) {
	h := newCSIHarness(t, registered("db[0]"))
	blocked := structs.NewError(structs.CodeNotReady, `volume "db[0]": single-node-writer already claimed by alloc 0badc0de on node 1234abcd (in use)`)
	h.server.claimErrs = []error{blocked, blocked, structs.ErrNoLeader}
	c := h.client()
	c.registerPlugin()
	a := csiAlloc("0", perAllocVolume(), "mock")
	r := c.run(a, false)
	waitRunning(t, r)

	must.Eq(t, 4, h.server.claimCount())
	claim := h.server.claims[3]
	must.Eq(t, "db[0]", claim.VolumeID, must.Sprint("per_alloc source resolved from the alloc index"))
	must.Eq(t, a.ID, claim.AllocationID)
	must.Eq(t, "node-1", claim.NodeID)
	must.Eq(t, "fake-node", claim.ExternalNodeID)
	must.Eq(t, structs.CSIVolumeClaimWrite, claim.Mode)
	must.Eq(t, structs.CSIVolumeAccessModeSingleNodeWriter, claim.AccessMode)
	must.Eq(t, "default", claim.Namespace)

	web := taskState(t, r, "web")
	ev := findEvent(web, EventCSIVolume, "blocked")
	must.NotNil(t, ev, must.Sprintf("events: %s", describeEvents(r.Alloc())))
	must.StrContains(t, ev.Message, "already claimed by alloc 0badc0de on node 1234abcd")
	must.Eq(t, csiStepClaimBlocked, ev.Details["step"])
	must.Eq(t, "/srv/data", ev.Details["destination"])
	must.Eq(t, "db[0]", ev.Details["source"])
	must.Len(t, 1, func() []*structs.TaskEvent {
		var out []*structs.TaskEvent
		for _, e := range web.Events {
			if e.Details["step"] == csiStepClaimBlocked {
				out = append(out, e)
			}
		}
		return out
	}(), must.Sprint("one event per distinct blocking claim, not one per retry"))
	mounted := findEvent(web, EventCSIVolume, "mounted at")
	must.NotNil(t, mounted)
	must.Eq(t, csiStepMounted, mounted.Details["step"])
	must.Nil(t, findEvent(taskState(t, r, "sidecar"), EventCSIVolume, ""), must.Sprint("only tasks that mount the volume hear of it"))

	// The task got the publish path bound at its destination.
	source := h.publishPath(a, "db[0]", "rw-file-system-single-node-writer")
	cfg := h.host.Config(a.ID + "/web")
	must.Eq(t, []*drivers.MountConfig{{HostPath: source, TaskPath: "/srv/data", PropagationMode: "private"}}, cfg.Mounts)
	must.SliceEmpty(t, h.host.Config(a.ID+"/sidecar").Mounts)
	must.Eq(t, 1, h.plugin.Calls("NodeStageVolume"))
	must.Eq(t, 1, h.plugin.Calls("NodePublishVolume"))
}

// The alloc dir is not built while the Claim RPC is in flight: the
// runner starts its mkdirs once the hook says the claims are answered
// (one agent with the servers' Raft log on the same file system commits
// them with the Claim's entry otherwise). The alloc still runs.
func TestCSIHook_AllocDirWaitsForTheClaimsAnswer(t *testing.T) {
	h := newCSIHarness(t, registered("db[0]"))
	gate := make(chan struct{})
	h.server.claimGate = gate
	c := h.client()
	c.registerPlugin()
	a := csiAlloc("0", perAllocVolume(), "mock")
	r := c.run(a, false)
	testutil.WaitForResult(t, func() (bool, error) {
		h.server.lock.Lock()
		defer h.server.lock.Unlock()
		return h.server.arrived == 1, fmt.Errorf("%d claims arrived", h.server.arrived)
	})
	_, err := os.Stat(filepath.Join(h.root, a.ID))
	must.True(t, os.IsNotExist(err), must.Sprintf("the alloc dir exists while the claim is in flight (%v)", err))
	close(gate)
	waitRunning(t, r)
	_, err = os.Stat(filepath.Join(h.root, a.ID))
	must.NoError(t, err)
}

func TestCSIHook_ClaimFinalErrorFailsTheAlloc(t *testing.T) {
	h := newCSIHarness(t, registered("db[0]"))
	h.server.claimErrs = []error{structs.NewError(structs.CodeInvalid, `volume "db[0]": access mode single-node-reader-only allows no writers`)}
	c := h.client()
	c.registerPlugin()
	r := c.run(csiAlloc("0", perAllocVolume(), "mock"), false)
	testutil.WaitForResult(t, func() (bool, error) {
		return r.Alloc().ClientStatus == structs.AllocClientStatusFailed, nil
	})
	must.NotNil(t, findEvent(taskState(t, r, "web"), taskrunner.EventSetupFailure, "allows no writers"))
	waitTasksExited(t, r)
	must.Eq(t, 1, h.server.unpublished(r.ID()), must.Sprint("a claim that may have been taken is released"))
	must.Eq(t, 0, h.plugin.Calls("NodeUnpublishVolume"), must.Sprint("nothing was mounted"))
	must.Nil(t, findEvent(taskState(t, r, "web"), EventCSIVolume, "unmounted"), must.Sprintf("events: %s", describeEvents(r.Alloc())))
	must.NotNil(t, findEvent(taskState(t, r, "web"), EventCSIVolume, `Claim on volume "db[0]" released; it was never mounted`))
	// The directories made during the claim (PrepareMount) are gone.
	must.DirNotExists(t, filepath.Join(h.csiRoot, "fakeplug", "per-alloc", r.ID()))
	must.DirNotExists(t, filepath.Join(h.csiRoot, "fakeplug", "staging", "default"))
}

func TestCSIHook_WaitsForTheNodePluginThenRuns(t *testing.T) {
	h := newCSIHarness(t, registered("db[0]"))
	c := h.client()
	a := csiAlloc("0", perAllocVolume(), "mock")
	r := c.run(a, false)
	// The hook records the task event, then reports to the servers: wait
	// for both.
	testutil.WaitForResult(t, func() (bool, error) {
		return findEvent(taskState(t, r, "web"), EventCSIVolume, `Waiting up to 10s for CSI node plugin "fakeplug"`) != nil &&
				len(h.server.reports(structs.CSIClaimPhasePublish)) > 0,
			fmt.Errorf("events: %s", describeEvents(r.Alloc()))
	})
	must.Eq(t, 0, h.host.Starts(a.ID+"/web"))
	must.Eq(t, 0, h.server.claimCount(), must.Sprint("no claim before the plugin can give the node's ID"))
	must.Eq(t, 1, c.setups.underWay(), must.Sprint("the setup counts for task starts to wait on"))
	waiting := h.server.reports(structs.CSIClaimPhasePublish)
	must.Len(t, 1, waiting, must.Sprint("the reserved claim says why it waits"))
	must.Eq(t, `node plugin "fakeplug" not running on this node`, waiting[0].Error)
	must.Eq(t, 1, waiting[0].Attempts)
	must.Positive(t, waiting[0].NextRetry)
	c.registerPlugin()
	waitRunning(t, r)
	must.Eq(t, 1, h.server.claimCount())
	reports := h.server.reports(structs.CSIClaimPhasePublish)
	must.Len(t, 2, reports)
	must.Eq(t, "", reports[1].Error, must.Sprint("cleared once the plugin is there"))
	must.Eq(t, 0, c.setups.underWay(), must.Sprint("the setup ended with the Prerun"))
}

func TestCSIHook_PluginThatNeverComesFailsTheAllocClearly(t *testing.T) {
	h := newCSIHarness(t, registered("db[0]"))
	c := h.client()
	c.pluginWait = 50 * time.Millisecond
	r := c.run(csiAlloc("0", perAllocVolume(), "mock"), false)
	testutil.WaitForResult(t, func() (bool, error) {
		return r.Alloc().ClientStatus == structs.AllocClientStatusFailed, nil
	})
	ev := findEvent(taskState(t, r, "web"), taskrunner.EventSetupFailure, "")
	must.NotNil(t, ev)
	must.StrContains(t, ev.Message, `volume "data" (source "db[0]")`)
	must.StrContains(t, ev.Message, `CSI node plugin "fakeplug" is not running on this node`)
}

func TestCSIHook_DriverThatCannotMountFailsWithAClearMessage(t *testing.T) {
	h := newCSIHarness(t, registered("db[0]"))
	c := h.client()
	c.registerPlugin()
	r := c.run(csiAlloc("0", perAllocVolume(), "raw_exec"), false)
	testutil.WaitForResult(t, func() (bool, error) {
		return r.Alloc().ClientStatus == structs.AllocClientStatusFailed, nil
	})
	ev := findEvent(taskState(t, r, "web"), taskrunner.EventSetupFailure, "")
	must.NotNil(t, ev)
	must.StrContains(t, ev.Message, `task "web" uses driver "raw_exec", which cannot mount volumes; volume "data" needs a driver such as "exec"`)
	must.Eq(t, 0, h.server.claimCount())
}

func TestCheckMountSupport(t *testing.T) {
	vols := map[string]*structs.VolumeRequest{"data": perAllocVolume()}
	support := func(d string) (structs.MountConfigSupport, bool) {
		switch d {
		case "exec":
			return structs.MountConfigSupportAll, true
		case "raw_exec":
			return structs.MountConfigSupportNone, true
		}
		return "", false
	}
	cases := []struct {
		name    string
		tasks   []*structs.Task
		wantErr string
	}{
		{"mounting driver", []*structs.Task{{Name: "web", Driver: "exec", VolumeMounts: []*structs.VolumeMount{{Volume: "data"}}}}, ""},
		{"a task without the volume may use any driver", []*structs.Task{{Name: "log", Driver: "raw_exec"}}, ""},
		{"driver that cannot mount", []*structs.Task{{Name: "web", Driver: "raw_exec", VolumeMounts: []*structs.VolumeMount{{Volume: "data"}}}},
			`task "web" uses driver "raw_exec", which cannot mount volumes; volume "data" needs a driver such as "exec"`},
		{"missing driver", []*structs.Task{{Name: "web", Driver: "docker", VolumeMounts: []*structs.VolumeMount{{Volume: "data"}}}},
			`task "web" uses driver "docker", which is not available on this node; volume "data" needs a driver such as "exec"`},
		{"host volumes are not checked", []*structs.Task{{Name: "web", Driver: "raw_exec", VolumeMounts: []*structs.VolumeMount{{Volume: "host"}}}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkMountSupport(&structs.TaskGroup{Tasks: tc.tasks}, vols, support)
			if tc.wantErr == "" {
				must.NoError(t, err)
				return
			}
			must.EqError(t, err, tc.wantErr)
		})
	}
}

func TestRetryableServerError(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{structs.NewError(structs.CodeNotReady, "blocked"), true},
		{structs.ErrNoLeader, true},
		{structs.NewError(structs.CodeRetryable, "later"), true},
		{errors.New("connection refused"), true},
		{fmt.Errorf("wrapped: %w", structs.NewError(structs.CodeNotReady, "x")), true},
		{structs.NotFound("volume", "x"), false},
		{structs.NewError(structs.CodeInvalid, "bad"), false},
		{structs.NewError(structs.CodePermissionDenied, "no"), false},
	}
	for _, tc := range cases {
		t.Run(tc.err.Error(), func(t *testing.T) { must.Eq(t, tc.want, retryableServerError(tc.err)) })
	}
}

// TestCSIHook_RestoreReusesMounts: after a client restart the alloc's
// tasks keep running and its volume stays mounted: no new claim, no stage,
// no publish.
func TestCSIHook_RestoreReusesMounts(t *testing.T) {
	h := newCSIHarness(t, registered("db[0]"))
	c1 := h.client()
	c1.registerPlugin()
	a := csiAlloc("0", perAllocVolume(), "mock")
	r1 := c1.run(a, false)
	waitRunning(t, r1)
	source := h.publishPath(a, "db[0]", "rw-file-system-single-node-writer")
	h.mounts.set(source, true) // what the plugin did, as the kernel would show it
	c1.shutdown()

	c2 := h.client() // the registry is reloaded from the state: no registerPlugin
	r2 := c2.run(a, true)
	// Restored task states say running at once; the prerun's event says
	// when the hook is done.
	testutil.WaitForResult(t, func() (bool, error) {
		return findEvent(taskState(t, r2, "web"), EventCSIVolume, "Re-using") != nil, fmt.Errorf("events: %s", describeEvents(r2.Alloc()))
	})
	waitRunning(t, r2)
	must.Eq(t, 1, h.server.claimCount())
	must.Eq(t, 1, h.plugin.Calls("NodeStageVolume"))
	must.Eq(t, 1, h.plugin.Calls("NodePublishVolume"))
	must.Eq(t, 1, h.host.Starts(a.ID+"/web"), must.Sprint("re-attached, not restarted"))
	ev := findEvent(taskState(t, r2, "web"), EventCSIVolume, "Re-using")
	must.NotNil(t, ev)
	must.Eq(t, csiStepReused, ev.Details["step"])

	// And it is released normally.
	h.mounts.set(source, false)
	stop(r2, a)
	waitTasksExited(t, r2)
	must.Eq(t, 1, h.plugin.Calls("NodeUnpublishVolume"))
	must.Eq(t, 1, h.plugin.Calls("NodeUnstageVolume"))
	must.Eq(t, 1, h.server.unpublished(a.ID))
}

func TestCSIHook_RestoreRemountsWhenTheMountIsGone(t *testing.T) {
	h := newCSIHarness(t, registered("db[0]"))
	c1 := h.client()
	c1.registerPlugin()
	a := csiAlloc("0", perAllocVolume(), "mock")
	waitRunning(t, c1.run(a, false))
	c1.shutdown()

	c2 := h.client()
	r2 := c2.run(a, true)
	testutil.WaitForResult(t, func() (bool, error) {
		return len(findEvents(taskState(t, r2, "web"), EventCSIVolume, "mounted at")) == 2, fmt.Errorf("events: %s", describeEvents(r2.Alloc()))
	})
	must.Eq(t, 2, h.server.claimCount(), must.Sprint("claimed again for a fresh publish context"))
	must.Eq(t, 2, h.plugin.Calls("NodePublishVolume"))
	must.Eq(t, 1, h.plugin.Calls("NodeStageVolume"), must.Sprint("the staging is still recorded"))
}

// TestCSIHook_RestoredMountReleasedByItsExternalID: a restarted client
// finds an alloc's mount gone, and the servers refuse the alloc a new
// claim (it is stopping). The release still unpublishes what the old
// mount may have left, by the volume's external ID: the plugin knows the
// volume by no other (the simulator's seed 28 saw NodeUnpublishVolume
// name the Berth ID, which a plugin may answer NotFound, "already done",
// leaving the mount).
func TestCSIHook_RestoredMountReleasedByItsExternalID(t *testing.T) {
	h := newCSIHarness(t, registered("db[0]"))
	c1 := h.client()
	c1.registerPlugin()
	a := csiAlloc("0", perAllocVolume(), "mock")
	waitRunning(t, c1.run(a, false))
	c1.shutdown()

	h.server.claimErrs = []error{structs.NewError(structs.CodeConflict, `claiming volume "db[0]" for alloc %s: the alloc is stopping`, a.ID)}
	c2 := h.client()
	r2 := c2.run(a, true)
	waitTasksExited(t, r2)
	testutil.WaitForResult(t, func() (bool, error) {
		return h.server.unpublished(a.ID) == 1, fmt.Errorf("events: %s", describeEvents(r2.Alloc()))
	})
	must.Eq(t, 1, h.plugin.Calls("NodeUnpublishVolume"))
	req := h.plugin.LastRequest("NodeUnpublishVolume").(*csipb.NodeUnpublishVolumeRequest)
	must.Eq(t, "ext-db[0]", req.GetVolumeId())
}

// TestCSIHook_SharedStagingSurvivesRestart: two allocs share a staged
// volume; stopping one after a client restart never unstages it.
func TestCSIHook_SharedStagingSurvivesRestart(t *testing.T) {
	h := newCSIHarness(t, registered("shared"))
	c1 := h.client()
	c1.registerPlugin()
	a, b := csiAlloc("0", sharedVolume(), "mock"), csiAlloc("1", sharedVolume(), "mock")
	waitRunning(t, c1.run(a, false))
	waitRunning(t, c1.run(b, false))
	must.Eq(t, 1, h.plugin.Calls("NodeStageVolume"))
	must.Eq(t, 2, h.plugin.Calls("NodePublishVolume"))
	for _, x := range []*structs.Allocation{a, b} {
		h.mounts.set(h.publishPath(x, "shared", "rw-file-system-multi-node-multi-writer"), true)
	}
	c1.shutdown()

	c2 := h.client()
	ra, rb := c2.run(a, true), c2.run(b, true)
	// Restored tasks run at once; wait for the csi hook to have re-used
	// the mounts too, before the test unmounts them.
	for _, r := range []*Runner{ra, rb} {
		testutil.WaitForResult(t, func() (bool, error) {
			return findEvent(taskState(t, r, "web"), EventCSIVolume, "Re-using") != nil, fmt.Errorf("events: %s", describeEvents(r.Alloc()))
		})
	}
	waitRunning(t, ra)
	waitRunning(t, rb)
	h.mounts.set(h.publishPath(a, "shared", "rw-file-system-multi-node-multi-writer"), false)
	stop(ra, a)
	waitTasksExited(t, ra)
	must.Eq(t, 1, h.plugin.Calls("NodeUnpublishVolume"))
	must.Eq(t, 0, h.plugin.Calls("NodeUnstageVolume"), must.Sprint("b still uses the staging"))
	must.Eq(t, 1, h.server.unpublished(a.ID))
	must.NotNil(t, findEvent(taskState(t, ra, "web"), EventCSIVolume, "unmounted and released"), must.Sprintf("events: %s", describeEvents(ra.Alloc())))

	h.mounts.set(h.publishPath(b, "shared", "rw-file-system-multi-node-multi-writer"), false)
	stop(rb, b)
	waitTasksExited(t, rb)
	must.Eq(t, 1, h.plugin.Calls("NodeUnstageVolume"), must.Sprint("the last user unstages"))
	must.Eq(t, 1, h.server.unpublished(b.ID))
}

func TestCSIHook_PostrunRetriesTransientFailures(t *testing.T) {
	h := newCSIHarness(t, registered("db[0]"))
	h.server.unpublishErrs = []error{structs.ErrNoLeader}
	c := h.client()
	c.registerPlugin()
	a := csiAlloc("0", perAllocVolume(), "mock")
	r := c.run(a, false)
	waitRunning(t, r)
	h.plugin.NextErr("NodeUnpublishVolume", codes.Internal)
	stop(r, a)
	waitTasksExited(t, r)
	must.Eq(t, 2, h.plugin.Calls("NodeUnpublishVolume"), must.Sprint("failed once, then retried"))
	must.Eq(t, 1, h.plugin.Calls("NodeUnstageVolume"))
	must.Eq(t, 2, h.server.unpublished(a.ID), must.Sprint("no leader once, then retried"))
	ev := findEvent(taskState(t, r, "web"), EventCSIVolume, `Release of volume "db[0]" pending: `)
	must.NotNil(t, ev, must.Sprintf("events: %s", describeEvents(r.Alloc())))
	must.Eq(t, csiStepReleasePending, ev.Details["step"])
	reports := h.server.reports(structs.CSIClaimPhaseUnpublish)
	must.Len(t, 2, reports, must.Sprint("one report per failed attempt"))
	must.StrContains(t, reports[0].Error, "unpublishing from")
	must.Eq(t, 1, reports[0].Attempts)
	must.StrContains(t, reports[1].Error, structs.ErrNoLeader.Error())
	must.Eq(t, 2, reports[1].Attempts)
	must.Len(t, 1, findEvents(taskState(t, r, "web"), EventCSIVolume, "unmounted and released"))
}

// TestCSIHook_ReleaseEventsTellTheTruth: while the node plugin is gone the
// release is reported pending with that reason, and "released" comes only
// after the plugin is back and unpublished the volume.
func TestCSIHook_ReleaseEventsTellTheTruth(t *testing.T) {
	h := newCSIHarness(t, registered("db[0]"))
	c := h.client()
	c.registerPlugin()
	a := csiAlloc("0", perAllocVolume(), "mock")
	r := c.run(a, false)
	waitRunning(t, r)
	must.NoError(t, c.registry.Deregister(dynamicplugins.PluginTypeCSINode, "fakeplug", "plugin-alloc"))
	testutil.WaitForResult(t, func() (bool, error) {
		_, ok := c.mgr.NodePlugin("fakeplug")
		return !ok, nil
	})
	stop(r, a)
	testutil.WaitForResult(t, func() (bool, error) {
		ev := findEvent(taskState(t, r, "web"), EventCSIVolume, `Release of volume "db[0]" pending: node plugin "fakeplug" not running on this node`)
		return ev != nil && ev.Details["step"] == csiStepReleasePending, fmt.Errorf("events: %s", describeEvents(r.Alloc()))
	})
	must.Nil(t, findEvent(taskState(t, r, "web"), EventCSIVolume, "released"), must.Sprint("nothing is released while the plugin is gone"))
	must.False(t, r.Alloc().TasksExited)
	// The servers hear of it too: step, attempts, error and next retry.
	reports := h.server.reports(structs.CSIClaimPhaseUnpublish)
	must.SliceNotEmpty(t, reports)
	rep := reports[0]
	must.Eq(t, "db[0]", rep.VolumeID)
	must.Eq(t, a.ID, rep.AllocationID)
	must.Eq(t, "node-1", rep.NodeID)
	must.Eq(t, "default", rep.Namespace)
	must.Eq(t, 1, rep.Attempts)
	must.StrContains(t, rep.Error, `node plugin "fakeplug" not running on this node`)
	must.Greater(t, time.Now().UnixNano(), rep.NextRetry, must.Sprint("the next retry is in the future"))
	must.Eq(t, 0, h.plugin.Calls("NodeUnpublishVolume"))
	must.Eq(t, 0, h.server.unpublished(a.ID))

	c.registerPlugin()
	waitTasksExited(t, r)
	ev := findEvent(taskState(t, r, "web"), EventCSIVolume, `Volume "db[0]" unmounted and released`)
	must.NotNil(t, ev, must.Sprintf("events: %s", describeEvents(r.Alloc())))
	must.Eq(t, csiStepReleased, ev.Details["step"])
	must.Eq(t, 1, h.plugin.Calls("NodeUnpublishVolume"))
	must.Eq(t, 1, h.server.unpublished(a.ID))
}

func TestReleasedText(t *testing.T) {
	must.Eq(t, `Volume "v" unmounted and released`, releasedText("v", csiVolumeMounted))
	for _, step := range []string{csiVolumeClaiming, csiVolumeMounting, csiVolumeUnmounted} {
		must.StrNotContains(t, releasedText("v", step), "unmounted and released", must.Sprint(step))
	}
	must.Eq(t, `Claim on volume "v" released; it was never mounted`, releasedText("v", csiVolumeClaiming))
}

// TestCSIHook_ShutdownIsPromptWhileThePluginHangs: a client shutting down
// during a release that hangs in the plugin returns at once, and the next
// client process finishes the release.
func TestCSIHook_ShutdownIsPromptWhileThePluginHangs(t *testing.T) {
	h := newCSIHarness(t, registered("db[0]"))
	c1 := h.client()
	c1.registerPlugin()
	a := csiAlloc("0", perAllocVolume(), "mock")
	r := c1.run(a, false)
	waitRunning(t, r)
	h.plugin.SetHang("NodeUnpublishVolume", true)
	stop(r, a)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	must.NoError(t, h.plugin.WaitForCalls(ctx, "NodeUnpublishVolume", 1))

	// NodeUnpublish hangs until SetHang(false) below: a Shutdown that
	// waited on it would never return (nor, with no deadline of its own,
	// end with an error).
	testutil.Returns(t, "shutting the alloc runner down while NodeUnpublish hangs", func() {
		must.NoError(t, r.Shutdown(context.Background()))
	})
	c1.shutdown()
	must.False(t, r.Alloc().TasksExited)
	must.Eq(t, 0, h.server.unpublished(a.ID))

	h.plugin.SetHang("NodeUnpublishVolume", false)
	c2 := h.client()
	r2 := c2.run(a, true)
	r2.Update(func() *structs.Allocation { s := a.Copy(); s.DesiredStatus = structs.AllocDesiredStatusStop; return s }())
	waitTasksExited(t, r2)
	must.Eq(t, 1, h.server.unpublished(a.ID))
	must.Eq(t, 1, h.plugin.Calls("NodeUnstageVolume"))
}

// TestCSIHook_PostrunAfterShutdownKeepsVolumesPending: a hook shut down
// (its release goroutines cancelled) never lets the runner record
// TasksExited with volumes still taken, or the next client process would
// never release them.
func TestCSIHook_PostrunAfterShutdownKeepsVolumesPending(t *testing.T) {
	db := state.NewMemDB()
	a := csiAlloc("0", perAllocVolume(), "mock")
	must.NoError(t, db.PutAlloc(a))
	data := hookData{db: db, allocID: a.ID}
	st := &csiHookState{Volumes: map[string]*csiVolumeState{"data": {Step: csiVolumeMounted, Source: "db[0]", Namespace: "default", PluginID: "fakeplug"}}}
	raw, err := st.encode()
	must.NoError(t, err)
	must.NoError(t, data.Save(csiHookName, raw))

	hook := NewCSIHookFactory(CSIHookConfig{})(&HookConfig{Alloc: a, Data: data, Logger: testlog.Logger(t), Restored: true})
	hook.(ShutdownHook).Shutdown(context.Background())
	err = hook.(PostrunHook).Postrun(context.Background())
	must.ErrorContains(t, err, `volume "data" (source "db[0]")`)
}

// TestCSIHook_SecondAllocOfAVolumeSkipsTheLookup: the first alloc of a
// volume reads it (CSIVolume.Get) to find its plugin; the next alloc of the
// same volume on this client claims at once, through the plugin the last
// claim named.
func TestCSIHook_SecondAllocOfAVolumeSkipsTheLookup(t *testing.T) {
	h := newCSIHarness(t, registered("shared"))
	c := h.client()
	c.registerPlugin()
	gets := func() int {
		h.server.lock.Lock()
		defer h.server.lock.Unlock()
		return h.server.gets
	}
	first := c.run(csiAlloc("0", sharedVolume(), "mock"), false)
	waitRunning(t, first)
	must.Eq(t, 1, gets())
	second := c.run(csiAlloc("1", sharedVolume(), "mock"), false)
	waitRunning(t, second)
	must.Eq(t, 1, gets(), must.Sprint("the second alloc of the volume looked it up again"))
	must.Eq(t, 2, h.server.claimCount())
}

// TestCSIHook_AVolumeThatChangedPluginIsClaimedAgainThroughTheNewOne: when
// the remembered plugin is not the volume's any more, the Claim reply says
// so and the hook claims again with the new plugin's node ID, then mounts
// through it.
func TestCSIHook_AVolumeThatChangedPluginIsClaimedAgainThroughTheNewOne(t *testing.T) {
	h := newCSIHarness(t, registered("shared"))
	c := h.client()
	c.registerPlugin()
	must.NoError(t, c.registry.Register(&dynamicplugins.PluginInfo{
		Name: "oldplug", Type: dynamicplugins.PluginTypeCSINode, SocketPath: h.sock, AllocID: "old-plugin-alloc",
	}))
	testutil.WaitForResult(t, func() (bool, error) {
		_, ok := c.mgr.NodePlugin("oldplug")
		return ok, errors.New("oldplug not ready")
	})
	c.plugins.set("default", "shared", "oldplug")
	a := csiAlloc("0", sharedVolume(), "mock")
	r := c.run(a, false)
	waitRunning(t, r)
	must.Eq(t, 2, h.server.claimCount(), must.Sprint("the claim through the stale plugin was not made again"))
	must.Eq(t, "fakeplug", c.plugins.get("default", "shared"))
	must.StrContains(t, h.host.Config(a.ID + "/web").Mounts[0].HostPath, filepath.Join(h.csiRoot, "fakeplug"))
}
