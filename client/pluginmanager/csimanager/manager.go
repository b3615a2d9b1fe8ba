// Package csimanager drives the CSI plugins registered in the client's
// dynamic plugin registry: it fingerprints each into the node's CSI info,
// and stages and publishes volumes through node plugins.
//
//	dynamicplugins.Registry ──events──► Manager.Run (reconcile: one instance
//	                                       │          per (type, plugin))
//	                                       ├─► instance: fingerprint now, then
//	                                       │   every FingerprintInterval
//	                                       │   (sooner, with backoff, while
//	                                       │   unhealthy) ──on change──► UpdateNode
//	                                       └─► node instance, once it knows its
//	                                           node ID and capabilities:
//	                                           VolumeManager (csi_hook mounts)
//
// When Run's ctx ends, every instance stops and UpdateNode gets each
// plugin's last fingerprint marked unhealthy, so the servers stop placing
// volumes on a node whose client is gone. A deregistered plugin is removed
// from the node (UpdateNode with nil).
//
// Staging and publish paths are host paths the client computes (see
// paths.go); the plugin gets them translated to its own view of the same
// directory. The staging usage that decides NodeUnstage is in the client
// state (usage.go), never only in memory.
package csimanager

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/client/dynamicplugins"
	"github.com/berth-io/berth/client/state"
	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/helper/keylock"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi"
)

// Defaults.
const (
	DefaultFingerprintInterval = 30 * time.Second
	// DefaultResyncInterval is how often Run re-reads the registry even
	// without events.
	DefaultResyncInterval = time.Minute
)

// DefaultFingerprintBackoff paces fingerprints of an unhealthy plugin.
var DefaultFingerprintBackoff = helper.Backoff{Base: 250 * time.Millisecond, Max: 10 * time.Second}

// Sentinel errors.
var (
	// ErrPluginNotReady: no node plugin of that ID can mount on this node
	// (not registered, or not yet fingerprinted).
	ErrPluginNotReady = errors.New("csi node plugin not ready")
)

// Config configures a Manager.
type Config struct {
	Registry *dynamicplugins.Registry
	// DB holds the staging usage (state.BucketCSIUsage).
	DB state.DB
	// Root is <data_dir>/client/csi: plugin P's staging and publish paths
	// are under Root/P on the host.
	Root   string
	Logger hclog.Logger
	// UpdateNode receives a plugin instance's fingerprint whenever it
	// changes, nil when the instance is gone, and each instance's last
	// fingerprint, unhealthy, when Run ends. pluginType is
	// dynamicplugins.PluginTypeCSINode or PluginTypeCSIController. It is
	// called from the Manager's goroutines and must not block for long.
	UpdateNode func(pluginType, pluginID string, info *structs.CSIInfo)

	FingerprintInterval time.Duration
	FingerprintBackoff  helper.Backoff
	ResyncInterval      time.Duration
	// IsMountpoint reports whether a host path is a mount point (default
	// IsMountpoint); tests replace it.
	IsMountpoint func(path string) (bool, error)
	// CSIOptions configure the plugin clients (timeouts, retries).
	CSIOptions []csi.Option

	// StatsInterval is how often the usage of published volumes is sampled
	// (structs.DefaultCSIStatsInterval; at most MaxCSIStatsInterval, so the
	// servers' samples never go stale while the node reports).
	StatsInterval time.Duration
	// ReportStats sends one sample round, for every volume published on
	// this node, to the servers; nil disables sampling.
	ReportStats func(ctx context.Context, samples []*structs.CSIVolumeStatsSample) error
	// OnAbnormal is told when a volume's condition turns abnormal (or its
	// abnormal message changes), with the allocs that use it here.
	OnAbnormal func(allocIDs []string, namespace, volumeID, message string)
}

type instanceKey struct {
	typ, name string
}

// Manager is the client's CSI plugin manager. Build it with New and call
// Run once, in a goroutine the caller owns.
type Manager struct {
	cfg    Config
	logger hclog.Logger
	// locks serialises operations per volume, across plugin instances.
	locks keylock.Locks[string]

	// lock guards instances and changed.
	lock      sync.Mutex
	instances map[instanceKey]*instance
	// changed is closed and replaced whenever an instance comes, goes or
	// becomes able to mount.
	changed chan struct{}

	// published is what the node plugins published on this node.
	published publishedSet
}

