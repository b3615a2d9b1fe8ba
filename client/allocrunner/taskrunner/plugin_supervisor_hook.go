package taskrunner

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/client/dynamicplugins"
	"github.com/berth-io/berth/client/pluginmanager/csimanager"
	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi"
	"github.com/berth-io/berth/plugins/drivers"
)

// PluginSupervisorConfig is what the client gives every plugin_supervisor
// hook.
type PluginSupervisorConfig struct {
	Registry *dynamicplugins.Registry
	// Root is <data_dir>/client/csi: plugin sockets go under Root/p, and
	// plugin P's staging and publish paths under Root/P.
	Root string
	// Drivers are the node's drivers: a plugin task whose driver can mount
	// (exec) gets its directories bound in; one whose driver cannot
	// (raw_exec) sees host paths.
	Drivers map[string]drivers.Driver
	// ProbeInterval is how often a healthy plugin is probed (default 5s).
	ProbeInterval time.Duration
	// StartupBackoff paces probes until the plugin is first healthy
	// (default 50ms doubling to 1s).
	StartupBackoff helper.Backoff
	// CSIOptions configure the plugin client.
	CSIOptions []csi.Option
}

// Defaults of the plugin supervisor.
const (
	DefaultPluginProbeInterval = 5 * time.Second
	DefaultPluginHealthTimeout = 30 * time.Second
	// DefaultPluginMountDir and DefaultPluginStagePublishBaseDir are the
	// in-task paths of a plugin whose driver mounts (Nomad's defaults).
	DefaultPluginMountDir            = "/csi"
	DefaultPluginStagePublishBaseDir = "/local/csi"
	// PluginSocketName is the socket's name in the socket dir.
	PluginSocketName = "csi.sock"
)

// DefaultPluginStartupBackoff paces probes of a starting plugin.
var DefaultPluginStartupBackoff = helper.Backoff{Base: 50 * time.Millisecond, Max: time.Second}

// NewPluginSupervisorHookFactory returns the factory of the
// plugin_supervisor hook, which runs a task with a csi_plugin block as a
// CSI plugin. Other tasks get a hook that does nothing.
func NewPluginSupervisorHookFactory(cfg PluginSupervisorConfig) HookFactory {
	if cfg.ProbeInterval <= 0 {
		cfg.ProbeInterval = DefaultPluginProbeInterval
	}
	if cfg.StartupBackoff.Base <= 0 {
		cfg.StartupBackoff = DefaultPluginStartupBackoff
	}
	// The supervisor paces its own probes: one attempt per probe, so a
	// plugin that is not listening yet is seen as such at once.
	cfg.CSIOptions = append([]csi.Option{csi.WithMaxAttempts(1)}, cfg.CSIOptions...)
	return func(hc *HookConfig) Hook {
		if hc.Task.CSIPluginConfig == nil {
			return noopHook("plugin_supervisor")
		}
		return &pluginSupervisorHook{
			cfg: cfg, alloc: hc.Alloc, task: hc.Task, pc: hc.Task.CSIPluginConfig, lifecycle: hc.Lifecycle,
			logger: hc.Logger.Named("plugin_supervisor").With("plugin_id", hc.Task.CSIPluginConfig.ID),
		}
	}
}

// noopHook implements no phase.
type noopHook string

func (h noopHook) Name() string { return string(h) }

