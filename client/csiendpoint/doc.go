// Package csiendpoint serves the CSI work the servers ask of this client
// over its node session (client/node_session.go is the transport):
//
//   - CSIController runs controller RPCs (publish, unpublish, validate,
//     create, delete) through the controller plugins that run on this node;
//   - CSINode unpublishes a volume for an alloc whose own release never
//     happened here (the alloc was garbage collected, or this client lost
//     track of it).
//
// net/rpc methods take no context, so the endpoints hold the session's:
// every plugin call runs under it, bounded by CallTimeout. Errors cross the
// session as structs.WireError, coded by csi.ServerCode, so the servers
// never read a message to decide whether to retry.
package csiendpoint
