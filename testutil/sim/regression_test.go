package sim

import (
	"testing"
	"time"

	"github.com/berth-io/berth/nomad/structs"
)

// TestRegression_RestoredAllocStoppedWhileItsMountIsRedone is the schedule
// the simulator shrank a violation of guarantee 2 to: a client is killed
// while its alloc runs, the node's plugin loses its mounts, the servers
// mark the node down and stop the alloc (lost), and the client restarts.
// The restored alloc's csi_hook finds the mount gone and claims again in
// prerun, which the servers refuse (the alloc is stopping). The alloc
// runner used to mark the tasks dead without reattaching to them
// (client/allocrunner runTasks), so the task the driver still ran was
// never killed, and postrun unpublished and freed the volume under it:
// checks 2 and 4. It now reattaches and kills them (reapRestored).
func TestRegression_RestoredAllocStoppedWhileItsMountIsRedone(t *testing.T) {
	s := &Schedule{Seed: 0, Nodes: 2, Servers: 1, Profile: Profile{StageUnstage: true},
		Volumes: []Volume{{ID: "v0", Mode: structs.CSIVolumeAccessModeSingleNodeWriter, PerAlloc: true}},
		Ops: []Op{
			{Kind: OpRunJob, Job: 0, Vol: 0},
			{Kind: OpWait, Wait: 300 * time.Millisecond},
			{Kind: FaultLoseMnts, Node: 0}, // kills the client too
			{Kind: OpWait, Wait: 700 * time.Millisecond},
		}}
	if vs := Run(t, s); len(vs) > 0 {
		t.Errorf("violations:\n%v", vs)
	}
}
