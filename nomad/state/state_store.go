package state

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/nomad/structs"
)

// StateStore is the servers' replicated state: go-memdb tables written
// only by the FSM, at Raft indexes. Reads are lock-free and see a
// consistent point in time per call; writes are serialised by memdb.
//
// Objects returned by any read are shared with the store and with every
// other reader: callers must never mutate them (Copy first). The store in
// turn never mutates an object once it is stored — every write inserts a
// fresh copy — so a returned object never changes under its holder.
type StateStore struct {
	logger hclog.Logger
	db     *memdb.MemDB

	// abandon is shared with every snapshot taken from this store.
	abandon *abandonSignal

	// onCommit, when set, receives each committed write's changes (see
	// SetCommitHook). Snapshots never carry it: the plan applier's
	// optimistic writes on a snapshot are not commits.
	onCommit atomic.Pointer[CommitHook]
}

// CommitHook receives the changes of one committed write at its Raft
// index, on the FSM's goroutine, after the commit. It must not block
// (nomad/stream appends them to a ring buffer) and must not mutate them.
type CommitHook func(index uint64, changes memdb.Changes)

// SetCommitHook makes every later write of this store tell h what it
// changed (nil stops it). The FSM sets it on each store it creates.
func (s *StateStore) SetCommitHook(h CommitHook) {
	if h == nil {
		s.onCommit.Store(nil)
		return
	}
	s.onCommit.Store(&h)
}

// abandonSignal is closed once, when a restore replaces the store.
type abandonSignal struct {
	once sync.Once
	ch   chan struct{}
}

// StateSnapshot is a read-only point-in-time view of a StateStore, with
// the same read methods. Writes on a snapshot (the write methods are
// there, through the embedding) change only the snapshot: the plan
// applier may use that to apply a plan optimistically before Raft has.
type StateSnapshot struct {
	StateStore
}

// NewStateStore returns an empty store.
func NewStateStore(logger hclog.Logger) (*StateStore, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	db, err := memdb.NewMemDB(schema())
	if err != nil {
		return nil, fmt.Errorf("creating state store: %w", err)
	}
	return &StateStore{
		logger:  logger.Named("state"),
		db:      db,
		abandon: &abandonSignal{ch: make(chan struct{})},
	}, nil
}

// Snapshot returns a point-in-time view of the store. It is cheap (memdb
// is an immutable radix tree) and never blocks writers.
func (s *StateStore) Snapshot() (*StateSnapshot, error) {
	return &StateSnapshot{StateStore: StateStore{
		logger:  s.logger,
		db:      s.db.Snapshot(),
		abandon: s.abandon,
	}}, nil
}

// AbandonCh is closed when the store is replaced by a snapshot restore.
// Blocking queries watch it, so they re-read from the new store.
func (s *StateStore) AbandonCh() <-chan struct{} { return s.abandon.ch }

// Abandon closes AbandonCh. It is safe to call more than once.
func (s *StateStore) Abandon() {
	s.abandon.once.Do(func() { close(s.abandon.ch) })
}

// Index returns the Raft index of the latest write to table, or 0.
func (s *StateStore) Index(table string) (uint64, error) {
	txn := s.db.Txn(false)
	raw, err := txn.First(TableIndex, IndexID, table)
	if err != nil {
		return 0, fmt.Errorf("reading index of table %q: %w", table, err)
	}
	if raw == nil {
		return 0, nil
	}
	return raw.(*IndexEntry).Value, nil
}

// LatestIndex returns the highest Raft index written to any table.
func (s *StateStore) LatestIndex() (uint64, error) {
	iter, err := s.Indexes()
	if err != nil {
		return 0, err
	}
	var max uint64
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		max = maxIndex(max, raw.(*IndexEntry).Value)
	}
	return max, nil
}

// Indexes iterates over the index table (*IndexEntry), for snapshots.
func (s *StateStore) Indexes() (memdb.ResultIterator, error) {
	iter, err := s.db.Txn(false).Get(TableIndex, IndexID)
	if err != nil {
		return nil, fmt.Errorf("listing table indexes: %w", err)
	}
	return iter, nil
}

func maxIndex(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// writeTxn is a memdb write transaction at one Raft index. It records the
// tables written through it so that commit bumps the index of exactly
// those tables, and the jobs whose status may have changed so that commit
// recomputes them once.
//
// Use:
//
//	txn := s.writeTxn(index)
//	defer txn.Abort()
//	if err := upsertNodeTxn(txn, node); err != nil { return err }
//	return txn.commit()
type writeTxn struct {
	*memdb.Txn
	index  uint64
	tables map[string]struct{}
	// jobs holds each touched job's live-alloc hint: the ID of an alloc
	// of the job written not terminal in txn, or "" (see touchJobLive).
	jobs map[jobKey]string
	hook *CommitHook
}

type jobKey struct{ ns, id string }

func (s *StateStore) writeTxn(index uint64) *writeTxn {
	t := &writeTxn{
		Txn:    s.db.Txn(true),
		index:  index,
		tables: make(map[string]struct{}),
		jobs:   make(map[jobKey]string),
		hook:   s.onCommit.Load(),
	}
	if t.hook != nil {
		t.Txn.TrackChanges()
	}
	return t
}

// Insert inserts obj into table and records the table as written.
func (t *writeTxn) Insert(table string, obj any) error {
	t.tables[table] = struct{}{}
	return t.Txn.Insert(table, obj)
}

// Delete deletes obj from table and records the table as written.
func (t *writeTxn) Delete(table string, obj any) error {
	t.tables[table] = struct{}{}
	return t.Txn.Delete(table, obj)
}

// touchJob marks a job whose allocs or evals changed: commit recomputes
// its status.
func (t *writeTxn) touchJob(ns, id string) {
	if id == "" {
		return
	}
	k := jobKey{ns, id}
	if _, ok := t.jobs[k]; !ok {
		t.jobs[k] = ""
	}
}

// touchJobLive is touchJob for a write of alloc a that left it not
// terminal: commit checks that alloc first, and a job with a live alloc
// is running without reading its other allocs and evals (a placement
// into a job of thousands of ended allocs costs what one alloc costs).
func (t *writeTxn) touchJobLive(a *structs.Allocation) {
	if a.JobID == "" {
		return
	}
	if a.TerminalStatus() {
		t.touchJob(a.Namespace, a.JobID)
		return
	}
	t.jobs[jobKey{a.Namespace, a.JobID}] = a.ID
}

// commit recomputes touched job statuses, bumps the index of every table
// written, and commits.
func (t *writeTxn) commit() error {
	if err := updateJobStatusesTxn(t); err != nil {
		return err
	}
	for table := range t.tables {
		if err := t.Txn.Insert(TableIndex, &IndexEntry{Key: table, Value: t.index}); err != nil {
			return fmt.Errorf("updating index of table %q: %w", table, err)
		}
	}
	var changes memdb.Changes
	if t.hook != nil {
		changes = t.Txn.Changes()
	}
	t.Txn.Commit()
	if t.hook != nil && len(changes) > 0 {
		(*t.hook)(t.index, changes)
	}
	return nil
}
