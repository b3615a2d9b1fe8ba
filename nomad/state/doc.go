// Package state is the servers' state store: go-memdb tables holding
// nodes, jobs, allocs, evals, CSI volumes (with their claims) and CSI
// plugins, written only by the FSM as Raft entries are applied.
//
// # Tables and indexes
//
// Every table has an "id" index (namespace + ID for jobs and volumes);
// allocs are also indexed by job and node, evals by job and namespace,
// volumes by plugin and by the nodes of their live claims. The "index"
// table maps each table name to the Raft index of its latest write: the
// index a blocking query on that table reports.
//
// # Writes
//
// Each write method is one memdb write transaction at one Raft index:
//
//	txn := s.writeTxn(index)   // records which tables it writes
//	defer txn.Abort()          // no-op after commit
//	err := upsertNodeTxn(txn, node)  // xxxTxn helpers, composable
//	...
//	return txn.commit()        // bumps the index of every table written
//
// Helpers never mutate an object read from the store or passed in by the
// caller: they Copy, change the copy, set Create/ModifyIndex and insert
// it. Objects handed out by reads are therefore immutable, and callers
// must not mutate them either. Evals created by a write ride in the same
// transaction (the evals ...*structs.Evaluation arguments), so a job and
// the eval that schedules it appear together or not at all.
//
// Nothing here reads the clock or makes IDs: times come in the requests,
// stamped by the leader, so every server applies the same entry the same
// way. Job status is derived (see updateJobStatusesTxn), and so is the
// csi_plugins table (see state_store_csi_plugin.go).
//
// # Reads and blocking queries
//
// Every read takes a memdb.WatchSet (nil when not blocking) and adds the
// channels that close on any write that could change its answer. A
// blocking query (BlockingQuery) runs its reads on a fresh snapshot, and
// if the result's index is not past the caller's, waits on that watch set
// — plus AbandonCh, closed when a snapshot restore replaces the store —
// until something changes or the query's context ends, then runs again.
package state
