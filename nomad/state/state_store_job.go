package state

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/nomad/structs"
)

// JobByID returns the job, or nil. Do not mutate it.
func (s *StateStore) JobByID(ws memdb.WatchSet, ns, id string) (*structs.Job, error) {
	raw, err := s.first(ws, TableJobs, IndexID, ns, id)
	if raw == nil || err != nil {
		return nil, err
	}
	return raw.(*structs.Job), nil
}

// Jobs iterates over the jobs (*structs.Job) of namespace ns, or of every
// namespace when ns is structs.AllNamespaces, ordered by namespace and ID.
func (s *StateStore) Jobs(ws memdb.WatchSet, ns string) (memdb.ResultIterator, error) {
	if ns == structs.AllNamespaces {
		return s.list(ws, TableJobs, IndexID)
	}
	return s.list(ws, TableJobs, IndexID+prefixSuffix, ns, "")
}

// JobsByIDPrefix iterates over the jobs of ns (or all namespaces) whose ID
// starts with prefix.
func (s *StateStore) JobsByIDPrefix(ws memdb.WatchSet, ns, prefix string) (memdb.ResultIterator, error) {
	if ns != structs.AllNamespaces {
		return s.list(ws, TableJobs, IndexID+prefixSuffix, ns, prefix)
	}
	iter, err := s.list(ws, TableJobs, IndexID)
	if err != nil {
		return nil, err
	}
	return memdb.NewFilterIterator(iter, func(raw any) bool {
		return !strings.HasPrefix(raw.(*structs.Job).ID, prefix)
	}), nil
}

// UpsertJob registers or updates a job, with the evals it creates, in one
// write. A new job gets CreateIndex, JobModifyIndex, Version 0 and status
// pending. An update keeps CreateIndex and the status; when the spec
// changed (anything but the server-managed fields and SubmitTime) it bumps
// Version and sets JobModifyIndex to index. It keeps the default number of
// versions; RegisterJob takes it.
func (s *StateStore) UpsertJob(index uint64, job *structs.Job, evals ...*structs.Evaluation) error {
	return s.RegisterJob(index, job, 0, evals...)
}

// RegisterJob is UpsertJob keeping the newest keep versions of the job
// (<= 0: structs.DefaultJobTrackedVersions).
func (s *StateStore) RegisterJob(index uint64, job *structs.Job, keep int, evals ...*structs.Evaluation) error {
	txn := s.writeTxn(index)
	defer txn.Abort()
	if err := upsertJobTxn(txn, job, keep); err != nil {
		return err
	}
	if err := upsertEvalsTxn(txn, evals); err != nil {
		return err
	}
	return txn.commit()
}

// StopJob marks a job stopped (deregister without purge): a new version
// with Stop set, with the evals it creates. It keeps the default number of
// versions; StopJobKeeping takes it.
func (s *StateStore) StopJob(index uint64, ns, id string, evals ...*structs.Evaluation) error {
	return s.StopJobKeeping(index, ns, id, 0, 0, evals...)
}

// StopJobKeeping is StopJob keeping the newest keep versions of the job;
// the stopped version's SubmitTime is at (0: unchanged), when the stop
// was asked for.
func (s *StateStore) StopJobKeeping(index uint64, ns, id string, keep int, at int64, evals ...*structs.Evaluation) error {
	txn := s.writeTxn(index)
	defer txn.Abort()
	existing, err := jobTxn(txn, ns, id)
	if err != nil {
		return err
	}
	if existing == nil {
		return structs.NotFound("job", id)
	}
	j := existing.Copy()
	j.Stop = true
	if at != 0 && jobSpecChanged(existing, j) {
		j.SubmitTime = at
	}
	if err := upsertJobTxn(txn, j, keep); err != nil {
		return err
	}
	if err := upsertEvalsTxn(txn, evals); err != nil {
		return err
	}
	return txn.commit()
}

// DeleteJob purges a job and its kept versions, with the evals the purge
// creates. Its allocs and evals stay until GC; purging never touches
// volume claims. An unknown job is CodeNotFound.
func (s *StateStore) DeleteJob(index uint64, ns, id string, evals ...*structs.Evaluation) error {
	txn := s.writeTxn(index)
	defer txn.Abort()
	existing, err := jobTxn(txn, ns, id)
	if err != nil {
		return err
	}
	if existing == nil {
		return structs.NotFound("job", id)
	}
	if err := txn.Delete(TableJobs, existing); err != nil {
		return fmt.Errorf("deleting job %q: %w", id, err)
	}
	if err := deleteJobVersionsTxn(txn, ns, id); err != nil {
		return err
	}
	if err := upsertEvalsTxn(txn, evals); err != nil {
		return err
	}
	return txn.commit()
}

