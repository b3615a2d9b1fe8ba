package state

import (
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/nomad/structs"
)

// The csi_plugins and csi_plugin_instances tables are derived: nothing
// writes them directly except DeleteCSIPlugin. Each node write recomputes,
// for every plugin the node reported before or reports now, that node's
// controller and node instance from the node's fingerprint:
//
//	node fingerprint (CSIControllerPlugins, CSINodePlugins)
//	        │  node status down ──► instances kept, Healthy=false, "node down"
//	        ▼
//	csi_plugin_instances row (plugin, node) ──► csi_plugins row: counts and flags
//
// The plugin's row is a summary (no instance maps): a node write changes
// its own instance row and the summary's counts, never a structure that
// grows with the cluster (issue 20: copying the plugin's map of every
// node's instance on each node write made registering N nodes O(N²) in
// the FSM). The summary is rewritten, with a new ModifyIndex, whenever an
// instance changes, so a read watching it sees every instance change.
//
// A plugin whose last instance goes away stays, empty, until plugin GC
// deletes it (DeleteCSIPlugin refuses a non-empty plugin).

// healthNodeDown is the health description of instances on a down node.
const healthNodeDown = "node down"

// CSIPluginByID returns the plugin with its instance maps filled in, or
// nil: a new object each call, which callers may keep but must not
// mutate (its instances are the store's). It reads every instance of the
// plugin, one per node that runs it: reads that need only the counts and
// flags use CSIPluginSummary, and those that need the controllers
// CSIPluginControllers. ws fires on any change of the plugin or of one of
// its instances.
func (s *StateStore) CSIPluginByID(ws memdb.WatchSet, id string) (*structs.CSIPlugin, error) {
	return s.pluginWithInstances(ws, id, true)
}

// pluginWithInstances reads plugin id's row and fills in its instances:
// every one (withNodes, the maps made for the counts expected), or only
// the controllers, read by the controller index (Nodes stays nil).
func (s *StateStore) pluginWithInstances(ws memdb.WatchSet, id string, withNodes bool) (*structs.CSIPlugin, error) {
	txn := s.db.Txn(false)
	ch, raw, err := txn.FirstWatch(TableCSIPlugins, IndexID, id)
	if err != nil {
		return nil, fmt.Errorf("reading CSI plugin %q: %w", id, err)
	}
	ws.Add(ch)
	if raw == nil {
		return nil, nil
	}
	p := *raw.(*structs.CSIPlugin)
	index, what := IndexController, "controllers"
	if withNodes {
		index, what = IndexID+prefixSuffix, "instances"
		if p.ControllersExpected > 0 {
			p.Controllers = make(map[string]*structs.CSIInfo, p.ControllersExpected)
		}
		if p.NodesExpected > 0 {
			p.Nodes = make(map[string]*structs.CSIInfo, p.NodesExpected)
		}
	}
	iter, err := txn.Get(TableCSIPluginInstances, index, id)
	if err != nil {
		return nil, fmt.Errorf("reading %s of CSI plugin %q: %w", what, id, err)
	}
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		in := raw.(*structs.CSIPluginInstance)
		if in.Controller != nil {
			if p.Controllers == nil {
				p.Controllers = map[string]*structs.CSIInfo{}
			}
			p.Controllers[in.NodeID] = in.Controller
		}
		if in.Node != nil && withNodes {
			if p.Nodes == nil {
				p.Nodes = map[string]*structs.CSIInfo{}
			}
			p.Nodes[in.NodeID] = in.Node
		}
	}
	return &p, nil
}

// CSIPluginSummary returns the plugin's stored row, or nil: its counts
// and flags, without instance maps (Controllers and Nodes are nil). It
// costs the same whatever the number of nodes, and the same object is
// returned until the plugin or one of its instances changes. Do not
// mutate it.
func (s *StateStore) CSIPluginSummary(ws memdb.WatchSet, id string) (*structs.CSIPlugin, error) {
	raw, err := s.first(ws, TableCSIPlugins, IndexID, id)
	if raw == nil || err != nil {
		return nil, err
	}
	return raw.(*structs.CSIPlugin), nil
}

// CSIPluginWithControllers returns the plugin with its Controllers map
// filled in and Nodes nil, or nil: what a controller operation (create,
// snapshot, expand) reads, without the node instances of every node.
// A new object each call; do not mutate its instances.
func (s *StateStore) CSIPluginWithControllers(ws memdb.WatchSet, id string) (*structs.CSIPlugin, error) {
	return s.pluginWithInstances(ws, id, false)
}

// CSIPluginControllers iterates over the instance rows of plugin id that
// hold a controller (*structs.CSIPluginInstance, by node ID), without
// reading its node instances.
func (s *StateStore) CSIPluginControllers(ws memdb.WatchSet, id string) (memdb.ResultIterator, error) {
	return s.list(ws, TableCSIPluginInstances, IndexController, id)
}

