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
// kept) gets its version in force as one. Call Commit when every object
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

// CSIPluginRestore restores a plugin.
func (r *StateRestore) CSIPluginRestore(p *structs.CSIPlugin) error {
	return r.insert(TableCSIPlugins, p)
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
