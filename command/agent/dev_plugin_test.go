package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil"
)

func TestDevPluginJob(t *testing.T) {
	job := devPluginJob("/opt/berth/bin/berth", "/tmp/dev/hostpath")
	must.NoError(t, job.Validate())
	must.EqOp(t, DevPluginJobID, job.ID)
	must.EqOp(t, structs.JobTypeSystem, job.Type)
	must.SliceLen(t, 1, job.TaskGroups)
	must.SliceLen(t, 1, job.TaskGroups[0].Tasks)
	task := job.TaskGroups[0].Tasks[0]
	must.EqOp(t, "raw_exec", task.Driver)
	must.Eq[any](t, "/opt/berth/bin/berth", task.Config["command"], must.Sprint("the agent's own executable, not berth from PATH"))
	must.Eq[any](t, []any{"plugin", "hostpath", "-mode", "monolith", "-static-volumes",
		"-root", "/tmp/dev/hostpath", "-node-id", "${node.unique.id}"}, task.Config["args"])
	must.NotNil(t, task.CSIPluginConfig)
	must.EqOp(t, DevPluginID, task.CSIPluginConfig.ID)
	must.EqOp(t, structs.CSIPluginTypeMonolith, task.CSIPluginConfig.Type)
	must.EqOp(t, "/csi", task.CSIPluginConfig.MountDir)
	must.EqOp(t, "/tmp/dev/hostpath", devPluginArg(job, "-root"))
}

// fakeDevServer answers the registrar's RPCs like the agent's server.
type fakeDevServer struct {
	// lock guards every field.
	lock sync.Mutex
	// nodeReadyAfter GetNode calls answer no node (the server is still
	// electing itself, then the node has not registered yet).
	nodeReadyAfter int
	// existing is the job GetJob returns.
	existing *structs.Job
	// registerErrs are returned by the next Register calls, in order.
	registerErrs []error
	calls        map[string]int
	registered   *structs.Job
}

var errNoLeaderYet = errors.New("no cluster leader")

func (f *fakeDevServer) RPC(method string, args, reply any) error {
	f.lock.Lock()
	defer f.lock.Unlock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[method]++
	switch method {
	case "Node.GetNode":
		req := args.(*structs.NodeSpecificRequest)
		switch n := f.calls[method]; {
		case n == 1:
			return errNoLeaderYet
		case n <= f.nodeReadyAfter:
			return nil
		}
		reply.(*structs.SingleNodeResponse).Node = &structs.Node{ID: req.NodeID, Status: structs.NodeStatusReady}
	case "Job.GetJob":
		reply.(*structs.SingleJobResponse).Job = f.existing.Copy()
	case "Job.Register":
		if len(f.registerErrs) > 0 {
			err := f.registerErrs[0]
			f.registerErrs = f.registerErrs[1:]
			return err
		}
		f.registered = args.(*structs.JobRegisterRequest).Job
	default:
		return fmt.Errorf("unexpected RPC %s", method)
	}
	return nil
}

func (f *fakeDevServer) count(method string) int {
	f.lock.Lock()
	defer f.lock.Unlock()
	return f.calls[method]
}

func TestDevPluginRegistrar(t *testing.T) {
	job := devPluginJob("/bin/berth", "/tmp/root")
	stopped := job.Copy()
	stopped.Stop = true
	other := job.Copy()
	other.TaskGroups[0].Tasks[0].Config["command"] = "/usr/local/bin/berth"
	cases := []struct {
		name         string
		srv          *fakeDevServer
		wantRegister int // Register calls
		wantJob      *structs.Job
	}{
		{name: "waits for the leader and the node, then registers",
			srv: &fakeDevServer{nodeReadyAfter: 3}, wantRegister: 1, wantJob: job},
		{name: "already registered: left as it is",
			srv: &fakeDevServer{existing: other}, wantRegister: 0},
		{name: "stopped: registered again",
			srv: &fakeDevServer{existing: stopped}, wantRegister: 1, wantJob: job},
		{name: "a failed register is retried",
			srv:          &fakeDevServer{registerErrs: []error{errNoLeaderYet, structs.NewError(structs.CodeInternal, "raft apply timed out")}},
			wantRegister: 3, wantJob: job},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &devPluginRegistrar{
				rpc: tc.srv.RPC, nodeID: "node-1", region: "global",
				backoff:   helper.Backoff{Base: time.Millisecond, Max: time.Millisecond, NoJitter: true},
				warnAfter: time.Hour, logger: hclog.NewNullLogger(),
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			must.NoError(t, r.run(ctx, job))
			must.EqOp(t, tc.wantRegister, tc.srv.count("Job.Register"))
			must.Eq(t, tc.wantJob, tc.srv.registered)
		})
	}
}

// A job the servers refuse is not retried: the error says why.
func TestDevPluginRegistrar_InvalidIsFinal(t *testing.T) {
	srv := &fakeDevServer{registerErrs: []error{structs.NewError(structs.CodeInvalid, "job %q: bad", "hostpath")}}
	r := &devPluginRegistrar{
		rpc: srv.RPC, nodeID: "node-1", region: "global",
		backoff:   helper.Backoff{Base: time.Millisecond, Max: time.Millisecond, NoJitter: true},
		warnAfter: time.Hour, logger: hclog.NewNullLogger(),
	}
	err := r.run(context.Background(), devPluginJob("/bin/berth", "/tmp/root"))
	must.ErrorIs(t, err, structs.ErrInvalid)
	must.ErrorContains(t, err, `registering job "hostpath"`)
	must.EqOp(t, 1, srv.count("Job.Register"))
}

