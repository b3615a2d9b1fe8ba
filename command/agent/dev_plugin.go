package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/client/pluginmanager/csimanager"
	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi/hostpath"
)

// The dev plugin: a -dev agent runs Berth's own hostpath CSI plugin, so that
// volumes work out of the box (make dev, then berth volume register). Once
// its server leads and its client's node is registered, the agent
// registers, through its own server, the system job
//
//	job "hostpath" { type = "system"
//	  task "plugin" { driver = "raw_exec"
//	    config { command = <this executable>
//	             args = ["plugin", "hostpath", "-mode", "monolith", "-static-volumes",
//	                     "-root", <root>, "-node-id", "${node.unique.id}"] }
//	    csi_plugin { id = "hostpath", type = "monolith", mount_dir = "/csi" } } }
//
// like examples/hostpath-plugin.hcl, but running the agent's own binary
// instead of whatever `berth` is on PATH.

// Names of the dev plugin's job, group, task and plugin.
const (
	DevPluginJobID    = "hostpath"
	DevPluginID       = "hostpath"
	devPluginGroup    = "hostpath"
	devPluginTask     = "plugin"
	devPluginRootName = "hostpath"
)

// DevPluginConfig turns on the dev plugin (with DevMode; `agent -dev` sets
// it unless -dev-no-plugin is given).
type DevPluginConfig struct {
	// Executable is the berth binary the plugin task runs: the agent's own
	// (os.Executable), so the plugin always matches the agent.
	Executable string
	// Root is the plugin's -root, where volumes live. Empty means
	// <data_dir>/hostpath, or without a data_dir a temporary dir that the
	// agent removes at shutdown.
	Root string
}

// devPluginRetry paces the registration's attempts while the server elects
// itself and the node registers, and after failures.
var devPluginRetry = helper.Backoff{Base: 25 * time.Millisecond, Max: time.Second}

// devPluginWarnAfter is when a registration still not done is logged as a
// warning, with the last error, instead of at debug level.
const devPluginWarnAfter = 15 * time.Second

// devPlugin is the state of the agent's dev plugin.
type devPlugin struct {
	// root is the plugin's -root; tmpRoot is set when the agent made it and
	// removes it at shutdown.
	root    string
	tmpRoot bool
	// mountErr is why this process cannot make bind mounts, or nil: the
	// plugin then runs but reports its node service unhealthy.
	mountErr error

	cancel context.CancelFunc
	done   chan struct{}
}

// DevPluginRoot is the dev plugin's root directory ("" when the agent runs
// no dev plugin); volumes are directories under its volumes/ dir.
func (a *Agent) DevPluginRoot() string {
	if a.devPlugin == nil {
		return ""
	}
	return a.devPlugin.root
}

// DevPluginMountError says why the dev plugin cannot mount volumes (the
// agent is not root), or is nil.
func (a *Agent) DevPluginMountError() error {
	if a.devPlugin == nil {
		return nil
	}
	return a.devPlugin.mountErr
}

// startDevPlugin prepares the plugin's root and starts registering its job
// in a goroutine the agent owns (stopDevPlugin ends it). It never waits for
// the server or the client: agent startup does not block on the plugin.
func (a *Agent) startDevPlugin() error {
	cfg := a.config.DevPlugin
	if cfg.Executable == "" {
		return errors.New("dev plugin: the agent's executable is unknown; run with -dev-no-plugin")
	}
	dp := &devPlugin{root: cfg.Root, done: make(chan struct{})}
	switch {
	case dp.root != "":
	case a.config.DataDir != "":
		dp.root = filepath.Join(a.config.DataDir, devPluginRootName)
	default:
		dir, err := os.MkdirTemp("", "berth-dev-hostpath-")
		if err != nil {
			return fmt.Errorf("dev plugin: creating its root dir: %w", err)
		}
		dp.root, dp.tmpRoot = dir, true
	}
	root, err := filepath.Abs(dp.root)
	if err != nil {
		return fmt.Errorf("dev plugin: root dir %q: %w", dp.root, err)
	}
	dp.root = root
	if err := os.MkdirAll(dp.root, 0o750); err != nil {
		return fmt.Errorf("dev plugin: creating its root dir: %w", err)
	}
	logger := a.logger.Named("dev_plugin").With("plugin_id", DevPluginID)
	if dp.mountErr = hostpath.CheckMountPrivileges(); dp.mountErr != nil {
		logger.Warn("the hostpath plugin will run, but volumes cannot be mounted; berth plugin status hostpath shows why", "error", dp.mountErr)
	}
	job := devPluginJob(cfg.Executable, dp.root)
	reg := &devPluginRegistrar{
		rpc: a.RPC, nodeID: a.client.NodeID(), region: a.config.Region,
		backoff: devPluginRetry, warnAfter: devPluginWarnAfter, logger: logger,
	}
	ctx, cancel := context.WithCancel(context.Background())
	dp.cancel = cancel
	a.devPlugin = dp
	go func() {
		defer close(dp.done)
		if err := reg.run(ctx, job); err != nil && !errors.Is(err, context.Canceled) {
			logger.Error("the hostpath plugin job was not registered", "error", err)
		}
	}()
	return nil
}

// stopDevPlugin stops the registration goroutine and waits for it, up to
// ctx: an in-process RPC in flight cannot be cancelled, but ends with the
// server. Safe to call when no dev plugin runs, and twice.
func (a *Agent) stopDevPlugin(ctx context.Context) {
	dp := a.devPlugin
	if dp == nil {
		return
	}
	dp.cancel()
	select {
	case <-dp.done:
	case <-ctx.Done():
		a.logger.Warn("the dev plugin's registration did not stop in time")
	}
}

