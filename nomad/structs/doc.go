// Package structs is Berth's internal data model: nodes, jobs, allocations,
// evaluations, CSI volumes, claims and plugins, plus the RPC request and
// response envelopes and the Raft message types.
//
// structs is a leaf: it imports only the standard library and helper, and
// holds data and pure methods (validation, copies, derived values). Nothing
// here does I/O, reads the clock or makes random IDs; the leader stamps
// times and IDs into requests before they reach Raft, so the FSM stays
// deterministic.
//
// One file per resource: node.go, job.go, alloc.go, eval.go, csi_volume.go,
// csi_plugin.go; rpc.go holds the envelopes, message.go the Raft framing,
// errors.go the typed error codes that cross RPC.
package structs
