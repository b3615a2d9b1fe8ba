// Package stream is the servers' event stream (GET /v1/event/stream): what
// changed in the state store, as Nomad-shaped events, for operators' tools
// and the UI.
//
// Every server applies the same Raft log, so every server publishes the
// same events and can serve the stream. The state store hands each
// committed write's changes (go-memdb's change tracking) to the Broker
// after the commit, on the FSM's goroutine; FromChanges turns them into
// events and Publish appends them to a ring buffer under a short lock and
// wakes subscribers. Publishing never waits for a subscriber, so a slow
// reader can never hold up Raft apply:
//
//	FSM apply ─► state commit ─► Broker.Publish(batch) ─► ring[seq % size]
//	                                                         │ (no waiting)
//	subscriber ◄── Next: the batch at its own seq ◄──────────┘
//	  fell more than size batches behind: dropped, Next returns
//	  ErrDropped and the HTTP stream ends with a final error event.
//
// A subscription starts after the batch with the given Raft index (resume),
// or at the newest one for index 0; a resume older than the buffer starts
// at its oldest batch. A snapshot restore resets the buffer and drops
// every subscriber: events across a restore would not be contiguous.
//
// Topics are Nomad's (Job, Allocation, Evaluation, Node, Deployment,
// CSIVolume, CSIPlugin) plus Berth's Claim: one event per claim
// transition, with the volume, alloc, node, from and to step, error and
// attempts. Berth has no deployments, so the Deployment topic is accepted
// and stays empty.
package stream
