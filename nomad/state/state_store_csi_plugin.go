package state

import (
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/nomad/structs"
)

// The csi_plugins table is derived: nothing writes a plugin directly
// except DeleteCSIPlugin. Each node write recomputes, for every plugin the
// node reported before or reports now, that node's controller and node
// instance from the node's fingerprint:
//
//	node fingerprint (CSIControllerPlugins, CSINodePlugins)
//	        │  node status down ──► instances kept, Healthy=false, "node down"
//	        ▼
//	plugin.Controllers[nodeID], plugin.Nodes[nodeID] ──► RecountHealth
//
// A plugin whose last instance goes away stays, empty, until plugin GC
// deletes it (DeleteCSIPlugin refuses a non-empty plugin).

// healthNodeDown is the health description of instances on a down node.
const healthNodeDown = "node down"

// CSIPluginByID returns the plugin, or nil. Do not mutate it.
func (s *StateStore) CSIPluginByID(ws memdb.WatchSet, id string) (*structs.CSIPlugin, error) {
	raw, err := s.first(ws, TableCSIPlugins, IndexID, id)
	if raw == nil || err != nil {
		return nil, err
	}
	return raw.(*structs.CSIPlugin), nil
}

// CSIPlugins iterates over all plugins (*structs.CSIPlugin) by ID.
func (s *StateStore) CSIPlugins(ws memdb.WatchSet) (memdb.ResultIterator, error) {
	return s.list(ws, TableCSIPlugins, IndexID)
}

// CSIPluginsByIDPrefix iterates over the plugins whose ID starts with prefix.
func (s *StateStore) CSIPluginsByIDPrefix(ws memdb.WatchSet, prefix string) (memdb.ResultIterator, error) {
	return s.list(ws, TableCSIPlugins, IndexID+prefixSuffix, prefix)
}

// DeleteCSIPlugin removes a plugin no node runs any more (plugin GC). A
// plugin with instances is refused with CodeConflict; an unknown one with
// CodeNotFound.
func (s *StateStore) DeleteCSIPlugin(index uint64, id string) error {
	txn := s.writeTxn(index)
	defer txn.Abort()
	p, err := pluginTxn(txn, id)
	if err != nil {
		return err
	}
	if p == nil {
		return structs.NotFound("CSI plugin", id)
	}
	if !p.IsEmpty() {
		return structs.NewError(structs.CodeConflict,
			"CSI plugin %q is still running on nodes (%d controller and %d node instances); stop its jobs first",
			id, len(p.Controllers), len(p.Nodes))
	}
	if err := txn.Delete(TableCSIPlugins, p); err != nil {
		return fmt.Errorf("deleting CSI plugin %q: %w", id, err)
	}
	return txn.commit()
}

// updateNodePluginsTxn brings the plugins of node prev (as stored before
// this write; nil for a new node) in line with node (as stored after it;
// nil when the node is deleted). A plugin is written only when it changes,
// so node writes that do not touch CSI leave the csi_plugins index alone.
func updateNodePluginsTxn(txn *writeTxn, prev, node *structs.Node) error {
	var nodeID string
	ids := map[string]struct{}{}
	for _, n := range []*structs.Node{prev, node} {
		if n == nil {
			continue
		}
		nodeID = n.ID
		for id := range n.CSIControllerPlugins {
			ids[id] = struct{}{}
		}
		for id := range n.CSINodePlugins {
			ids[id] = struct{}{}
		}
	}
	controllers, nodes := pluginInstances(node)
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		if err := updatePluginInstancesTxn(txn, id, nodeID, controllers[id], nodes[id]); err != nil {
			return err
		}
	}
	return nil
}

// pluginInstances returns copies of the node's plugin instances as the
// servers count them: unhealthy when the node is down.
func pluginInstances(node *structs.Node) (controllers, nodes map[string]*structs.CSIInfo) {
	if node == nil {
		return nil, nil
	}
	adjust := func(in map[string]*structs.CSIInfo) map[string]*structs.CSIInfo {
		out := make(map[string]*structs.CSIInfo, len(in))
		for id, info := range in {
			if info == nil {
				continue
			}
			c := info.Copy()
			if c.PluginID == "" {
				c.PluginID = id
			}
			if node.Status == structs.NodeStatusDown {
				c.Healthy = false
				c.HealthDescription = healthNodeDown
			}
			out[id] = c
		}
		return out
	}
	return adjust(node.CSIControllerPlugins), adjust(node.CSINodePlugins)
}

