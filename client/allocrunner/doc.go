// Package allocrunner runs one alloc on the client: its alloc hooks, a
// task runner per task, its status, and its teardown.
//
// Lifecycle of a Runner (each arrow is one goroutine's doing):
//
//	New ──► Run: Prerun hooks (in order; skipped when a restored alloc's
//	        │    tasks had all exited)
//	        ├─ error ──► every task marked dead and failed
//	        ▼
//	     task runners (one goroutine each; a failed task kills its siblings)
//	        │  every task exited
//	        ▼
//	     Postrun hooks (reverse order; failures retried with backoff)
//	        │  all succeeded
//	        ▼
//	     TasksExited = true (persisted, reported)
//	        │
//	Update(desired stop) ──► kill tasks with their kill timeouts
//	Stop, StopFailed (the client's own stops) ──► the same, and wait for
//	            Postrun; StopFailed fails every task (lost servers)
//	Destroy ──► kill tasks ─► wait for Postrun ─► Destroy hooks (reverse
//	            order; the alloc dir hook, first in, removes the dir last)
//	            ─► delete the alloc from the client state
//	Shutdown ──► stop watching (tasks keep running) ─► Shutdown hooks
//
// Teardown phases run hooks in reverse order, like defers: a hook is torn
// down before the hooks it was set up after.
//
// Restore: a Runner built with Config.Restore reloads task states and
// handles from the client state; task runners re-attach to running tasks,
// and alloc hooks get HookConfig.Restored so that Prerun re-uses what the
// previous client process set up (the CSI hook's mounts) instead of doing
// it again.
package allocrunner
