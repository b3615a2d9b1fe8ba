// Package state is the client's durable memory: what a restarted client
// process needs to carry on where the last one stopped without restarting
// tasks or repeating CSI work.
//
// DB is the interface; BoltDB (bbolt at <data_dir>/client/state.db) is what
// runs, MemDB is for tests. Both encode values with the msgpack handle the
// servers use (nomad/structs), so an alloc round-trips the same way through
// Raft and through the client.
//
// Layout of the bbolt file:
//
//	meta/version                      schema version
//	node/identity                     NodeIdentity (ID + SecretID)
//	allocs/<alloc id>/alloc           the alloc as last seen from the servers
//	allocs/<alloc id>/runner          AllocState (e.g. TasksExited)
//	allocs/<alloc id>/tasks/<task>/handle   drivers.TaskHandle
//	allocs/<alloc id>/tasks/<task>/state    structs.TaskState
//	allocs/<alloc id>/hooks/<hook name>     opaque hook data (CSI mounts, ...)
//	kv/<bucket>/<key>                 generic keyed buckets: the dynamic
//	                                  plugin registry, CSI staging usage, ...
//
// Per-alloc writes fail with ErrUnknownAlloc once DeleteAlloc ran, so a
// straggling write from a task runner cannot resurrect a destroyed alloc.
//
// Calls are local disk I/O that cannot be cancelled, so they take no ctx.
// Every method is safe for concurrent use.
package state