// removeDevPluginRoot removes a root the agent made, once the client has
// stopped the plugin task. The client's staging and publish mounts live in
// the client's data dir, not here; detaching whatever is mounted below
// keeps RemoveAll from reaching through a mount all the same.
func (a *Agent) removeDevPluginRoot() {
	dp := a.devPlugin
	if dp == nil || !dp.tmpRoot {
		return
	}
	if err := csimanager.DetachMountsUnder(dp.root); err != nil {
		a.logger.Error("leaving the dev plugin's root dir: mounts remain under it", "path", dp.root, "error", err)
		return
	}
	if err := os.RemoveAll(dp.root); err != nil {
		a.logger.Warn("removing the dev plugin's root dir failed", "path", dp.root, "error", err)
	}
	dp.tmpRoot = false
}

// devPluginJob is the system job that runs the hostpath plugin, in
// monolith mode, from executable, with its volumes under root. It is pure.
//
// -static-volumes: volumes registered with `berth volume register` (the
// README's walk-through) are created empty on first use, as node mode
// does; a monolith controller would otherwise not know them.
func devPluginJob(executable, root string) *structs.Job {
	job := &api.Job{
		ID:   ptr(DevPluginJobID),
		Type: ptr(api.JobTypeSystem),
		TaskGroups: []*api.TaskGroup{{
			Name: ptr(devPluginGroup),
			Tasks: []*api.Task{{
				Name:   devPluginTask,
				Driver: "raw_exec",
				Config: map[string]any{
					"command": executable,
					"args": []any{"plugin", "hostpath", "-mode", string(hostpath.ModeMonolith), "-static-volumes",
						"-root", root, "-node-id", "${node.unique.id}"},
				},
				CSIPluginConfig: &api.TaskCSIPluginConfig{
					ID: DevPluginID, Type: api.CSIPluginTypeMonolith, MountDir: "/csi",
				},
				Resources: &api.Resources{CPU: ptr(100), MemoryMB: ptr(64)},
			}},
		}},
	}
	job.Canonicalize()
	return apiJobToStructs(job)
}

// devPluginRegistrar registers the dev plugin's job through the agent's
// server once that server leads and the agent's node is ready.
type devPluginRegistrar struct {
	// rpc calls the agent's own server in process.
	rpc       func(method string, args, reply any) error
	nodeID    string
	region    string
	backoff   helper.Backoff
	warnAfter time.Duration
	logger    hclog.Logger
}

// errDevNodeNotReady is a registration attempt made before the agent's
// node registered and became ready.
var errDevNodeNotReady = errors.New("the agent's node is not registered and ready yet")

// run tries until the job is registered (or already there), or ctx ends.
// It is idempotent: a job "hostpath" that is registered and not stopped is
// left as it is, whoever registered it (an operator may have changed it).
func (r *devPluginRegistrar) run(ctx context.Context, job *structs.Job) error {
	start := time.Now()
	warned := false
	for attempt := 0; ; attempt++ {
		registered, err := r.try(job)
		if err == nil {
			if registered {
				r.logger.Info("registered the hostpath CSI plugin job", "job_id", job.ID, "root", devPluginArg(job, "-root"))
			} else {
				r.logger.Info("the hostpath plugin job is already registered; leaving it as it is", "job_id", job.ID)
			}
			return nil
		}
		switch {
		case errors.Is(err, structs.ErrInvalid), errors.Is(err, structs.ErrPermissionDenied):
			// Trying again cannot help: the job or the request is wrong.
			return err
		case !warned && time.Since(start) >= r.warnAfter:
			warned = true
			r.logger.Warn("still waiting to register the hostpath plugin job", "error", err, "waited", time.Since(start).Round(time.Second))
		default:
			r.logger.Debug("registering the hostpath plugin job: will retry", "error", err)
		}
		t := time.NewTimer(r.backoff.Delay(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// try makes one attempt: it reports whether it registered the job; nil
// with false means the job was already there.
func (r *devPluginRegistrar) try(job *structs.Job) (bool, error) {
	var node structs.SingleNodeResponse
	if err := r.rpc("Node.GetNode", &structs.NodeSpecificRequest{
		NodeID: r.nodeID, QueryOptions: structs.QueryOptions{Region: r.region},
	}, &node); err != nil {
		return false, fmt.Errorf("reading node %s: %w", r.nodeID, err)
	}
	if node.Node == nil || node.Node.Status != structs.NodeStatusReady {
		return false, errDevNodeNotReady
	}
	var existing structs.SingleJobResponse
	if err := r.rpc("Job.GetJob", &structs.JobSpecificRequest{
		JobID: job.ID, QueryOptions: structs.QueryOptions{Region: r.region, Namespace: job.Namespace},
	}, &existing); err != nil && !isNotFound(err) {
		return false, fmt.Errorf("reading job %q: %w", job.ID, err)
	}
	if j := existing.Job; j != nil && j.ID == job.ID && !j.Stop {
		return false, nil
	}
	var reply structs.JobRegisterResponse
	if err := r.rpc("Job.Register", &structs.JobRegisterRequest{
		Job: job, WriteRequest: structs.WriteRequest{Region: r.region, Namespace: job.Namespace},
	}, &reply); err != nil {
		return false, fmt.Errorf("registering job %q: %w", job.ID, err)
	}
	return true, nil
}

// isNotFound reports whether err is the servers' "not found".
func isNotFound(err error) bool { return errors.Is(err, structs.ErrNotFound) }

// devPluginArg returns the value after flag in the plugin task's args.
func devPluginArg(job *structs.Job, flag string) string {
	args, _ := job.TaskGroups[0].Tasks[0].Config["args"].([]any)
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag {
			s, _ := args[i+1].(string)
			return s
		}
	}
	return ""
}
