package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/client/allocrunner"
	"github.com/berth-io/berth/client/allocrunner/taskrunner"
	"github.com/berth-io/berth/client/dynamicplugins"
	"github.com/berth-io/berth/client/pluginmanager/csimanager"
	"github.com/berth-io/berth/client/state"
	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/structs"
)

// Client is one node's client agent.
type Client struct {
	cfg     *Config
	logger  hclog.Logger
	db      state.DB
	dataDir string
	// tmpDataDir is set when the client made DataDir itself (DevMode).
	tmpDataDir bool
	host       *hostFingerprint
	syncer     *allocSyncer

	// plugins are the plugins running as tasks (CSI); csi fingerprints
	// them and mounts volumes through them; csiEvents lets the csi_hook
	// record task events.
	plugins   *dynamicplugins.Registry
	csi       *csimanager.Manager
	csiEvents *allocrunner.CSIEvents
	// csiChanged is signalled when the node's CSI info changed and the
	// servers must hear of it (Node.Register).
	csiChanged chan struct{}
	// serverContact is signalled when a server answers an RPC: the node
	// session's redial stops waiting out its backoff (redialer).
	serverContact chan struct{}

	// ctx ends at Shutdown; every goroutine the client starts watches it
	// and is counted in wg.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// registered is closed after the first successful registration.
	registered chan struct{}

	shutdownOnce sync.Once
	shutdownErr  error

	// nodeLock guards node.
	nodeLock sync.RWMutex
	node     *structs.Node

	// contact is when the servers last answered (disconnect.go).
	contact contactTracker

	// registerLock serialises Node.Register calls (heartbeat loop, CSI
	// fingerprint sync) so that a register carrying an older snapshot of
	// the node can never land after one carrying a newer snapshot.
	registerLock sync.Mutex

	// allocLock guards allocs and closing.
	allocLock sync.RWMutex
	allocs    map[string]*allocEntry
	closing   bool
}

