// Package client is the Berth client agent: it registers its node with
// the servers, heartbeats, watches the node's allocs with a blocking
// query, and runs each alloc with an alloc runner.
//
//	New ─► open state (bbolt) ─► load or create node identity ─► fingerprint
//	    ─► restore alloc runners from state (tasks re-attached, not restarted)
//	    ─► goroutines, each owned by the Client and ended by Shutdown:
//	         heartbeat:  Node.Register, then Node.UpdateStatus every ~TTL/2
//	                     (re-register on NotFound; drivers re-fingerprinted)
//	         watcher:    Node.GetClientAllocs blocking queries ─► add /
//	                     update / destroy alloc runners
//	         syncer:     alloc status changes, batched for UpdateBatchWindow,
//	                     ─► Node.UpdateAlloc
//	         disconnect: with a DisconnectDeadline, stops (fails) every
//	                     alloc that uses CSI volumes before that long
//	                     without contact with the servers (disconnect.go)
//	         session:    the node session the leader calls this client
//	                     through, for CSI controller and node work
//	                     (node_session.go; the endpoints are client/csiendpoint)
//	         one per alloc runner, and one per alloc being destroyed
//
// Shutdown stops all of that and returns promptly; tasks keep running
// (drivers run them detached) for the next client process to re-attach,
// and the node no longer promises a disconnect deadline.
// In DevMode, Shutdown first stops every alloc, bounded by the tasks'
// kill timeouts.
//
// The client never imports the server's packages: it sees the servers only
// through RPCer.
package client
