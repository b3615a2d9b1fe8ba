// Package e2e holds Berth's end-to-end tests: the real `berth` binary
// (built once per test process by testutil.BuildBerth) runs as separate
// agent processes with Raft on disk, Berth's hostpath CSI plugin runs as a
// raw_exec system job and makes real bind mounts, and workloads run with the
// exec driver. The tests drive the cluster the way an operator does, through
// the CLI (BERTH_ADDR) and the HTTP API (package api), and look at the
// machine itself: /proc/<pid> for tasks, /proc/self/mountinfo for mounts.
//
// They need root (bind mounts, exec's chroot) and skip with a reason
// otherwise. Everything a test starts lives under one short temporary
// directory (unix socket paths must fit in 107 bytes); on cleanup the
// harness SIGKILLs the agents, then every process left behind by them (the
// task executors run detached, in their own sessions, and outlive a killed
// client by design), lazily unmounts whatever is still mounted below the
// directory and removes it. A failed test dumps the tail of every agent's
// log and of the task logs.
//
// The harness lives in the _test.go files:
//
//	harness_test.go   Harness (one per test): temp root, binary, cleanup
//	agent_test.go     Agent: one `berth agent` process: Start, Kill, Stop, Restart
//	cluster_test.go   Cluster: N servers + M clients, leader, CLI, API waits
//	jobs_test.go      HCL for plugin jobs, volumes and workloads
//	proc_test.go      /proc: mountinfo, task pids, process liveness
//
// A scenario is one Test function in its own file:
//
//	walkthrough_test.go     1. the README walk-through, 1 server + 1 client
//	failover_test.go        2. leader SIGKILLed while stopping; restart all servers
//	client_restart_test.go  3. client SIGKILL + restart: same pid, no remount
//	controller_test.go      4. node-only and controller+node hostpath setups,
//	                           ControllerPublish/Unpublish order from the
//	                           plugin's journal; 5. csi-test's mock-driver with
//	                           injected Unavailable faults
//	purge_test.go           6. job stop -purge keeps the mount until the task exits
//	capabilities_test.go    7. hostpath node-only and monolith: write,
//	                           free, read back; the RPCs from the plugin's log;
//	                           a read-only block-device claim cannot write;
//	                           a node plugin outage shows on the claim
//	capabilities_mock_test.go  8. mock-driver --disable-attach, node-only,
//	                           Unimplemented release -> needs-operator -> detach
//	ui_test.go              9. the web UI in headless Chromium: a volume's
//	                           claim shown taken, then freed, live (screenshots
//	                           under $BERTH_TEST_ARTIFACTS)
//	crash_test.go          10. client SIGKILLed at each step of the claim
//	                           path (helper/crashpoint), restarted: no mount
//	                           lost or doubled, claim freed
//	chaos_test.go          11. the simulator's slower companion (issue 16):
//	                           seeded random schedules (CHAOS_SEED,
//	                           CHAOS_SCHEDULES; 2 here, `make chaos` 20) of
//	                           job run/stop/purge and kill -9 of clients,
//	                           plugin tasks and the leader, on 1 or 3
//	                           servers and 2 clients, hostpath and the
//	                           mock-driver (hooks failing every n-th node
//	                           call); checked from mountinfo and the
//	                           mock's log (a single-node-writer volume
//	                           never on two nodes) and, after
//	                           healing, from /proc and the API: claims of
//	                           terminal allocs freed, mounts = live claims,
//	                           no task of a terminal alloc alive, and
//	                           (continuously) no unpublish under a live
//	                           task. `make chaos CHAOS_SEED=500`: 20
//	                           schedules, 0 violations, 239 s (README)
package e2e