// pluginSupervisorHook supervises one CSI plugin task:
//
//	Prestart:  socket dir (short host path), CSI_ENDPOINT, and for a driver
//	           that mounts, the socket dir at mount_dir and the staging and
//	           publish base at stage_publish_base_dir (bidirectional)
//	Poststart: goroutine (owned by the hook):
//	             probe until healthy ──health_timeout──► restart the task
//	               │ healthy
//	               ▼
//	             GetPluginInfo ─► register (monolith: node and controller)
//	               ─► "Plugin became healthy" ─► probe every ProbeInterval,
//	               an event on every change of health
//	Exited, Stop: stop the goroutine, deregister (Stop: remove the socket dir)
//	Shutdown:  stop the goroutine; stay registered (the task keeps running
//	           and the registry is persisted for the next client process)
//
// Paths: the client computes every staging and publish path on the host,
// under Root/<plugin_id>. A raw_exec plugin sees the host's mount namespace,
// so it is handed those host paths as they are; an exec plugin has its own
// root, where Root/<plugin_id> appears at stage_publish_base_dir, and the
// csimanager rewrites each host path to that in-task base before calling
// it (registry options OptionStagePublishHostDir/PluginDir).
type pluginSupervisorHook struct {
	cfg       PluginSupervisorConfig
	alloc     *structs.Allocation
	task      *structs.Task
	pc        *structs.TaskCSIPluginConfig
	lifecycle Lifecycle
	logger    hclog.Logger

	// lock guards cancel and done, the supervising goroutine's.
	lock   sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

func (*pluginSupervisorHook) Name() string { return "plugin_supervisor" }

// pluginLayout is where a plugin's socket and directories are.
type pluginLayout struct {
	// SocketDir and Socket are host paths.
	SocketDir, Socket string
	// Endpoint is CSI_ENDPOINT as the task sees it.
	Endpoint string
	// HostBase is Root/<plugin_id>; PluginBase is the same as the plugin
	// sees it.
	HostBase, PluginBase string
	// Mounts are the binds a driver that mounts must make.
	Mounts []*drivers.MountConfig
	// ShareBase is set when HostBase is bound bidirectionally: it must be a
	// shared mount on the host.
	ShareBase bool
}

// pluginLayoutFor computes a plugin task's layout. It is pure. The socket
// dir is <root>/p/<first 8 of the alloc ID>-<crc32 of the task name>, short
// enough for most data dirs; a socket path longer than a unix socket
// allows is an error that says so.
func pluginLayoutFor(root, allocID, task string, pc *structs.TaskCSIPluginConfig, canMount bool) (*pluginLayout, error) {
	if err := csimanager.ValidPluginID(pc.ID); err != nil {
		return nil, fmt.Errorf("csi_plugin %q: plugin ID: %w", pc.ID, err)
	}
	short := allocID
	if len(short) > 8 {
		short = short[:8]
	}
	l := &pluginLayout{
		SocketDir: filepath.Join(root, "p", fmt.Sprintf("%s-%08x", short, crc32.ChecksumIEEE([]byte(task)))),
		HostBase:  filepath.Join(root, pc.ID),
	}
	l.Socket = filepath.Join(l.SocketDir, PluginSocketName)
	if n := len(l.Socket); n > csi.MaxSocketPathLen {
		return nil, fmt.Errorf("csi_plugin %q: the plugin socket path %q is %d bytes, longer than the %d a unix socket allows; use a shorter data_dir",
			pc.ID, l.Socket, n, csi.MaxSocketPathLen)
	}
	if !canMount {
		l.Endpoint = "unix://" + l.Socket
		l.PluginBase = l.HostBase
		return l, nil
	}
	mountDir := pc.MountDir
	if mountDir == "" {
		mountDir = DefaultPluginMountDir
	}
	base := pc.StagePublishBaseDir
	if base == "" {
		base = DefaultPluginStagePublishBaseDir
	}
	if !path.IsAbs(mountDir) || !path.IsAbs(base) {
		return nil, fmt.Errorf("csi_plugin %q: mount_dir %q and stage_publish_base_dir %q must be absolute paths in the task", pc.ID, mountDir, base)
	}
	mountDir, base = path.Clean(mountDir), path.Clean(base)
	l.Endpoint = "unix://" + path.Join(mountDir, PluginSocketName)
	l.PluginBase = base
	l.Mounts = []*drivers.MountConfig{{HostPath: l.SocketDir, TaskPath: mountDir, PropagationMode: "private"}}
	if pc.Type != structs.CSIPluginTypeController {
		// Bidirectional: what the plugin mounts below its base must appear
		// on the host, where the client and other tasks find it. A
		// controller mounts nothing.
		l.Mounts = append(l.Mounts, &drivers.MountConfig{HostPath: l.HostBase, TaskPath: base, PropagationMode: "bidirectional"})
		l.ShareBase = true
	}
	return l, nil
}

func (h *pluginSupervisorHook) canMount() bool {
	d := h.cfg.Drivers[h.task.Driver]
	return d != nil && d.Capabilities().MountConfig == structs.MountConfigSupportAll
}

func (h *pluginSupervisorHook) layout() (*pluginLayout, error) {
	return pluginLayoutFor(h.cfg.Root, h.alloc.ID, h.task.Name, h.pc, h.canMount())
}

func (h *pluginSupervisorHook) Prestart(_ context.Context, _ *PrestartRequest, resp *PrestartResponse) error {
	l, err := h.layout()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(l.SocketDir, 0o700); err != nil {
		return fmt.Errorf("csi_plugin %q: creating the socket dir: %w", h.pc.ID, err)
	}
	// The task is not running: a socket left by its last run is stale, and
	// a plugin that does not replace it itself could not listen.
	if err := os.Remove(l.Socket); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("csi_plugin %q: removing the stale socket: %w", h.pc.ID, err)
	}
	if err := os.MkdirAll(l.HostBase, 0o711); err != nil {
		return fmt.Errorf("csi_plugin %q: creating the staging and publish dir: %w", h.pc.ID, err)
	}
	if l.ShareBase {
		if err := makeSharedMount(l.HostBase); err != nil {
			return fmt.Errorf("csi_plugin %q: %w", h.pc.ID, err)
		}
	}
	resp.Env = map[string]string{"CSI_ENDPOINT": l.Endpoint}
	resp.Mounts = append(resp.Mounts, l.Mounts...)
	return nil
}

