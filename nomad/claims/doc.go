// Package claims owns the CSI claim state machine (DESIGN.md §4): every
// decision about a claim is a pure function here, of the volume, the
// claim, its alloc and node as they are in state, and the plugin's
// Profile — what its controllers advertise now, re-read at each decision
// because plugins get upgraded. Endpoints validate and call these; the
// volumewatcher (the loop) and the servers' endpoints only do I/O around
// them; the state store refuses any step CanMoveTo does not allow.
//
//	                 Take (client Claim RPC)
//	plan apply ──► Reserved ───────────────────────► Taken ──────────┐
//	                 │ ControllerPublish first, only when the         │ Next: alloc stopped,
//	                 │ controller advertises PUBLISH_UNPUBLISH_VOLUME │ node side done (client
//	                 │ (readonly only with PUBLISH_READONLY);         │ Unpublish, TasksExited,
//	                 │ PublishFailed: retry, or fail the alloc        │ node gone, deadline,
//	                 │                                                ▼ -force) or fenced
//	                 │                                          NodeDetached
//	                 │ Next: alloc stopped before it ran               │ ControllerUnpublish when
//	                 │ (ControllerUnpublish first if published and     │ published (last claim on
//	                 │ no claim is Taken on the node)                  ▼ the node)
//	                 └──────────────────────────────────────► ControllerDetached ──► freed
//
//	no claim is freed while a ControllerUnpublish for it may still run
//	(UnpublishUntil + ClockSkew, written before each call), and no
//	ControllerPublish of the volume to that node runs meanwhile
//	(UnpublishHold): a new leader knows the call only from state.
//
//	any release call failing with a final error (ReleaseFailed):
//	    ──► NeedsOperator (BlockedStep, LastError, Unsupported)
//	        ──Detach──► BlockedStep again (retry), or the step skipped
//	                    when the plugin does not implement it, or -force
//
// Profiles (testdata/next_step.txt has a column for each):
//
//	node-only    no controller instance ever (NFS, SMB, local storage, a
//	             monolith declared type = "node"): node RPCs alone
//	ctrl-nopub   controllers without PUBLISH_UNPUBLISH_VOLUME: the same
//	ctrl-pub     controllers that attach: ControllerPublish/Unpublish
//
// NodeStage and NodeUnstage are the client's (STAGE_UNSTAGE_VOLUME of the
// node plugin on that node), not the servers'.
//
// Error classes (testdata/failure.txt): the gRPC code is classified once,
// in plugins/csi, and crosses RPC as a structs error code. Retryable codes
// retry with capped backoff, attempts, last error and next retry shown on
// the claim; final ones never retry on a timer.
package claims
