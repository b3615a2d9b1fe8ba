// Package volumewatcher is the leader's claim reaper: it carries every
// CSI volume claim whose alloc has stopped to freed, one Raft checkpoint
// at a time, and never frees one early (DESIGN.md §4, guarantees 2 and 3).
//
// Claim steps and who moves them (every arrow is a Raft entry, so a new
// leader resumes where the old one stopped):
//
//	plan apply ──► Reserved ─── client Claim RPC (ControllerPublish first, when needed) ──► Taken
//	                  │                                                                      │
//	                  │ alloc stopped before it claimed          client Unpublish RPC, TasksExited,
//	                  │ (ControllerUnpublish first when a        node gone or down past its disconnect
//	                  │  publish may have happened)              deadline, or 'volume detach -force'
//	                  │                                                                      ▼
//	                  │                                                                NodeDetached
//	                  │                         ControllerUnpublish, when the plugin needs   │
//	                  │                         a controller and no other claim uses the     │
//	                  │                         volume on that node                          ▼
//	                  │                                                          ControllerDetached
//	                  │                                                                      │
//	                  └────────────────────────────────────────────────────────────► freed ◄─┘
//
// A claim on a node that is down is fenced instead, when the plugin has a
// controller: Taken ──ControllerUnpublish──► ControllerDetached ──► freed.
// The last two steps of a release share one Raft entry, unless a
// ControllerUnpublish for the claim may still run (below).
//
// Before each ControllerUnpublish the call's deadline is in Raft on the
// claim (UnpublishUntil): written by the client's Unpublish with
// NodeDetached when the call follows at once (UnpublishDeadline), else by
// the pass, in the entry of the steps it decided before the call. The
// call ends by it, on the client too, retries included. Until it plus claims.ClockSkew has passed, the Claim endpoint
// of any leader publishes the volume to no claim on that node, and the
// claim is not freed: a call whose answer never came may still land, and
// a new leader knows of it only from state (seed 4060).
//
// What happens next to one claim is decided by the pure function nextStep
// (step.go), from the claim, its alloc and its node as they are in state.
// The Watcher around it only does I/O:
//
//	csi_volumes, allocs, nodes, csi_plugins tables ──► scan (changed claims, periodic resync)
//	                                                      │ volume IDs with work
//	                                                      ▼
//	                            keyed work queue (one pass per volume at a time, delays, backoff)
//	                                                      │
//	                                                      ▼
//	              pass: lock volume ──► re-read state ──► nextStep per claim ──► its deadline in Raft
//	                                                                          ──► ControllerUnpublish
//	                                                                          ──► one Raft entry
//
// The servers' claim endpoints (Unpublish, Detach) use the same pass
// through Watcher.Release, under the same per-volume lock, so an endpoint
// and the watcher never act on one volume at once.
//
// Controller calls go through a Controller the servers provide. Berth
// controller-unpublishes only what it can have controller-published: when
// the servers have no Controller, a plugin's ControllerRequired counts as
// false, because the Claim endpoint then refuses such volumes.
package volumewatcher