// Poststart starts supervising the plugin (after a start, or after
// re-attaching to it following a client restart).
func (h *pluginSupervisorHook) Poststart(ctx context.Context, _ *PoststartRequest) error {
	l, err := h.layout()
	if err != nil {
		return err
	}
	h.stopSupervisor(ctx)
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	h.lock.Lock()
	h.cancel, h.done = cancel, done
	h.lock.Unlock()
	go func() {
		defer close(done)
		h.supervise(sctx, l)
	}()
	return nil
}

// stopSupervisor cancels the supervising goroutine and waits for it, up to
// ctx.
func (h *pluginSupervisorHook) stopSupervisor(ctx context.Context) {
	h.lock.Lock()
	cancel, done := h.cancel, h.done
	h.cancel, h.done = nil, nil
	h.lock.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	select {
	case <-done:
	case <-ctx.Done():
		h.logger.Warn("plugin supervisor did not stop in time")
	}
}

func (h *pluginSupervisorHook) Exited(ctx context.Context, _ *ExitedRequest) error {
	h.stopSupervisor(ctx)
	return h.deregister()
}

func (h *pluginSupervisorHook) Stop(ctx context.Context, _ *StopRequest) error {
	h.stopSupervisor(ctx)
	err := h.deregister()
	if l, lerr := h.layout(); lerr == nil {
		if rerr := os.RemoveAll(l.SocketDir); rerr != nil {
			h.logger.Warn("removing the plugin socket dir failed", "error", rerr)
		}
	}
	return err
}

func (h *pluginSupervisorHook) Shutdown(ctx context.Context) {
	h.stopSupervisor(ctx)
}

// pluginTypes are the registry types a csi_plugin type registers as.
func pluginTypes(t structs.CSIPluginType) []string {
	switch t {
	case structs.CSIPluginTypeNode:
		return []string{dynamicplugins.PluginTypeCSINode}
	case structs.CSIPluginTypeController:
		return []string{dynamicplugins.PluginTypeCSIController}
	case structs.CSIPluginTypeMonolith:
		return []string{dynamicplugins.PluginTypeCSINode, dynamicplugins.PluginTypeCSIController}
	}
	return nil
}