// The registration never outlives the agent: cancelling it returns at
// once, even while the node never becomes ready.
func TestDevPluginRegistrar_CancelStops(t *testing.T) {
	srv := &fakeDevServer{nodeReadyAfter: 1 << 30}
	r := &devPluginRegistrar{
		rpc: srv.RPC, nodeID: "node-1", region: "global",
		backoff:   helper.Backoff{Base: time.Millisecond, Max: time.Millisecond, NoJitter: true},
		warnAfter: time.Hour, logger: hclog.NewNullLogger(),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.run(ctx, devPluginJob("/bin/berth", "/tmp/root")) }()
	testutil.WaitForResult(t, func() (bool, error) {
		return srv.count("Node.GetNode") >= 3, fmt.Errorf("GetNode called %d times", srv.count("Node.GetNode"))
	})
	cancel()
	select {
	case err := <-done:
		must.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("the registration did not stop when cancelled")
	}
	must.EqOp(t, 0, srv.count("Job.Register"))
}

// startDevPluginAgent starts a -dev agent on free ports that runs the dev
// plugin from the real berth binary.
func startDevPluginAgent(t *testing.T, dp *DevPluginConfig, dataDir string) *Agent {
	t.Helper()
	cfg := DevConfig()
	cfg.Ports = &Ports{HTTP: intPtr(0), RPC: intPtr(0)}
	cfg.LogLevel = "OFF"
	cfg.DataDir = dataDir
	cfg.DevPlugin = dp
	a, err := NewAgent(cfg, io.Discard)
	must.NoError(t, err)
	t.Cleanup(func() { a.Shutdown() })
	return a
}

// End to end: a -dev agent runs the hostpath plugin from its own binary,
// and within seconds the servers see it healthy as controller and node.
func TestAgent_DevPluginHealthy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the hostpath plugin's node service reports unhealthy without CAP_SYS_ADMIN")
	}
	exe := testutil.BuildBerth(t)
	a := startDevPluginAgent(t, &DevPluginConfig{Executable: exe}, "")
	root := a.DevPluginRoot()
	must.StrHasPrefix(t, os.TempDir(), root, must.Sprint("without a data dir, the root is a temporary dir"))
	must.NoError(t, a.DevPluginMountError())

	testutil.WaitForResult(t, func() (bool, error) {
		p, err := a.Server().State().CSIPluginByID(nil, DevPluginID)
		if err != nil || p == nil {
			return false, fmt.Errorf("plugin %q: %v, %v", DevPluginID, p, err)
		}
		ok := p.ControllersHealthy == 1 && p.ControllersExpected == 1 && p.NodesHealthy == 1 && p.NodesExpected == 1
		return ok, fmt.Errorf("controllers %d/%d, nodes %d/%d: %v %v", p.ControllersHealthy, p.ControllersExpected,
			p.NodesHealthy, p.NodesExpected, healthDescriptions(p.Controllers), healthDescriptions(p.Nodes))
	})
	job, err := a.Server().State().JobByID(nil, structs.DefaultNamespace, DevPluginJobID)
	must.NoError(t, err)
	must.NotNil(t, job)
	must.Eq[any](t, exe, job.TaskGroups[0].Tasks[0].Config["command"])

	// Starting the registration again (a restarted registration) leaves
	// the job as it is.
	before := job.JobModifyIndex
	reg := &devPluginRegistrar{rpc: a.RPC, nodeID: a.client.NodeID(), region: "global",
		backoff: devPluginRetry, warnAfter: time.Hour, logger: hclog.NewNullLogger()}
	must.NoError(t, reg.run(context.Background(), devPluginJob(exe, root)))
	job, err = a.Server().State().JobByID(nil, structs.DefaultNamespace, DevPluginJobID)
	must.NoError(t, err)
	must.EqOp(t, before, job.JobModifyIndex)

	must.NoError(t, a.Shutdown())
	_, err = os.Stat(root)
	must.True(t, os.IsNotExist(err), must.Sprintf("the temporary root %s is removed at shutdown: %v", root, err))
}

func healthDescriptions(m map[string]*structs.CSIInfo) []string {
	var out []string
	for _, info := range m {
		out = append(out, info.HealthDescription)
	}
	return out
}

// With a data dir, the root is <data_dir>/hostpath and outlives the agent.
// The agent starts at once: it does not wait for the plugin.
func TestAgent_DevPluginRootInDataDir(t *testing.T) {
	dataDir := t.TempDir()
	// A missing executable fails only the plugin task, not the agent.
	a := startDevPluginAgent(t, &DevPluginConfig{Executable: "/nonexistent/berth"}, dataDir)
	must.EqOp(t, filepath.Join(dataDir, "hostpath"), a.DevPluginRoot())
	must.NoError(t, a.Shutdown())
	fi, err := os.Stat(filepath.Join(dataDir, "hostpath"))
	must.NoError(t, err)
	must.True(t, fi.IsDir())
}

// Without DevPlugin (tests, -dev-no-plugin), a dev agent runs no plugin.
func TestAgent_DevWithoutPlugin(t *testing.T) {
	a := newDevAgent(t)
	must.EqOp(t, "", a.DevPluginRoot())
	must.NoError(t, a.DevPluginMountError())
}