// New starts a client: it opens the client state, loads or creates the
// node identity, fingerprints, restores the allocs a previous process ran
// and starts registering, heartbeating and watching allocs in the
// background. It returns without waiting for the servers.
func New(cfg *Config) (*Client, error) {
	if cfg.RPC == nil {
		return nil, errors.New("client: missing RPC")
	}
	cfg = cfg.withDefaults()
	c := &Client{
		cfg:        cfg,
		logger:     cfg.Logger.Named("client"),
		dataDir:    cfg.DataDir,
		registered: make(chan struct{}),
		allocs:     map[string]*allocEntry{},
		csiChanged: make(chan struct{}, 1),

		serverContact: make(chan struct{}, 1),
	}
	if c.dataDir == "" {
		if !cfg.DevMode {
			return nil, errors.New("client: data_dir is required outside dev mode")
		}
		dir, err := os.MkdirTemp("", "berth-client-")
		if err != nil {
			return nil, fmt.Errorf("client: creating a temporary data dir: %w", err)
		}
		c.dataDir, c.tmpDataDir = dir, true
	}
	if cfg.Drivers == nil && cfg.DriverFactory != nil {
		cfg.Drivers = cfg.DriverFactory(filepath.Join(c.dataDir, "client", "drivers"))
	}
	if err := c.openState(); err != nil {
		c.removeTmpDataDir()
		return nil, err
	}
	id, err := c.loadIdentity()
	if err != nil {
		c.db.Close()
		c.removeTmpDataDir()
		return nil, err
	}
	c.logger = c.logger.With("node_id", id.ID)
	c.host = fingerprintHost(cfg.NetworkIP)
	c.node = c.buildNode(id, fingerprintDrivers(context.Background(), cfg.Drivers))
	if err := c.setupCSI(); err != nil {
		c.db.Close()
		c.removeTmpDataDir()
		return nil, err
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.syncer = newAllocSyncer(c, cfg.UpdateBatchWindow, cfg.RetryBackoff)

	// The CSI manager starts before allocs are restored, so that they find
	// their node plugins (reloaded from the registry) as soon as possible.
	c.goRun(c.csi.Run)
	c.goRun(c.csiNodeSync)
	c.restoreAllocs()
	c.goRun(c.syncer.run)
	c.goRun(c.heartbeatLoop)
	c.goRun(c.disconnectLoop)
	c.goRun(c.watchAllocs)
	c.goRun(c.nodeSessionLoop)
	c.logger.Info("client started", "data_dir", c.dataDir, "node_name", c.Node().Name)
	return c, nil
}

// setupCSI builds the dynamic plugin registry and the CSI manager, and
// adds the CSI hooks to every alloc and task: csi_hook, plugin_supervisor
// and volume_mount.
func (c *Client) setupCSI() error {
	cfg := c.cfg
	root := filepath.Join(c.dataDir, "client", "csi")
	reg, err := dynamicplugins.New(c.db, cfg.Logger)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	for _, p := range cfg.CSI.Plugins {
		if err := reg.Register(p); err != nil {
			return fmt.Errorf("client: %w", err)
		}
	}
	mgr, err := csimanager.New(csimanager.Config{
		Registry: reg, DB: c.db, Root: root, Logger: cfg.Logger, UpdateNode: c.updateNodeCSI,
		FingerprintInterval: cfg.CSI.FingerprintInterval, IsMountpoint: cfg.CSI.IsMountpoint, CSIOptions: cfg.CSI.ClientOptions,
		StatsInterval: cfg.CSI.StatsInterval, ReportStats: c.reportVolumeStats, OnAbnormal: c.volumeAbnormal,
	})
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	c.plugins, c.csi, c.csiEvents = reg, mgr, allocrunner.NewCSIEvents()

	setups := allocrunner.NewCSISetups()
	cfg.AllocHooks = append(slices.Clone(cfg.AllocHooks), allocrunner.NewCSIHookFactory(allocrunner.CSIHookConfig{
		Manager: mgr, RPC: c.rpc, NodeID: c.NodeID, Drivers: cfg.Drivers, Events: c.csiEvents,
		PluginWait: cfg.CSI.PluginWait, RetryBackoff: cfg.CSI.RetryBackoff, PostrunWait: cfg.CSI.PostrunWait,
		Setups: setups,
	}))
	supervisor := taskrunner.NewPluginSupervisorHookFactory(taskrunner.PluginSupervisorConfig{
		Registry: reg, Root: root, Drivers: cfg.Drivers, ProbeInterval: cfg.CSI.PluginProbeInterval, CSIOptions: cfg.CSI.ClientOptions,
	})
	volumeMount := func(hc *taskrunner.HookConfig) taskrunner.Hook {
		if hasCSIVolumes(hc.Alloc) {
			c.csiEvents.AddTask(hc.Alloc.ID, hc.Task.Name, hc.Lifecycle)
		}
		return taskrunner.NewVolumeMountHook(hc)
	}
	// Last: task starts let the node's volume setups finish first.
	cfg.TaskHooks = append(slices.Clone(cfg.TaskHooks), supervisor, volumeMount, setups.TaskHookFactory(allocrunner.DefaultCSISetupsWait))
	return nil
}

// reportVolumeStats sends one round of volume usage samples to the
// servers (CSIVolume.ReportStats).
func (c *Client) reportVolumeStats(ctx context.Context, samples []*structs.CSIVolumeStatsSample) error {
	req := &structs.CSIVolumeStatsReportRequest{NodeID: c.NodeID(), Samples: samples}
	var resp structs.GenericResponse
	return c.rpc(ctx, structs.MethodCSIVolumeReportStats, req, &resp)
}

// volumeAbnormal records, on every task of the allocs using a volume on
// this node, that its node plugin reports the volume's condition abnormal.
func (c *Client) volumeAbnormal(allocIDs []string, namespace, volumeID, message string) {
	c.logger.Warn("CSI volume condition is abnormal", "namespace", namespace, "volume_id", volumeID, "message", message, "allocs", allocIDs)
	for _, id := range allocIDs {
		c.csiEvents.EmitAll(id, allocrunner.VolumeAbnormalEvent(volumeID, message))
	}
}

// allocGroup is the task group an alloc runs, or nil when its job lacks it.
func allocGroup(a *structs.Allocation) *structs.TaskGroup {
	if a.Job == nil {
		return nil
	}
	return a.Job.LookupTaskGroup(a.TaskGroup)
}

func hasCSIVolumes(a *structs.Allocation) bool {
	tg := allocGroup(a)
	if tg == nil {
		return false
	}
	for _, v := range tg.Volumes {
		if v != nil && v.Type == structs.VolumeTypeCSI {
			return true
		}
	}
	return false
}

// updateNodeCSI applies a CSI plugin instance's fingerprint (nil: gone) to
// the node and, when it changed anything, asks for a Node.Register.
func (c *Client) updateNodeCSI(pluginType, pluginID string, info *structs.CSIInfo) {
	c.nodeLock.Lock()
	cur := c.node.CSINodePlugins
	if pluginType == dynamicplugins.PluginTypeCSIController {
		cur = c.node.CSIControllerPlugins
	}
	old, had := cur[pluginID]
	if (info == nil && !had) || (info != nil && had && csiInfoEqual(old, info)) {
		c.nodeLock.Unlock()
		return
	}
	n := c.node.Copy()
	m := &n.CSINodePlugins
	if pluginType == dynamicplugins.PluginTypeCSIController {
		m = &n.CSIControllerPlugins
	}
	if info == nil {
		delete(*m, pluginID)
	} else {
		if *m == nil {
			*m = map[string]*structs.CSIInfo{}
		}
		(*m)[pluginID] = info.Copy()
	}
	c.node = n
	c.nodeLock.Unlock()
	select {
	case c.csiChanged <- struct{}{}:
	default: // a register is pending; it reads the latest node
	}
}

// csiInfoEqual compares fingerprints, ignoring when they were taken.
func csiInfoEqual(a, b *structs.CSIInfo) bool {
	x, y := a.Copy(), b.Copy()
	x.UpdateTime, y.UpdateTime = 0, 0
	return reflect.DeepEqual(x, y)
}

// csiNodeSync registers the node again whenever its CSI info changed, after
// the first registration, batching changes that come together.
func (c *Client) csiNodeSync(ctx context.Context) {
	select {
	case <-c.registered:
	case <-ctx.Done():
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.csiChanged:
		}
		if !helper.SleepCtx(ctx, c.cfg.UpdateBatchWindow) {
			// Leave the change pending for the final register at shutdown.
			c.markCSIChanged()
			return
		}
		select {
		case <-c.csiChanged:
		default:
		}
		c.logger.Debug("CSI plugins changed; registering the node again")
		if _, ok := c.registerUntilDone(ctx); !ok {
			c.markCSIChanged()
			return
		}
	}
}

