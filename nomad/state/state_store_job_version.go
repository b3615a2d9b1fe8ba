package state

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/nomad/structs"
)

// Job versions. Every write of a job to the jobs table also writes the
// same object to the job_versions table under (namespace, ID, Version):
// a registration that changes the spec adds a row, and anything that
// rewrites the version in force (a status change, an identical
// re-registration with a new SubmitTime) replaces its row, so the newest
// row is always the job as the jobs table holds it. Adding a row trims the
// job's rows to the newest keep; a purge removes them all.

// JobVersionsByID returns the versions the store keeps of one job (exact
// namespace and ID), newest first; none when there is no such job. Do not
// mutate them.
func (s *StateStore) JobVersionsByID(ws memdb.WatchSet, ns, id string) ([]*structs.Job, error) {
	iter, err := s.list(ws, TableJobVersions, IndexJob, ns, id)
	if err != nil {
		return nil, err
	}
	return sortVersions(collect[*structs.Job](iter)), nil
}

// JobByIDAndVersion returns one kept version of a job, or nil.
func (s *StateStore) JobByIDAndVersion(ws memdb.WatchSet, ns, id string, version uint64) (*structs.Job, error) {
	raw, err := s.first(ws, TableJobVersions, IndexID, ns, id, version)
	if raw == nil || err != nil {
		return nil, err
	}
	return raw.(*structs.Job), nil
}

// JobVersions iterates over every kept version of every job, for
// snapshots.
func (s *StateStore) JobVersions(ws memdb.WatchSet) (memdb.ResultIterator, error) {
	return s.list(ws, TableJobVersions, IndexID)
}

// JobVersionRestore restores one kept version of a job.
func (r *StateRestore) JobVersionRestore(j *structs.Job) error {
	return r.insert(TableJobVersions, j)
}

// sortVersions orders versions newest first. The table's index keys
// versions as uvarints, whose byte order is not numeric order.
func sortVersions(vs []*structs.Job) []*structs.Job {
	slices.SortFunc(vs, func(a, b *structs.Job) int { return cmp.Compare(b.Version, a.Version) })
	return vs
}

// upsertJobVersionTxn writes j (just written to the jobs table) as its
// version's row. When that row is new, the job's oldest rows beyond keep
// (<= 0: structs.DefaultJobTrackedVersions) are deleted.
func upsertJobVersionTxn(txn *writeTxn, j *structs.Job, keep int) error {
	existing, err := txn.First(TableJobVersions, IndexID, j.Namespace, j.ID, j.Version)
	if err != nil {
		return fmt.Errorf("reading version %d of job %q: %w", j.Version, j.ID, err)
	}
	if err := txn.Insert(TableJobVersions, j); err != nil {
		return fmt.Errorf("recording version %d of job %q: %w", j.Version, j.ID, err)
	}
	if existing != nil {
		return nil
	}
	if keep <= 0 {
		keep = structs.DefaultJobTrackedVersions
	}
	iter, err := txn.Get(TableJobVersions, IndexJob, j.Namespace, j.ID)
	if err != nil {
		return fmt.Errorf("listing versions of job %q: %w", j.ID, err)
	}
	all := sortVersions(collect[*structs.Job](iter))
	if len(all) <= keep {
		return nil
	}
	for _, old := range all[keep:] {
		if err := txn.Delete(TableJobVersions, old); err != nil {
			return fmt.Errorf("dropping version %d of job %q: %w", old.Version, j.ID, err)
		}
	}
	return nil
}

// UpdateJobStability marks one kept version of a job stable or not; when
// it is the version in force, the job too. A job or version not kept is
// CodeNotFound. It is no new version.
func (s *StateStore) UpdateJobStability(index uint64, ns, id string, version uint64, stable bool) error {
	txn := s.writeTxn(index)
	defer txn.Abort()
	raw, err := txn.First(TableJobVersions, IndexID, ns, id, version)
	if err != nil {
		return fmt.Errorf("reading version %d of job %q: %w", version, id, err)
	}
	if raw == nil {
		return structs.NewError(structs.CodeNotFound, "job %q has no version %d kept in namespace %q", id, version, ns)
	}
	v := raw.(*structs.Job).Copy()
	v.Stable = stable
	v.ModifyIndex = index
	if err := txn.Insert(TableJobVersions, v); err != nil {
		return fmt.Errorf("marking version %d of job %q: %w", version, id, err)
	}
	cur, err := jobTxn(txn, ns, id)
	if err != nil {
		return err
	}
	if cur != nil && cur.Version == version {
		if err := txn.Insert(TableJobs, v); err != nil {
			return fmt.Errorf("marking job %q: %w", id, err)
		}
	}
	return txn.commit()
}

// deleteJobVersionsTxn removes every kept version of a job (on purge).
func deleteJobVersionsTxn(txn *writeTxn, ns, id string) error {
	if _, err := txn.DeleteAll(TableJobVersions, IndexJob, ns, id); err != nil {
		return fmt.Errorf("deleting versions of job %q: %w", id, err)
	}
	txn.tables[TableJobVersions] = struct{}{}
	return nil
}

// backfillJobVersions gives each job that has no row for its version in
// force one (snapshots from servers that did not keep versions), so
// JobVersionsByID always lists at least the job in force.
func backfillJobVersions(txn *memdb.Txn) error {
	iter, err := txn.Get(TableJobs, IndexID)
	if err != nil {
		return fmt.Errorf("listing jobs: %w", err)
	}
	// Collected first: inserting while iterating one write transaction is
	// not safe in go-memdb.
	for _, j := range collect[*structs.Job](iter) {
		v, err := txn.First(TableJobVersions, IndexID, j.Namespace, j.ID, j.Version)
		if err != nil {
			return fmt.Errorf("reading version %d of job %q: %w", j.Version, j.ID, err)
		}
		if v != nil {
			continue
		}
		if err := txn.Insert(TableJobVersions, j); err != nil {
			return fmt.Errorf("recording version %d of job %q: %w", j.Version, j.ID, err)
		}
	}
	return nil
}
