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
// A last plan with no failed placement carries the eval's completion
// (Plan.Final): the applier commits it in the plan's own Raft entry when
// the plan commits whole, and UpdateEval is not called.
//
// Three job types share this shape: service and batch (generic.go, with
// the group reconciliation in reconcile.go) keep Count allocs named
// "job.group[i]"; system (system.go) keeps one alloc per eligible node.
//
// A placement does not check every node: each group keeps a ranking
// (ranking.go), a heap of the nodes that could take it, best first, and a
// placement pops until it has the best few that fit, so placing 10,000
// allocs over 5,000 nodes is tens of thousands of node checks, not 50
// million. Its choice is the one a scan of every node makes
// (TestRanking_SameAsScan); only a placement that fits nowhere scans
// every node, so that its metric gives every node's reason. A volume's own
// checks (exists, capability, ready, controller healthy) run once per
// placement, not once per node.
//
// New allocs reserve their CSI claims in the same plan (DESIGN.md §4), so
// two placements can never both hold a single-writer volume: the loser's
// eval is blocked with a message naming the volume, the alloc and node
// that hold it, and the claim's step.
package scheduler
