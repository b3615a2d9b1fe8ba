package state

import (
	"fmt"

	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/nomad/structs"
)

// AllocByID returns the alloc, or nil. Do not mutate it.
func (s *StateStore) AllocByID(ws memdb.WatchSet, id string) (*structs.Allocation, error) {
	raw, err := s.first(ws, TableAllocs, IndexID, id)
	if raw == nil || err != nil {
		return nil, err
	}
	return raw.(*structs.Allocation), nil
}

// Allocs iterates over all allocs (*structs.Allocation) by ID.
func (s *StateStore) Allocs(ws memdb.WatchSet) (memdb.ResultIterator, error) {
	return s.list(ws, TableAllocs, IndexID)
}

// AllocsByIDPrefix iterates over the allocs of ns (or all namespaces)
// whose ID starts with prefix.
func (s *StateStore) AllocsByIDPrefix(ws memdb.WatchSet, ns, prefix string) (memdb.ResultIterator, error) {
	iter, err := s.list(ws, TableAllocs, IndexID+prefixSuffix, prefix)
	if err != nil {
		return nil, err
	}
	return inNamespace(iter, ns, func(a *structs.Allocation) string { return a.Namespace }), nil
}

// AllocsByJob returns the allocs of a job. Do not mutate them.
func (s *StateStore) AllocsByJob(ws memdb.WatchSet, ns, jobID string) ([]*structs.Allocation, error) {
	iter, err := s.list(ws, TableAllocs, IndexJob, ns, jobID)
	if err != nil {
		return nil, err
	}
	return collect[*structs.Allocation](iter), nil
}

// AllocsByNode returns the allocs placed on a node. Do not mutate them.
func (s *StateStore) AllocsByNode(ws memdb.WatchSet, nodeID string) ([]*structs.Allocation, error) {
	iter, err := s.list(ws, TableAllocs, IndexNode, nodeID)
	if err != nil {
		return nil, err
	}
	return collect[*structs.Allocation](iter), nil
}

// UpdateAllocsFromClient merges the fields a client owns — ClientStatus,
// ClientDescription, TaskStates, TasksExited, ModifyTime — from each
// update onto a copy of the stored alloc, and upserts the evals the
// updates cause, in one write. Everything else in an update is ignored.
// Unknown alloc IDs are skipped without error (the alloc may have been
// garbage collected while the update was in flight). An update with an
// empty ClientStatus keeps the stored one.
//
// An update that an applied one overtook is dropped whole: its task
// states end before the stored ones' (structs.LastClientTime). Seed
// 29427: a client's update, sent while the cluster had no leader, waited
// in a server's forward until a leader was elected; meanwhile the client
// was killed and restarted, its new process reported the task started,
// and the old report then landed on top of it — the servers saw the alloc
// pending for good (the restarted client had nothing new to say). Reports
// of one alloc come from one node, so its clock orders them.
func (s *StateStore) UpdateAllocsFromClient(index uint64, allocs []*structs.Allocation, evals ...*structs.Evaluation) error {
	txn := s.writeTxn(index)
	defer txn.Abort()
	for _, u := range allocs {
		if u == nil {
			continue
		}
		existing, err := allocTxn(txn, u.ID)
		if err != nil {
			return err
		}
		if existing == nil {
			continue
		}
		if len(u.TaskStates) > 0 && structs.LastClientTime(u.TaskStates) < structs.LastClientTime(existing.TaskStates) {
			continue // overtaken by a report already applied
		}
		a := existing.Copy()
		if u.ClientStatus != "" {
			a.ClientStatus = u.ClientStatus
		}
		a.ClientDescription = u.ClientDescription
		a.TaskStates = copyTaskStates(u.TaskStates)
		a.TasksExited = u.TasksExited
		a.ModifyTime = u.ModifyTime
		a.ModifyIndex = index
		if err := txn.Insert(TableAllocs, a); err != nil {
			return fmt.Errorf("updating alloc %q: %w", a.ID, err)
		}
		txn.touchJobLive(a)
	}
	if err := upsertEvalsTxn(txn, evals); err != nil {
		return err
	}
	return txn.commit()
}

// DeleteAllocs removes allocs (GC). Unknown IDs are skipped. Volume
// claims are not touched: a claim is freed only through the claim
// protocol, and the volumewatcher frees claims of allocs that are gone.
func (s *StateStore) DeleteAllocs(index uint64, ids []string) error {
	txn := s.writeTxn(index)
	defer txn.Abort()
	for _, id := range ids {
		existing, err := allocTxn(txn, id)
		if err != nil {
			return err
		}
		if existing == nil {
			continue
		}
		if err := txn.Delete(TableAllocs, existing); err != nil {
			return fmt.Errorf("deleting alloc %q: %w", id, err)
		}
	}
	return txn.commit()
}

func allocTxn(txn *writeTxn, id string) (*structs.Allocation, error) {
	raw, err := txn.First(TableAllocs, IndexID, id)
	if err != nil {
		return nil, fmt.Errorf("reading alloc %q: %w", id, err)
	}
	if raw == nil {
		return nil, nil
	}
	return raw.(*structs.Allocation), nil
}

func copyTaskStates(in map[string]*structs.TaskState) map[string]*structs.TaskState {
	if in == nil {
		return nil
	}
	out := make(map[string]*structs.TaskState, len(in))
	for name, ts := range in {
		out[name] = ts.Copy()
	}
	return out
}

// StopAlloc marks alloc id stopped by an operator (desc says why) and
// stores eval, in one transaction: the scheduler then sees the alloc as
// stopped and places a replacement. An unknown alloc is an error.
func (s *StateStore) StopAlloc(index uint64, id, desc string, ts int64, eval *structs.Evaluation) error {
	txn := s.writeTxn(index)
	defer txn.Abort()
	existing, err := allocTxn(txn, id)
	if err != nil {
		return err
	}
	if existing == nil {
		return structs.NotFound("alloc", id)
	}
	if err := stopAllocTxn(txn, &structs.AllocStopUpdate{AllocID: id, DesiredDescription: desc}, ts); err != nil {
		return err
	}
	if eval != nil {
		if err := upsertEvalsTxn(txn, []*structs.Evaluation{eval}); err != nil {
			return err
		}
	}
	return txn.commit()
}
