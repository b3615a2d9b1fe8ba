package sim

import (
	"testing"
	"time"

	"github.com/berth-io/berth/nomad/structs"
)

// partitionedWriter is a schedule where a client that promises a
// disconnect deadline is cut off from the servers while it runs the
// writer of a single-node-writer volume, long enough for the servers to
// mark its node down and for the client to stop the writer (from half
// the deadline on), but not for the deadline to pass: the volume's claim
// must wait for the client to come back (guarantee 1), and once healed
// the claim of the stopped writer is freed and its replacement runs on
// the other node (guarantee 3).
func partitionedWriter() *Schedule {
	return &Schedule{Seed: 0, Nodes: 2, Servers: 1, Profile: Profile{StageUnstage: true}, DisconnectDeadline: partitionDeadline,
		Volumes: []Volume{{ID: "v0", Mode: structs.CSIVolumeAccessModeSingleNodeWriter}},
		Ops: []Op{
			{Kind: OpIneligible, Node: 1},
			{Kind: OpRunJob, Job: 0, Vol: 0},
			{Kind: OpWait, Wait: 500 * time.Millisecond},
			{Kind: OpEligible, Node: 1},
			{Kind: FaultCutNode, Node: 0, Wait: 3 * time.Second},
			{Kind: OpWait, Wait: 3500 * time.Millisecond},
		}}
}

func TestPartition_ClientCutOffKeepsItsClaimUntilHealed(t *testing.T) {
	if vs := Run(t, partitionedWriter()); len(vs) > 0 {
		t.Errorf("violations:\n%v", vs)
	}
}