func (h *pluginSupervisorHook) deregister() error {
	var firstErr error
	for _, typ := range pluginTypes(h.pc.Type) {
		if err := h.cfg.Registry.Deregister(typ, h.pc.ID, h.alloc.ID); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// supervise is the supervising goroutine; see pluginSupervisorHook.
func (h *pluginSupervisorHook) supervise(ctx context.Context, l *pluginLayout) {
	opts := append([]csi.Option{csi.WithPluginID(h.pc.ID)}, h.cfg.CSIOptions...)
	client, err := csi.New(l.Socket, h.logger, opts...)
	if err != nil {
		h.logger.Error("cannot reach the plugin", "error", err)
		h.lifecycle.EmitEvent(NewEvent(EventPluginUnhealthy, fmt.Sprintf("Cannot reach CSI plugin %q: %v", h.pc.ID, err)))
		return
	}
	defer client.Close()

	if !h.waitHealthy(ctx, client) {
		return
	}
	provider, version, err := client.PluginInfo(ctx)
	if err != nil {
		if ctx.Err() == nil {
			h.logger.Warn("GetPluginInfo failed; registering without provider and version", "error", err)
		}
		provider, version = "", ""
	}
	if ctx.Err() != nil {
		return
	}
	for _, typ := range pluginTypes(h.pc.Type) {
		err := h.cfg.Registry.Register(&dynamicplugins.PluginInfo{
			Name: h.pc.ID, Type: typ, Version: version, SocketPath: l.Socket, AllocID: h.alloc.ID,
			Options: map[string]string{
				dynamicplugins.OptionStagePublishHostDir:   l.HostBase,
				dynamicplugins.OptionStagePublishPluginDir: l.PluginBase,
				dynamicplugins.OptionProvider:              provider,
			},
		})
		if err != nil {
			h.logger.Error("registering the plugin failed", "type", typ, "error", err)
		}
	}
	h.logger.Info("plugin healthy and registered", "provider", provider, "version", version)
	h.lifecycle.EmitEvent(NewEvent(EventPluginHealthy, fmt.Sprintf("CSI plugin %q (%s %s) is healthy", h.pc.ID, provider, version)))

	healthy := true
	t := time.NewTicker(h.cfg.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ok, why := probe(ctx, client)
		if ctx.Err() != nil {
			return
		}
		if ok == healthy {
			continue
		}
		healthy = ok
		if ok {
			h.logger.Info("plugin healthy again")
			h.lifecycle.EmitEvent(NewEvent(EventPluginHealthy, fmt.Sprintf("CSI plugin %q is healthy again", h.pc.ID)))
		} else {
			h.logger.Warn("plugin unhealthy", "why", why)
			h.lifecycle.EmitEvent(NewEvent(EventPluginUnhealthy, fmt.Sprintf("CSI plugin %q is unhealthy: %s", h.pc.ID, why)))
		}
	}
}

// waitHealthy probes with backoff until the plugin is healthy (true), or
// restarts the task once health_timeout passes, or ctx ends (false).
func (h *pluginSupervisorHook) waitHealthy(ctx context.Context, client csi.Client) bool {
	timeout := h.pc.HealthTimeout
	if timeout <= 0 {
		timeout = DefaultPluginHealthTimeout
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	why := ""
	for attempt := 0; ; attempt++ {
		ok, w := probe(ctx, client)
		if ok {
			return true
		}
		why = w
		wait := time.NewTimer(h.cfg.StartupBackoff.Delay(attempt))
		select {
		case <-ctx.Done():
			wait.Stop()
			return false
		case <-wait.C:
		case <-deadline.C:
			wait.Stop()
			msg := fmt.Sprintf("CSI plugin %q did not become healthy within %s (%s); restarting it", h.pc.ID, timeout, why)
			h.logger.Warn("plugin did not become healthy in time; restarting the task", "timeout", timeout, "why", why)
			if err := h.lifecycle.Restart(ctx, NewEvent(EventPluginUnhealthy, msg), true); err != nil {
				h.logger.Warn("restarting the plugin task failed", "error", err)
			}
			return false
		}
	}
}

// probe asks the plugin whether it is ready; the client's probe timeout
// makes a hung plugin count as unhealthy.
func probe(ctx context.Context, client csi.Client) (bool, string) {
	ready, err := client.Probe(ctx)
	switch {
	case err != nil:
		return false, fmt.Sprintf("probe failed: %v", err)
	case !ready:
		return false, "plugin says it is not ready"
	}
	return true, ""
}