// New returns a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.Registry == nil || cfg.DB == nil || cfg.Root == "" {
		return nil, errors.New("csimanager: registry, DB and root are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.UpdateNode == nil {
		cfg.UpdateNode = func(string, string, *structs.CSIInfo) {}
	}
	if cfg.FingerprintInterval <= 0 {
		cfg.FingerprintInterval = DefaultFingerprintInterval
	}
	if cfg.FingerprintBackoff.Base <= 0 {
		cfg.FingerprintBackoff = DefaultFingerprintBackoff
	}
	if cfg.ResyncInterval <= 0 {
		cfg.ResyncInterval = DefaultResyncInterval
	}
	if cfg.IsMountpoint == nil {
		cfg.IsMountpoint = IsMountpoint
	}
	if cfg.StatsInterval <= 0 {
		cfg.StatsInterval = structs.DefaultCSIStatsInterval
	}
	if cfg.StatsInterval > structs.MaxCSIStatsInterval {
		return nil, fmt.Errorf("csimanager: stats interval %s is over the limit of %s", cfg.StatsInterval, structs.MaxCSIStatsInterval)
	}
	if cfg.OnAbnormal == nil {
		cfg.OnAbnormal = func([]string, string, string, string) {}
	}
	return &Manager{
		cfg:       cfg,
		logger:    cfg.Logger.Named("csi_manager"),
		instances: map[instanceKey]*instance{},
		changed:   make(chan struct{}),
	}, nil
}

// Run manages plugin instances until ctx ends, then stops them all and
// reports each one's last fingerprint as unhealthy. It returns once every
// goroutine it started has returned; it never waits on a plugin beyond
// ctx.
func (m *Manager) Run(ctx context.Context) {
	events := m.cfg.Registry.Subscribe(ctx)
	resync := time.NewTicker(m.cfg.ResyncInterval)
	defer resync.Stop()
	if m.cfg.ReportStats != nil {
		var wg sync.WaitGroup
		wg.Add(1)
		sctx, cancel := context.WithCancel(ctx)
		go func() { defer wg.Done(); m.runStats(sctx) }()
		// Stop sampling before stopAll closes the plugin clients.
		defer wg.Wait()
		defer cancel()
	}
	m.reconcile(ctx)
	for {
		select {
		case <-ctx.Done():
			m.stopAll()
			return
		case _, ok := <-events:
			if !ok {
				m.stopAll()
				return
			}
			m.reconcile(ctx)
		case <-resync.C:
			m.reconcile(ctx)
		}
	}
}

// reconcile makes the instances match the registry: one per current
// registration, replaced when the registration changed.
func (m *Manager) reconcile(ctx context.Context) {
	want := map[instanceKey]*dynamicplugins.PluginInfo{}
	for _, typ := range []string{dynamicplugins.PluginTypeCSINode, dynamicplugins.PluginTypeCSIController} {
		for _, p := range m.cfg.Registry.List(typ) {
			want[instanceKey{typ, p.Name}] = p
		}
	}
	m.lock.Lock()
	var stale []*instance
	for k, inst := range m.instances {
		if p, ok := want[k]; !ok || !sameRegistration(p, inst.plugin) {
			stale = append(stale, inst)
			delete(m.instances, k)
		}
	}
	m.lock.Unlock()
	for _, inst := range stale {
		inst.stop()
		k := instanceKey{inst.typ, inst.plugin.Name}
		if _, replaced := want[k]; !replaced {
			inst.logger.Info("plugin deregistered; removing it from the node")
			m.cfg.UpdateNode(inst.typ, inst.plugin.Name, nil)
		}
	}

	started := 0
	for k, p := range want {
		m.lock.Lock()
		_, running := m.instances[k]
		m.lock.Unlock()
		if running || ctx.Err() != nil {
			continue
		}
		inst, err := m.newInstance(k.typ, p)
		if err != nil {
			m.logger.Error("cannot manage plugin", "plugin_id", p.Name, "type", k.typ, "alloc_id", p.AllocID, "error", err)
			continue
		}
		ictx, cancel := context.WithCancel(ctx)
		inst.cancel = cancel
		m.lock.Lock()
		m.instances[k] = inst
		m.lock.Unlock()
		go inst.run(ictx) // owned by Run: stopAll and reconcile wait on inst.done
		inst.logger.Info("managing plugin", "socket", inst.plugin.SocketPath)
		started++
	}
	if len(stale) > 0 || started > 0 {
		m.notify()
	}
}

func sameRegistration(a, b *dynamicplugins.PluginInfo) bool {
	return a.AllocID == b.AllocID && a.SocketPath == b.SocketPath && maps.Equal(a.Options, b.Options)
}

