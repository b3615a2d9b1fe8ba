// Package taskrunner runs one task of an alloc through its driver: hooks,
// start, wait, restart policy, kill, and re-attach after a client restart.
//
// A task's states and the events that move it:
//
//	        Received
//	pending ─────────► (prestart hooks, driver.StartTask, handle persisted)
//	   ▲                        │ Started
//	   │ Restarting             ▼
//	   └──────────────────── running ──── Terminated ──► restart policy
//	        (after delay)       │                        │ Not Restarting
//	                            │ Killing ─► Killed       ▼
//	                            └─────────────────────► dead (Failed or not)
//
// The runner has one goroutine, Run, which does every driver call and
// every hook call; Kill, Restart and Shutdown only signal it. The task
// handle is persisted right after StartTask returns, before events and
// hooks, so a client that dies at any later point can re-attach. After a
// client restart, a runner built with Restore re-attaches with
// Driver.RecoverTask (the task keeps its process) and learns how a task
// that exited meanwhile ended.
package taskrunner
