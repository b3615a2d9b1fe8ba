// Package scheduler turns an evaluation ("look at job X again") into a
// plan: which allocs to stop, which to update in place, and where to place
// new ones. Schedulers are pure: they read cluster state through the
// narrow State interface and change it only through a Planner. They start
// no goroutines and do no Raft; the server's workers run them.
//
//	eval ──► reconcile(job, allocs, nodes, now) ──► stops, in-place updates, placements
//	                                                    │
//	              feasibility (ready, dc, drivers,      ▼
//	              constraints, CSI) + ranking ──► Plan ──► Planner.SubmitPlan
//	                                                    │ partially rejected: refresh, plan again
//	                                                    ▼
//	                   failed placements? ──► blocked eval (Planner.CreateEval)
//	                                                    ▼
//	                                  eval complete (Planner.UpdateEval)
//
// Three job types share this shape: service and batch (generic.go, with
// the group reconciliation in reconcile.go) keep Count allocs named
// "job.group[i]"; system (system.go) keeps one alloc per eligible node.
//
// New allocs reserve their CSI claims in the same plan (DESIGN.md §4), so
// two placements can never both hold a single-writer volume: the loser's
// eval is blocked with a message naming the volume, the alloc and node
// that hold it, and the claim's step.
package scheduler