// CSIPluginInstances iterates over every instance row of plugin id
// (*structs.CSIPluginInstance, by node ID).
func (s *StateStore) CSIPluginInstances(ws memdb.WatchSet, id string) (memdb.ResultIterator, error) {
	return s.list(ws, TableCSIPluginInstances, IndexID+prefixSuffix, id)
}

// CSIPluginInstance returns nodeID's instances of plugin id, or nil. Do
// not mutate it.
func (s *StateStore) CSIPluginInstance(ws memdb.WatchSet, id, nodeID string) (*structs.CSIPluginInstance, error) {
	raw, err := s.first(ws, TableCSIPluginInstances, IndexID, id, nodeID)
	if raw == nil || err != nil {
		return nil, err
	}
	return raw.(*structs.CSIPluginInstance), nil
}

// AllCSIPluginInstances iterates over the instance rows of every plugin,
// for snapshots.
func (s *StateStore) AllCSIPluginInstances(ws memdb.WatchSet) (memdb.ResultIterator, error) {
	return s.list(ws, TableCSIPluginInstances, IndexID)
}

// CSIPlugins iterates over all plugins by ID: their summary rows
// (*structs.CSIPlugin without instance maps; see CSIPluginSummary).
func (s *StateStore) CSIPlugins(ws memdb.WatchSet) (memdb.ResultIterator, error) {
	return s.list(ws, TableCSIPlugins, IndexID)
}

// CSIPluginsByIDPrefix iterates over the summary rows of the plugins
// whose ID starts with prefix.
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
			id, p.ControllersExpected, p.NodesExpected)
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
// Only nodeID's own instance row is read and compared; when it and the
// provider are unchanged nothing is written. Otherwise the row is
// replaced and the plugin's summary is copied (a small struct: it holds
// no instances) with its counts and flags moved from the old instances to
// the new (CSIPlugin.ReplaceInstances). So a node write costs the same at
// 10 nodes and at 5,000.
func updatePluginInstancesTxn(txn *writeTxn, id, nodeID string, controller, node *structs.CSIInfo) error {
	existing, err := pluginTxn(txn, id)
	if err != nil {
		return err
	}
	row, err := instanceTxn(txn, id, nodeID)
	if err != nil {
		return err
	}
	if existing == nil && row == nil && controller == nil && node == nil {
		return nil
	}
	var p *structs.CSIPlugin
	if existing != nil {
		cp := *existing
		p = &cp
	} else {
		p = &structs.CSIPlugin{ID: id, CreateIndex: txn.index}
	}
	var oldController, oldNode *structs.CSIInfo
	if row != nil {
		oldController, oldNode = row.Controller, row.Node
	}
	same := reflect.DeepEqual(oldController, controller) && reflect.DeepEqual(oldNode, node)

	// Provider and version come from the instance just written. They stay
	// as they were once the plugin is empty.
	for _, info := range []*structs.CSIInfo{node, controller} {
		if info != nil && info.Provider != "" {
			p.Provider, p.Version = info.Provider, info.ProviderVersion
		}
	}
	if existing != nil && same {
		// The counts and flags derive from the instances, which are
		// unchanged, so the stored values still hold.
		if p.Provider == existing.Provider && p.Version == existing.Version {
			return nil
		}
	} else {
		p.ReplaceInstances(oldController, oldNode, controller, node)
		switch {
		case controller == nil && node == nil:
			if row != nil {
				if err := txn.Delete(TableCSIPluginInstances, row); err != nil {
					return fmt.Errorf("removing node %q's instances of CSI plugin %q: %w", nodeID, id, err)
				}
			}
		default:
			in := &structs.CSIPluginInstance{PluginID: id, NodeID: nodeID, Controller: controller, Node: node, ModifyIndex: txn.index}
			if err := txn.Insert(TableCSIPluginInstances, in); err != nil {
				return fmt.Errorf("updating node %q's instances of CSI plugin %q: %w", nodeID, id, err)
			}
		}
	}

	p.ModifyIndex = txn.index
	if err := txn.Insert(TableCSIPlugins, p); err != nil {
		return fmt.Errorf("updating CSI plugin %q: %w", id, err)
	}
	return nil
}

func instanceTxn(txn *writeTxn, id, nodeID string) (*structs.CSIPluginInstance, error) {
	raw, err := txn.First(TableCSIPluginInstances, IndexID, id, nodeID)
	if err != nil {
		return nil, fmt.Errorf("reading node %q's instances of CSI plugin %q: %w", nodeID, id, err)
	}
	if raw == nil {
		return nil, nil
	}
	return raw.(*structs.CSIPluginInstance), nil
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
