package csimanager

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/client/dynamicplugins"
	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi"
)

// instance fingerprints one registered plugin (one type of it: a monolith
// has a node and a controller instance) until it is stopped. The Manager's
// Run goroutine owns its goroutine.
type instance struct {
	typ    string
	plugin *dynamicplugins.PluginInfo
	paths  Paths
	client csi.Client
	m      *Manager
	logger hclog.Logger
	cancel context.CancelFunc
	done   chan struct{}

	// lock guards last and vm.
	lock sync.Mutex
	// last is the latest fingerprint (nil before the first).
	last *structs.CSIInfo
	// vm is set for node plugins once NodeGetInfo and NodeGetCapabilities
	// were read: the plugin can then mount.
	vm *volumeManager
}

// fingerprintCache is what a pass learns once and keeps: plugin identity,
// capabilities and, for node plugins, the node info, which do not change
// while the plugin runs. An unhealthy pass forgets it.
type fingerprintCache struct {
	provider, version string
	pluginCaps        *csi.PluginCapabilitySet
	nodeInfo          *csi.NodeInfo
}

// run fingerprints at once, then every FingerprintInterval; an unhealthy
// plugin is fingerprinted again sooner, with backoff, so a plugin that is
// just starting is usable quickly.
func (i *instance) run(ctx context.Context) {
	defer close(i.done)
	var cache fingerprintCache
	failures := 0
	for {
		r := i.fingerprint(ctx, &cache)
		if ctx.Err() != nil {
			return
		}
		info := buildInfo(i.typ, i.plugin, r, time.Now().UnixNano())
		i.publish(info, r)
		wait := i.m.cfg.FingerprintInterval
		if info.Healthy {
			failures = 0
		} else {
			// A plugin that stopped answering may come back as another
			// version (its task restarted after an upgrade, same
			// registration): learn its identity, capabilities and node
			// info again rather than keep the old ones.
			cache = fingerprintCache{}
			wait = min(wait, i.m.cfg.FingerprintBackoff.Delay(failures))
			failures++
			i.logger.Debug("plugin unhealthy", "why", info.HealthDescription, "retry_in", wait)
		}
		if !helper.SleepCtx(ctx, wait) {
			return
		}
	}
}

// fingerprint asks the plugin what buildInfo needs.
func (i *instance) fingerprint(ctx context.Context, cache *fingerprintCache) *probeResult {
	r := &probeResult{}
	if cache.provider == "" {
		if name, version, err := i.client.PluginInfo(ctx); err == nil {
			cache.provider, cache.version = name, version
		}
	}
	r.Provider, r.Version = cache.provider, cache.version
	if cache.pluginCaps == nil {
		cache.pluginCaps, r.PluginCapsErr = i.client.PluginCapabilities(ctx)
	}
	r.PluginCaps = cache.pluginCaps
	r.Ready, r.ProbeErr = i.client.Probe(ctx)
	switch i.typ {
	case dynamicplugins.PluginTypeCSINode:
		if cache.nodeInfo == nil {
			cache.nodeInfo, r.NodeInfoErr = i.client.NodeGetInfo(ctx)
		}
		r.NodeInfo = cache.nodeInfo
		r.nodeCapsConn = i.client.Connection()
		r.NodeCaps, r.NodeCapsErr = i.client.NodeGetCapabilities(ctx)
	case dynamicplugins.PluginTypeCSIController:
		r.ControllerCaps, r.ControllerCapsErr = i.client.ControllerGetCapabilities(ctx)
		if r.ControllerCaps != nil && r.ControllerCaps.SupportsGetCapacity {
			r.CapacityTopology = i.m.nodeTopology(i.plugin.Name)
			r.Capacity, r.CapacityErr = i.client.ControllerGetCapacity(ctx, &csi.ControllerGetCapacityRequest{AccessibleTopology: r.CapacityTopology})
		}
	}
	return r
}

// publish records a fingerprint, tells the node when it changed, and makes
// a node plugin available for mounting once it can be.
func (i *instance) publish(info *structs.CSIInfo, r *probeResult) {
	i.lock.Lock()
	changed := !infoEqual(i.last, info)
	i.last = info
	ready := false
	if i.typ == dynamicplugins.PluginTypeCSINode && r.NodeInfo != nil && r.NodeCaps != nil {
		if i.vm == nil || i.vm.externalNodeID != r.NodeInfo.ID {
			i.vm = &volumeManager{
				pluginID: i.plugin.Name, externalNodeID: r.NodeInfo.ID,
				client: i.client, paths: i.paths, usage: usageStore{db: i.m.cfg.DB}, locks: &i.m.locks,
				isMountpoint: i.m.cfg.IsMountpoint, logger: i.logger, published: &i.m.published,
			}
			ready = true
		}
		i.vm.learn(r.nodeCapsConn, r.NodeCaps)
	}
	i.lock.Unlock()
	if changed {
		i.logger.Debug("plugin fingerprint changed", "healthy", info.Healthy, "health", info.HealthDescription)
		i.m.cfg.UpdateNode(i.typ, i.plugin.Name, info.Copy())
	}
	if ready {
		i.m.notify()
	}
}

// nodeTopology is the accessible topology of plugin's node instance on
// this client, nil when it has none or there is no such instance: the
// topology a controller's GetCapacity is asked about.
func (m *Manager) nodeTopology(plugin string) *structs.CSITopology {
	m.lock.Lock()
	node := m.instances[instanceKey{dynamicplugins.PluginTypeCSINode, plugin}]
	m.lock.Unlock()
	if node == nil {
		return nil
	}
	if info := node.lastInfo(); info != nil && info.NodeInfo != nil {
		return info.NodeInfo.AccessibleTopology
	}
	return nil
}

// volumeManager returns the instance's VolumeManager, or nil while it
// cannot mount yet.
func (i *instance) volumeManager() *volumeManager {
	i.lock.Lock()
	defer i.lock.Unlock()
	return i.vm
}

// lastInfo returns the latest fingerprint, or nil.
func (i *instance) lastInfo() *structs.CSIInfo {
	i.lock.Lock()
	defer i.lock.Unlock()
	return i.last.Copy()
}

// stop ends the instance's goroutine, waits for it and closes the client.
func (i *instance) stop() {
	i.cancel()
	<-i.done
	if err := i.client.Close(); err != nil {
		i.logger.Debug("closing plugin client", "error", err)
	}
}