func (c *Client) markCSIChanged() {
	select {
	case c.csiChanged <- struct{}{}:
	default:
	}
}

// goRun runs fn(c.ctx) in a goroutine the client owns.
func (c *Client) goRun(fn func(context.Context)) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn(c.ctx)
	}()
}

func (c *Client) openState() error {
	if c.cfg.StateDB != nil {
		c.db = c.cfg.StateDB
		return nil
	}
	db, err := state.NewBoltDB(filepath.Join(c.dataDir, "client", "state.db"))
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	c.db = db
	return nil
}

// loadIdentity returns the persisted node identity, creating it once: a
// restarted client is the same node.
func (c *Client) loadIdentity() (*state.NodeIdentity, error) {
	id, err := c.db.GetNodeIdentity()
	if err != nil {
		return nil, fmt.Errorf("client: loading node identity: %w", err)
	}
	if id != nil {
		return id, nil
	}
	id = &state.NodeIdentity{ID: helper.UUID(), SecretID: helper.UUID()}
	if err := c.db.PutNodeIdentity(id); err != nil {
		return nil, fmt.Errorf("client: persisting node identity: %w", err)
	}
	return id, nil
}

// buildNode is the node as registered.
func (c *Client) buildNode(id *state.NodeIdentity, drv map[string]*structs.DriverInfo) *structs.Node {
	n := c.cfg.Node.Copy()
	n.ID, n.SecretID = id.ID, id.SecretID
	if n.Name == "" {
		n.Name = c.host.Attributes["unique.hostname"]
	}
	if n.Name == "" {
		n.Name = id.ID
	}
	if n.Datacenter == "" {
		n.Datacenter = "dc1"
	}
	n.Status = structs.NodeStatusReady
	n.DisconnectDeadline = c.cfg.DisconnectDeadline // the promise disconnectLoop keeps
	attrs := make(map[string]string, len(c.host.Attributes)+len(drv))
	for k, v := range c.host.Attributes {
		attrs[k] = v
	}
	for name, d := range drv {
		if d.Detected && d.Healthy {
			attrs["driver."+name] = "1"
		}
	}
	n.Attributes = attrs
	r := *c.host.Resources
	n.NodeResources = &r
	n.Drivers = drv
	return n
}

