// Package csi is Berth's client for CSI plugins: the only place that speaks
// the CSI gRPC protocol as a caller. Everything above it (csimanager, the
// csi_hook, the server's volume endpoints and the volumewatcher) sees Berth's
// own types from nomad/structs and the request structs defined here, never
// protobuf.
//
// One Client serves one plugin socket over one long-lived gRPC connection.
// The connection is lazy and reconnects by itself: a plugin that restarts on
// the same socket path is picked up again within about a second.
//
// Every RPC goes through one unary interceptor installed on the connection:
//
//	call ──► attempt (per-attempt timeout, bounded by ctx)
//	           │ ok ──────────────────────────────► return
//	           │ error ──► Classify(rpc, err)
//	           │             Retryable, attempts left ──► backoff (full jitter,
//	           │                                          capped; ctx cancel stops
//	           │                                          it at once) ──► attempt
//	           │             AlreadyDone ──► the method returns nil
//	           │             Final / out of attempts ──► *Error
//
// Errors are classified once, in errors.go. Callers tell a retryable failure
// from a final one with errors.Is(err, ErrRetryable) / errors.Is(err,
// ErrFinal); when the caller's ctx ends first the error wraps ctx.Err()
// instead and neither sentinel.
package csi
