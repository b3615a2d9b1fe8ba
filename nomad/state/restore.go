package state

import (
	"fmt"

	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/nomad/structs"
)

// StateRestore loads a snapshot into a store in one write transaction.
// Objects are inserted as they are: indexes are not bumped (IndexRestore
// restores the index table itself) and nothing is derived, except that a
// job without a kept version (a snapshot written before versions were
// kept) gets its version in force as one, and each plugin's counts are
// recounted from its instances (a snapshot written before the instances
// had their own table carries them in the plugin: they are moved to it). Call Commit when every object
// is in, or Abort to drop them all. Not safe for concurrent use.
type StateRestore struct {
	txn *memdb.Txn
}

// Restore starts a restore. Restore into a new, empty store, commit, then
// swap it in for the old one and Abandon the old one (the FSM does this);
// restoring into a store that already holds objects would mix old and new.
func (s *StateStore) Restore() (*StateRestore, error) {
	return &StateRestore{txn: s.db.Txn(true)}, nil
}

// Commit makes the restored objects visible.
func (r *StateRestore) Commit() error {
	if err := backfillJobVersions(r.txn); err != nil {
		return fmt.Errorf("restoring job versions: %w", err)
	}
	if err := recountPlugins(r.txn); err != nil {
		return fmt.Errorf("restoring CSI plugins: %w", err)
	}
	r.txn.Commit()
	return nil
}

// Abort drops the restore.
func (r *StateRestore) Abort() { r.txn.Abort() }

func (r *StateRestore) insert(table string, obj any) error {
	if err := r.txn.Insert(table, obj); err != nil {
		return fmt.Errorf("restoring %s: %w", table, err)
	}
	return nil
}

// NodeRestore restores a node.
func (r *StateRestore) NodeRestore(n *structs.Node) error { return r.insert(TableNodes, n) }

// JobRestore restores a job.
func (r *StateRestore) JobRestore(j *structs.Job) error { return r.insert(TableJobs, j) }

// AllocRestore restores an alloc.
func (r *StateRestore) AllocRestore(a *structs.Allocation) error { return r.insert(TableAllocs, a) }

// EvalRestore restores an eval.
func (r *StateRestore) EvalRestore(e *structs.Evaluation) error { return r.insert(TableEvals, e) }

// CSIVolumeRestore restores a volume, claims included.
func (r *StateRestore) CSIVolumeRestore(v *structs.CSIVolume) error {
	return r.insert(TableCSIVolumes, v)
}

// CSIPluginRestore restores a plugin. A plugin with instance maps (from a
// snapshot written before the instances had their own table) has them
// moved to csi_plugin_instances, one row per node, and is stored as the
// summary row the store keeps now.
func (r *StateRestore) CSIPluginRestore(p *structs.CSIPlugin) error {
	if p.Controllers == nil && p.Nodes == nil {
		return r.insert(TableCSIPlugins, p)
	}
	rows := map[string]*structs.CSIPluginInstance{}
	row := func(nodeID string) *structs.CSIPluginInstance {
		in := rows[nodeID]
		if in == nil {
			in = &structs.CSIPluginInstance{PluginID: p.ID, NodeID: nodeID, ModifyIndex: p.ModifyIndex}
			rows[nodeID] = in
		}
		return in
	}
	for nodeID, info := range p.Controllers {
		if info != nil {
			row(nodeID).Controller = info
		}
	}
	for nodeID, info := range p.Nodes {
		if info != nil {
			row(nodeID).Node = info
		}
	}
	for _, in := range rows {
		if err := r.insert(TableCSIPluginInstances, in); err != nil {
			return err
		}
	}
	summary := *p
	summary.Controllers, summary.Nodes = nil, nil
	return r.insert(TableCSIPlugins, &summary)
}

// CSIPluginInstanceRestore restores one node's instances of a plugin.
func (r *StateRestore) CSIPluginInstanceRestore(in *structs.CSIPluginInstance) error {
	return r.insert(TableCSIPluginInstances, in)
}

// recountPlugins recomputes every plugin's counts and flags from its
// instances: the tally behind the flags is not in snapshots, and a count
// that disagreed with the rows would stay wrong for good, as node writes
// only adjust it.
func recountPlugins(txn *memdb.Txn) error {
	iter, err := txn.Get(TableCSIPlugins, IndexID)
	if err != nil {
		return err
	}
	var plugins []*structs.CSIPlugin
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		plugins = append(plugins, raw.(*structs.CSIPlugin))
	}
	for _, p := range plugins {
		rows, err := txn.Get(TableCSIPluginInstances, IndexID+prefixSuffix, p.ID)
		if err != nil {
			return err
		}
		var instances []*structs.CSIPluginInstance
		for raw := rows.Next(); raw != nil; raw = rows.Next() {
			instances = append(instances, raw.(*structs.CSIPluginInstance))
		}
		cp := *p
		cp.RecountFrom(instances)
		if err := txn.Insert(TableCSIPlugins, &cp); err != nil {
			return fmt.Errorf("recounting CSI plugin %q: %w", p.ID, err)
		}
	}
	return nil
}

// IndexRestore restores one row of the index table.
func (r *StateRestore) IndexRestore(e *IndexEntry) error { return r.insert(TableIndex, e) }

// ACLPolicyRestore restores a policy.
func (r *StateRestore) ACLPolicyRestore(p *structs.ACLPolicy) error {
	return r.insert(TableACLPolicies, p)
}

// ACLTokenRestore restores a token (with its secret hash, never a secret).
func (r *StateRestore) ACLTokenRestore(t *structs.ACLToken) error {
	t.SecretID = ""
	return r.insert(TableACLTokens, t)
}