// Node returns a copy of the node as last registered.
func (c *Client) Node() *structs.Node {
	c.nodeLock.RLock()
	defer c.nodeLock.RUnlock()
	return c.node.Copy()
}

// NodeID is this node's ID.
func (c *Client) NodeID() string {
	c.nodeLock.RLock()
	defer c.nodeLock.RUnlock()
	return c.node.ID
}

func (c *Client) nodeSecret() string {
	c.nodeLock.RLock()
	defer c.nodeLock.RUnlock()
	if c.node == nil {
		return "" // tests drive parts of a client that has no node yet
	}
	return c.node.SecretID
}

// Shutdown stops the client and returns promptly: it stops heartbeats and
// the alloc watcher and lets go of the allocs, whose tasks keep running.
// In DevMode it first stops every alloc (bounded by the tasks' kill
// timeouts). It is bounded even when a hook or driver hangs, and safe to
// call more than once.
func (c *Client) Shutdown() error {
	c.shutdownOnce.Do(func() { c.shutdownErr = c.shutdown() })
	return c.shutdownErr
}

func (c *Client) shutdown() error {
	c.logger.Info("shutting down")
	if c.cfg.DevMode {
		c.stopAllocs()
	}
	c.allocLock.Lock()
	c.closing = true
	runners := c.runnersLocked()
	c.allocLock.Unlock()

	c.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.ShutdownTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, r := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Shutdown(ctx); err != nil {
				c.logger.Warn("alloc runner did not shut down in time", "alloc_id", r.ID(), "error", err)
			}
		}()
	}
	wg.Wait()
	// The servers should know the last task states (above all in DevMode,
	// where the tasks were just stopped).
	flushCtx, flushCancel := context.WithTimeout(ctx, time.Second)
	if err := c.syncer.flush(flushCtx); err != nil {
		c.logger.Debug("final alloc status flush failed", "error", err)
	}
	flushCancel()

	var errs []error
	if !waitTimeout(&c.wg, ctx) {
		errs = append(errs, errors.New("client: shutdown timed out waiting for its goroutines; a hook or driver ignores cancellation"))
		c.logger.Error("shutdown timed out waiting for goroutines")
	}
	// The CSI manager marked every plugin unhealthy as it stopped, and no
	// one keeps the disconnect deadline once this returns: tell the
	// servers, once and bounded, so they stop placing volumes here and
	// stop counting on the deadline.
	retract := !c.cfg.DevMode && c.retractDisconnectDeadline()
	csiPending := false
	select {
	case <-c.csiChanged:
		csiPending = true
	default:
	}
	if csiPending || retract {
		c.finalRegister(retract)
	}
	if err := c.db.Close(); err != nil {
		errs = append(errs, fmt.Errorf("client: closing state: %w", err))
	}
	if cl, ok := c.cfg.RPC.(io.Closer); ok {
		if err := cl.Close(); err != nil {
			errs = append(errs, fmt.Errorf("client: closing rpc: %w", err))
		}
	}
	c.removeTmpDataDir()
	return errors.Join(errs...)
}

func (c *Client) removeTmpDataDir() {
	if c.tmpDataDir {
		// A volume still staged or published below (a plugin that hung)
		// must not have its contents removed through the mount.
		if err := csimanager.DetachMountsUnder(c.dataDir); err != nil {
			c.logger.Error("leaving the temporary data dir: mounts remain under it", "data_dir", c.dataDir, "error", err)
			return
		}
		if err := os.RemoveAll(c.dataDir); err != nil {
			c.logger.Warn("removing temporary data dir failed", "error", err)
		}
	}
}

// waitTimeout waits for wg or ctx; false if ctx ended first. The helper
// goroutine ends when wg does.
func waitTimeout(wg *sync.WaitGroup, ctx context.Context) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}