// updatePluginInstancesTxn sets (or removes, when nil) nodeID's controller
// and node instance of plugin id.
//
// A plugin holds one instance per node, so its cost must not grow with the
// cluster (issue 20: copying and comparing the whole plugin on every node
// write made registering N nodes O(N²) in the FSM). Only nodeID's own
// instances are compared; when they and the provider are unchanged nothing
// is written. Otherwise the plugin is copied shallowly: a map whose entry
// changes is cloned (pointers only) and the others are shared with the
// stored plugin. That is safe because stored instances, like every memdb
// object, are never mutated in place.
func updatePluginInstancesTxn(txn *writeTxn, id, nodeID string, controller, node *structs.CSIInfo) error {
	existing, err := pluginTxn(txn, id)
	if err != nil {
		return err
	}
	if existing == nil && controller == nil && node == nil {
		return nil
	}
	var p *structs.CSIPlugin
	var oldController, oldNode *structs.CSIInfo
	if existing != nil {
		oldController, oldNode = existing.Controllers[nodeID], existing.Nodes[nodeID]
		cp := *existing
		p = &cp
	} else {
		p = &structs.CSIPlugin{ID: id, CreateIndex: txn.index}
	}
	controllerSame := reflect.DeepEqual(oldController, controller)
	nodeSame := reflect.DeepEqual(oldNode, node)
	if !controllerSame {
		p.Controllers = withInstance(p.Controllers, nodeID, controller)
	}
	if !nodeSame {
		p.Nodes = withInstance(p.Nodes, nodeID, node)
	}

	// Provider and version come from the instance just written;
	// ControllerRequired holds if any instance says so. Both stay as they
	// were once the plugin is empty.
	for _, info := range []*structs.CSIInfo{node, controller} {
		if info != nil && info.Provider != "" {
			p.Provider, p.Version = info.Provider, info.ProviderVersion
		}
	}
	if existing != nil && controllerSame && nodeSame {
		// Every other field is derived from the instances, which are
		// unchanged, so the stored values still hold.
		if p.Provider == existing.Provider && p.Version == existing.Version {
			return nil
		}
	} else {
		if !p.IsEmpty() {
			p.ControllerRequired = false
			for _, m := range []map[string]*structs.CSIInfo{p.Controllers, p.Nodes} {
				for _, info := range m {
					p.ControllerRequired = p.ControllerRequired || info.RequiresControllerPlugin
				}
			}
		}
		if len(p.Controllers) > 0 {
			p.PublishUnpublish, p.PublishReadOnly = false, false
			for _, info := range p.Controllers {
				if ci := info.ControllerInfo; ci != nil {
					p.PublishUnpublish = p.PublishUnpublish || ci.SupportsAttachDetach
					p.PublishReadOnly = p.PublishReadOnly || ci.SupportsReadOnlyAttach
				}
			}
		}
		p.RecountHealth()
	}

	p.ModifyIndex = txn.index
	if err := txn.Insert(TableCSIPlugins, p); err != nil {
		return fmt.Errorf("updating CSI plugin %q: %w", id, err)
	}
	return nil
}

// withInstance returns a copy of m with nodeID's entry set to info (or
// removed, when nil). m itself may be held by a stored plugin and is left
// alone; the entries are shared.
func withInstance(m map[string]*structs.CSIInfo, nodeID string, info *structs.CSIInfo) map[string]*structs.CSIInfo {
	out := make(map[string]*structs.CSIInfo, len(m)+1)
	maps.Copy(out, m)
	if info == nil {
		delete(out, nodeID)
	} else {
		out[nodeID] = info
	}
	return out
}

func pluginTxn(txn *writeTxn, id string) (*structs.CSIPlugin, error) {
	raw, err := txn.First(TableCSIPlugins, IndexID, id)
	if err != nil {
		return nil, fmt.Errorf("reading CSI plugin %q: %w", id, err)
	}
	if raw == nil {
		return nil, nil
	}
	return raw.(*structs.CSIPlugin), nil
}
