// Package state is the client's durable memory: what a restarted client
// process needs to carry on where the last one stopped without restarting
// tasks or repeating CSI work.
//
// DB is the interface; BoltDB (bbolt at <data_dir>/client/state.db) is what
// runs, MemDB is for tests. Both encode values with the msgpack handle the
// servers use (nomad/structs), so an alloc round-trips the same way through
// Raft and through the client.
//
// Two files. A machine crash (power, kernel panic) also ends every task,
// mount and staging on the node; a process crash (kill -9 of the agent)
// ends none of them and keeps the kernel's page cache, so whatever bbolt
// wrote reaches the next process even unsynced. Records are split by what
// they describe:
//
//   - state.db (fsynced at each commit) holds what must outlive the
//     machine: the node identity (the same node comes back), the allocs
//     and AllocState (which allocs this node ran and which finished their
//     postrun, so a rebooted client neither forgets a claim it must report
//     nor reruns a finished alloc), and the dynamic plugin registry.
//   - <stem>-local-<boot id>.db (never fsynced) holds what describes
//     processes and mounts of this boot: task handles and task states,
//     hook data (the CSI hook's mount records) and CSI staging usage.
//     After a reboot it is gone with what it described: the file of
//     another boot is removed unread (a machine crash may have torn it),
//     and a restored alloc's tasks and volumes start from nothing, as on a
//     fresh node. That is most commits of a claim cycle, so it saves most
//     fsyncs. Without a boot ID (not Linux) the file is <stem>-local.db
//     and synced like state.db.
//
// A new alloc goes to the local file first (PutAllocLocal, the whole
// alloc) and to state.db later (PutAlloc): the alloc runner claims and
// mounts in between, without waiting for an fsync. A process that dies in
// between leaves the alloc in the local file only, and the next open
// writes it to state.db, so the restarted client knows what it claimed.
//
// Layout of each file (the local file has only allocs/<id>/alloc as a
// marker, or the whole alloc until PutAlloc, and its own kv buckets):
//
//	meta/version                      schema version
//	node/identity                     NodeIdentity (ID + SecretID)
//	allocs/<alloc id>/alloc           the alloc as last seen from the servers
//	allocs/<alloc id>/runner          AllocState (e.g. TasksExited)
//	allocs/<alloc id>/tasks/<task>/handle   drivers.TaskHandle        (local)
//	allocs/<alloc id>/tasks/<task>/state    structs.TaskState         (local)
//	allocs/<alloc id>/hooks/<hook name>     opaque hook data (CSI mounts, local)
//	kv/<bucket>/<key>                 generic keyed buckets: the dynamic
//	                                  plugin registry, CSI staging usage
//	                                  (local), ...
//
// Per-alloc writes fail with ErrUnknownAlloc once DeleteAlloc ran, so a
// straggling write from a task runner cannot resurrect a destroyed alloc.
//
// Calls are local disk I/O that cannot be cancelled, so they take no ctx.
// Every method is safe for concurrent use.
package state
