// Package executor runs one task in a small detached process, so that the
// task outlives the client that started it. The raw_exec and exec drivers
// use it; the executor itself is Berth's own binary run as `berth executor
// <spec file>` (Main, called from package early's init so that the rest of
// the binary is not initialised), or a test binary whose TestMain calls
// RunIfExecutor. The package imports nothing that initialises late in the
// berth binary (no net, no hclog: early's doc says why).
//
// Processes, and who waits for whom:
//
//	client ──Launch──► executor (own session: setsid) ──fork──► task (own process group)
//	   │                  │  reports task pid + start time on fd 3, then
//	   │                  │  waits for the task, kills what it left in its group,
//	   │                  │  writes status.json, exits
//	   └── Wait: pidfd on the executor (or /proc polling), then status.json
//
// Files, in the directory Launch is given (one per task start):
//
//	spec.json      the Spec (mode 0600: the task's environment)
//	status.json    the task's Status, written atomically once it has exited
//	executor.log   the executor's own log
//
// A client persists the Process's State (executor and task pids with their
// start times from /proc/<pid>/stat, and the status file's path). After a
// restart, Attach re-attaches: a live executor means a running task; a
// status file means a task that ended meanwhile, and how; a task left
// running by an executor killed by hand is followed to its end, with an
// unknown exit status; nothing at all is ErrGone. A pid whose start time
// differs is a reused pid, not the task.
//
// With Spec.NewPID (the exec driver's tasks), the task runs in a PID
// namespace of its own under a small init, the same binary re-executed
// as `executor -init` (init.go): init is pid 1 there, mounts the task's
// /proc, forwards signals, reaps orphans and exits with the task's status.
// TaskPID is still the task's own pid as the host sees it.
//
// With Spec.Isolation, the executor first builds the task's root in a
// private mount namespace (see isolate.go and package exec's doc for the
// layout) and the task is chrooted into it. A device node bound read-only
// (a read-only claim of a block-device volume) is made read-only for real:
// the task starts in a cgroup of its own whose device filter refuses
// writes to it (devices.go).
package executor