func upsertJobTxn(txn *writeTxn, job *structs.Job, keep int) error {
	if job == nil || job.ID == "" {
		return structs.NewError(structs.CodeInvalid, "registering job: missing job ID")
	}
	j := job.Copy()
	if j.Namespace == "" {
		j.Namespace = structs.DefaultNamespace
	}
	existing, err := jobTxn(txn, j.Namespace, j.ID)
	if err != nil {
		return err
	}
	if existing != nil {
		j.CreateIndex = existing.CreateIndex
		j.Status = existing.Status
		if jobSpecChanged(existing, j) {
			j.Version = existing.Version + 1
			j.JobModifyIndex = txn.index
			j.Stable = false
		} else {
			j.Version = existing.Version
			j.JobModifyIndex = existing.JobModifyIndex
			j.Stable = existing.Stable
		}
	} else {
		j.CreateIndex = txn.index
		j.JobModifyIndex = txn.index
		j.Version = 0
		j.Status = structs.JobStatusPending
		j.Stable = false
	}
	j.ModifyIndex = txn.index
	if err := txn.Insert(TableJobs, j); err != nil {
		return fmt.Errorf("registering job %q: %w", j.ID, err)
	}
	if err := upsertJobVersionTxn(txn, j, keep); err != nil {
		return err
	}
	txn.touchJob(j.Namespace, j.ID)
	return nil
}

// jobSpecChanged reports whether b differs from a in anything the user
// submits: server-managed fields and SubmitTime are ignored.
func jobSpecChanged(a, b *structs.Job) bool {
	strip := func(j *structs.Job) structs.Job {
		c := *j
		c.Status, c.Version, c.SubmitTime, c.Stable = "", 0, 0, false
		c.CreateIndex, c.ModifyIndex, c.JobModifyIndex = 0, 0, 0
		return c
	}
	return !reflect.DeepEqual(strip(a), strip(b))
}

// updateJobStatusesTxn recomputes the status of every job whose allocs,
// evals or spec changed in txn, and writes those that differ:
//
//	any alloc not terminal                    running
//	else any eval pending or blocked          pending
//	else stopped, or ever had allocs/evals    dead
//	else                                      pending
//
// A job whose txn wrote a live alloc (touchJobLive) is running if that
// alloc still is one of its allocs, not terminal: the first row of the
// table above, decided by one lookup instead of reading the job's allocs.
func updateJobStatusesTxn(txn *writeTxn) error {
	for key, live := range txn.jobs {
		job, err := jobTxn(txn, key.ns, key.id)
		if err != nil {
			return err
		}
		if job == nil {
			continue
		}
		status, err := liveJobStatusTxn(txn, job, live)
		if err != nil {
			return err
		}
		if status == job.Status {
			continue
		}
		// Stored objects are never changed in place, so the new row
		// shares everything but its own fields with the old one.
		j := new(structs.Job)
		*j = *job
		j.Status = status
		j.ModifyIndex = txn.index
		if err := txn.Insert(TableJobs, j); err != nil {
			return fmt.Errorf("updating status of job %q: %w", j.ID, err)
		}
		// Same version: replaces its row, never trims.
		if err := upsertJobVersionTxn(txn, j, 0); err != nil {
			return err
		}
	}
	return nil
}

// liveJobStatusTxn is jobStatusTxn, answered by one lookup when the
// alloc named by live (touchJobLive's hint) is the job's and not terminal.
func liveJobStatusTxn(txn *writeTxn, job *structs.Job, live string) (string, error) {
	if live != "" {
		a, err := allocTxn(txn, live)
		if err != nil {
			return "", err
		}
		if a != nil && a.Namespace == job.Namespace && a.JobID == job.ID && !a.TerminalStatus() {
			return structs.JobStatusRunning, nil
		}
	}
	return jobStatusTxn(txn, job)
}

func jobStatusTxn(txn *writeTxn, job *structs.Job) (string, error) {
	allocs, err := txn.Get(TableAllocs, IndexJob, job.Namespace, job.ID)
	if err != nil {
		return "", fmt.Errorf("listing allocs of job %q: %w", job.ID, err)
	}
	hadAllocs := false
	for raw := allocs.Next(); raw != nil; raw = allocs.Next() {
		hadAllocs = true
		if !raw.(*structs.Allocation).TerminalStatus() {
			return structs.JobStatusRunning, nil
		}
	}
	evals, err := txn.Get(TableEvals, IndexJob, job.Namespace, job.ID)
	if err != nil {
		return "", fmt.Errorf("listing evals of job %q: %w", job.ID, err)
	}
	hadEvals := false
	for raw := evals.Next(); raw != nil; raw = evals.Next() {
		hadEvals = true
		if !raw.(*structs.Evaluation).TerminalStatus() {
			return structs.JobStatusPending, nil
		}
	}
	if job.Stop || hadAllocs || hadEvals {
		return structs.JobStatusDead, nil
	}
	return structs.JobStatusPending, nil
}

func jobTxn(txn *writeTxn, ns, id string) (*structs.Job, error) {
	raw, err := txn.First(TableJobs, IndexID, ns, id)
	if err != nil {
		return nil, fmt.Errorf("reading job %q: %w", id, err)
	}
	if raw == nil {
		return nil, nil
	}
	return raw.(*structs.Job), nil
}
