package state

import (
	"fmt"

	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/nomad/structs"
)

// EvalByID returns the eval, or nil. Do not mutate it.
func (s *StateStore) EvalByID(ws memdb.WatchSet, id string) (*structs.Evaluation, error) {
	raw, err := s.first(ws, TableEvals, IndexID, id)
	if raw == nil || err != nil {
		return nil, err
	}
	return raw.(*structs.Evaluation), nil
}

// Evals iterates over the evals (*structs.Evaluation) of ns, or of every
// namespace when ns is structs.AllNamespaces.
func (s *StateStore) Evals(ws memdb.WatchSet, ns string) (memdb.ResultIterator, error) {
	if ns == structs.AllNamespaces {
		return s.list(ws, TableEvals, IndexID)
	}
	return s.list(ws, TableEvals, IndexNamespace, ns)
}

// EvalsByIDPrefix iterates over the evals of ns (or all namespaces) whose
// ID starts with prefix.
func (s *StateStore) EvalsByIDPrefix(ws memdb.WatchSet, ns, prefix string) (memdb.ResultIterator, error) {
	iter, err := s.list(ws, TableEvals, IndexID+prefixSuffix, prefix)
	if err != nil {
		return nil, err
	}
	return inNamespace(iter, ns, func(e *structs.Evaluation) string { return e.Namespace }), nil
}

// EvalsByJob returns the evals of a job. Do not mutate them.
func (s *StateStore) EvalsByJob(ws memdb.WatchSet, ns, jobID string) ([]*structs.Evaluation, error) {
	iter, err := s.list(ws, TableEvals, IndexJob, ns, jobID)
	if err != nil {
		return nil, err
	}
	return collect[*structs.Evaluation](iter), nil
}

// UpsertEvals creates or updates evals. An update keeps CreateIndex (and
// CreateTime when the update has none).
func (s *StateStore) UpsertEvals(index uint64, evals []*structs.Evaluation) error {
	txn := s.writeTxn(index)
	defer txn.Abort()
	if err := upsertEvalsTxn(txn, evals); err != nil {
		return err
	}
	return txn.commit()
}

// DeleteEvals removes evals (GC). Unknown IDs are skipped: GC may race
// with itself and deleting twice is harmless.
func (s *StateStore) DeleteEvals(index uint64, ids []string) error {
	txn := s.writeTxn(index)
	defer txn.Abort()
	for _, id := range ids {
		raw, err := txn.First(TableEvals, IndexID, id)
		if err != nil {
			return fmt.Errorf("reading eval %q: %w", id, err)
		}
		if raw == nil {
			continue
		}
		if err := txn.Delete(TableEvals, raw); err != nil {
			return fmt.Errorf("deleting eval %q: %w", id, err)
		}
	}
	return txn.commit()
}

// upsertEvalsTxn writes evals that ride in the same Raft entry as another
// write (job register, node status, plan results, ...).
func upsertEvalsTxn(txn *writeTxn, evals []*structs.Evaluation) error {
	for _, eval := range evals {
		if eval == nil {
			continue
		}
		if eval.ID == "" {
			return structs.NewError(structs.CodeInvalid, "upserting eval: missing eval ID")
		}
		raw, err := txn.First(TableEvals, IndexID, eval.ID)
		if err != nil {
			return fmt.Errorf("reading eval %q: %w", eval.ID, err)
		}
		e := eval.Copy()
		if e.Namespace == "" {
			e.Namespace = structs.DefaultNamespace
		}
		if raw != nil {
			existing := raw.(*structs.Evaluation)
			e.CreateIndex = existing.CreateIndex
			if e.CreateTime == 0 {
				e.CreateTime = existing.CreateTime
			}
		} else {
			e.CreateIndex = txn.index
		}
		e.ModifyIndex = txn.index
		if err := txn.Insert(TableEvals, e); err != nil {
			return fmt.Errorf("upserting eval %q: %w", e.ID, err)
		}
		txn.touchJob(e.Namespace, e.JobID)
	}
	return nil
}