func (m *Manager) newInstance(typ string, p *dynamicplugins.PluginInfo) (*instance, error) {
	if err := ValidPluginID(p.Name); err != nil {
		return nil, fmt.Errorf("plugin ID: %w", err)
	}
	paths := Paths{
		HostDir:   p.Options[dynamicplugins.OptionStagePublishHostDir],
		PluginDir: p.Options[dynamicplugins.OptionStagePublishPluginDir],
	}
	if paths.HostDir == "" {
		paths.HostDir = filepath.Join(m.cfg.Root, p.Name)
	}
	if paths.PluginDir == "" {
		paths.PluginDir = paths.HostDir
	}
	logger := m.logger.With("plugin_id", p.Name, "type", typ, "alloc_id", p.AllocID)
	opts := append([]csi.Option{csi.WithPluginID(p.Name)}, m.cfg.CSIOptions...)
	client, err := csi.New(p.SocketPath, logger, opts...)
	if err != nil {
		return nil, err
	}
	return &instance{
		typ: typ, plugin: p, paths: paths, client: client, m: m, logger: logger,
		done: make(chan struct{}),
	}, nil
}

// stopAll stops every instance and reports its last fingerprint, unhealthy.
func (m *Manager) stopAll() {
	m.lock.Lock()
	all := make([]*instance, 0, len(m.instances))
	for _, inst := range m.instances {
		all = append(all, inst)
	}
	clear(m.instances)
	m.lock.Unlock()
	now := time.Now().UnixNano()
	for _, inst := range all {
		inst.stop()
		if last := inst.lastInfo(); last != nil {
			m.cfg.UpdateNode(inst.typ, inst.plugin.Name, unhealthy(last, "client is shutting down", now))
		}
	}
	m.notify()
}

func (m *Manager) notify() {
	m.lock.Lock()
	defer m.lock.Unlock()
	close(m.changed)
	m.changed = make(chan struct{})
}

// NodePlugin returns the VolumeManager of a node plugin that can mount now.
func (m *Manager) NodePlugin(pluginID string) (VolumeManager, bool) {
	m.lock.Lock()
	inst := m.instances[instanceKey{dynamicplugins.PluginTypeCSINode, pluginID}]
	m.lock.Unlock()
	if inst == nil {
		return nil, false
	}
	if vm := inst.volumeManager(); vm != nil {
		return vm, true
	}
	return nil, false
}

// WaitForNodePlugin returns the VolumeManager of a node plugin as soon as
// it is registered and fingerprinted, or, when ctx ends first, an error
// wrapping ErrPluginNotReady that says what is missing.
func (m *Manager) WaitForNodePlugin(ctx context.Context, pluginID string) (VolumeManager, error) {
	key := instanceKey{dynamicplugins.PluginTypeCSINode, pluginID}
	for {
		m.lock.Lock()
		inst, changed := m.instances[key], m.changed
		m.lock.Unlock()
		if inst != nil {
			if vm := inst.volumeManager(); vm != nil {
				return vm, nil
			}
		}
		select {
		case <-changed:
			continue
		case <-ctx.Done():
		}
		if inst == nil {
			return nil, fmt.Errorf("CSI node plugin %q is not running on this node: %w", pluginID, ErrPluginNotReady)
		}
		why := "not fingerprinted yet"
		if last := inst.lastInfo(); last != nil {
			why = last.HealthDescription
		}
		return nil, fmt.Errorf("CSI node plugin %q is registered on this node but cannot mount yet (%s): %w", pluginID, why, ErrPluginNotReady)
	}
}

// IsMounted reports whether a host path is a mount point.
func (m *Manager) IsMounted(path string) (bool, error) { return m.cfg.IsMountpoint(path) }

// ErrControllerNotRunning is wrapped by ControllerClient's error when this
// node has no healthy controller instance of the plugin.
var ErrControllerNotRunning = errors.New("CSI controller plugin is not running on this node")

// ControllerClient returns the CSI client of this node's controller
// instance of pluginID, if it is registered and its last fingerprint was
// healthy. The servers call controllers through it (node sessions).
func (m *Manager) ControllerClient(pluginID string) (csi.Client, error) {
	m.lock.Lock()
	inst := m.instances[instanceKey{dynamicplugins.PluginTypeCSIController, pluginID}]
	m.lock.Unlock()
	if inst == nil {
		return nil, fmt.Errorf("%w: plugin %q", ErrControllerNotRunning, pluginID)
	}
	last := inst.lastInfo()
	switch {
	case last == nil:
		return nil, fmt.Errorf("%w: plugin %q is not fingerprinted yet", ErrControllerNotRunning, pluginID)
	case !last.Healthy:
		return nil, fmt.Errorf("%w: plugin %q is unhealthy (%s)", ErrControllerNotRunning, pluginID, last.HealthDescription)
	}
	return inst.client, nil
}
