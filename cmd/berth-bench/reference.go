package main

import "time"

// Row IDs, stable for -json; the table prints rows in this order.
const (
	rowRegister      = "register"
	rowRegisterTotal = "register_total"
	rowRegisterBatch = "register_batch"
	rowList          = "list"
	rowClaimOne      = "claim_publish_1"
	rowStopOne       = "stop_freed_1"
	rowExitFreedOne  = "exit_freed_1"
	rowClaimMany     = "claim_publish_many"
	rowStopMany      = "stop_freed_many"
	rowJobRunning    = "job_running"
	rowFailover      = "leader_failover"
	rowClientRestart = "client_restart"
	rowFloorWAL      = "floor_raft_wal"
	rowFloorGRPC     = "floor_grpc"
	rowFloorMount    = "floor_bind_mount"
	rowFloorWALIdle  = "floor_raft_wal_idle"
	rowFloorRegister = "floor_register"
	rowCPUAgent      = "cpu_claim_cycle_agent"
	rowCPUPlugin     = "cpu_claim_cycle_plugin"
)

var rowOrder = []string{
	rowRegister, rowRegisterTotal, rowRegisterBatch, rowList, rowClaimOne, rowStopOne, rowExitFreedOne, rowCPUAgent, rowCPUPlugin, rowClaimMany, rowStopMany,
	rowJobRunning, rowFailover, rowClientRestart,
	rowFloorWAL, rowFloorWALIdle, rowFloorRegister, rowFloorGRPC, rowFloorMount,
}

// reference is what a row is compared with.
type reference struct {
	// Nomad is Nomad 2.0 measured on a machine like this one, disk mode
	// (../shared/reference/perf-anchors.md §4), as printed.
	Nomad string
	// NomadBest is the better end of Nomad's number, what "vs Nomad" and
	// the target divide; 0 when there is none.
	NomadBest time.Duration
	// Target says DESIGN.md §7 aims this row at 3–5x better than Nomad.
	Target bool
	// Floor is, for a floor row, DESIGN.md §7's figure for it.
	Floor string
	// Size is the row size Nomad's number was measured at (volumes
	// registered or listed, allocs); 0 when it does not depend on it. At
	// another size the row is not compared.
	Size int
}

// references holds the numbers of DESIGN.md §7 and perf-anchors.md by row.
var references = map[string]reference{
	// Register p50 1.2–1.5 ms (1,000 sequential, BoltDB); §7 says 1.3.
	rowRegister: {Nomad: "1.3ms", NomadBest: 1300 * time.Microsecond, Target: true},
	// 1.84–2.6 s for 1,000 sequential registers.
	rowRegisterTotal: {Nomad: "1.8–2.6s", NomadBest: 1800 * time.Millisecond, Target: true, Size: 1000},
	// 1,000 volumes in one register request: 71–110 ms (issue 20).
	rowRegisterBatch: {Nomad: "71–110ms", NomadBest: 71 * time.Millisecond, Target: true, Size: 1000},
	// List of 1,000 volumes (447 KB): p50 11.3 ms on disk.
	rowList: {Nomad: "11ms", NomadBest: 11 * time.Millisecond, Target: true, Size: 1000},
	// K=1, 8 runs: alloc create → NodePublish done, median 24 ms (10–78).
	rowClaimOne: {Nomad: "24ms", NomadBest: 24 * time.Millisecond, Target: true},
	// K=1: claim freed <= 60 ms after stop.
	rowStopOne: {Nomad: "≤60ms", NomadBest: 60 * time.Millisecond, Target: true},
	// K=100: create → publish p50 0.34–6.4 s (exec-bound on 2 cores); §7
	// sets no target for it.
	rowClaimMany: {Nomad: "0.34–6.4s", NomadBest: 340 * time.Millisecond, Size: 100},
	// K=100, stop without purge: all unmounted and freed after 1.1–5.4 s.
	rowStopMany: {Nomad: "1.1–5.4s", NomadBest: 1100 * time.Millisecond, Target: true, Size: 100},
	// Job of two exec allocs, submit → both running: 0.8–1.4 s (issue 20).
	rowJobRunning: {Nomad: "0.8–1.4s", NomadBest: 800 * time.Millisecond, Target: true, Size: 2},
	// Three servers, kill -9 of the leader → a new leader answers:
	// 2.7–3.5 s (issue 20).
	rowFailover: {Nomad: "2.7–3.5s", NomadBest: 2700 * time.Millisecond, Target: true, Size: 3},
	// Client agent kill -9 → restarted client ready: 17–18.5 s (issue 20).
	rowClientRestart: {Nomad: "17–18.5s", NomadBest: 17 * time.Second, Target: true},
	// Floors of §7 (perf-anchors.md §2: raft-wal p50 0.15–0.17 ms, gRPC
	// p50 39–50 µs, bind mount pair p50 47–53 µs).
	rowFloorWAL:   {Floor: "0.16ms"},
	rowFloorGRPC:  {Floor: "45µs"},
	rowFloorMount: {Floor: "50µs"},
}

// DESIGN.md §7: "Berth aims at 3–5x better than Nomad on each".
const (
	targetLoFactor = 5 // the ambitious end
	targetHiFactor = 3 // the bound a row must meet
)
