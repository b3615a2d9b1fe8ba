package state

import (
	"fmt"
	"testing"

	"github.com/hashicorp/go-memdb"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

func testStore(t *testing.T) *StateStore {
	t.Helper()
	s, err := NewStateStore(nil)
	must.NoError(t, err)
	return s
}

func mockNode(id string) *structs.Node {
	return &structs.Node{
		ID:            id,
		SecretID:      "secret-" + id,
		Name:          "name-" + id,
		Datacenter:    "dc1",
		Attributes:    map[string]string{"kernel.name": "linux"},
		NodeResources: &structs.NodeResources{CPU: 4000, MemoryMB: 8192},
		Drivers:       map[string]*structs.DriverInfo{"exec": {Detected: true, Healthy: true, MountConfig: structs.MountConfigSupportAll}},
		Status:        structs.NodeStatusReady,
	}
}

// csiInfo is one healthy plugin instance fingerprint.
func csiInfo(pluginID string, controller bool) *structs.CSIInfo {
	info := &structs.CSIInfo{
		PluginID:                 pluginID,
		AllocID:                  "plugin-alloc-" + pluginID,
		Healthy:                  true,
		HealthDescription:        "healthy",
		Provider:                 "org.example." + pluginID,
		ProviderVersion:          "1.0.0",
		RequiresControllerPlugin: true,
	}
	if controller {
		info.ControllerInfo = &structs.CSIControllerInfo{SupportsAttachDetach: true}
	} else {
		info.NodeInfo = &structs.CSINodeInfo{ID: "ext-node", MaxVolumes: 8}
	}
	return info
}

func mockJob(ns, id string) *structs.Job {
	return &structs.Job{
		ID:          id,
		Name:        id,
		Namespace:   ns,
		Type:        structs.JobTypeService,
		Priority:    50,
		Datacenters: []string{"dc1"},
		TaskGroups: []*structs.TaskGroup{{
			Name:  "web",
			Count: 1,
			Tasks: []*structs.Task{{Name: "web", Driver: "exec"}},
		}},
		SubmitTime: 1000,
	}
}

func mockEval(id, ns, jobID string) *structs.Evaluation {
	return &structs.Evaluation{
		ID: id, Namespace: ns, JobID: jobID, Priority: 50, Type: structs.JobTypeService,
		TriggeredBy: structs.EvalTriggerJobRegister, Status: structs.EvalStatusPending,
	}
}

func mockAlloc(id string, job *structs.Job, nodeID string) *structs.Allocation {
	return &structs.Allocation{
		ID:            id,
		Namespace:     job.Namespace,
		EvalID:        "eval-" + id,
		Name:          fmt.Sprintf("%s.web[0]", job.ID),
		NodeID:        nodeID,
		JobID:         job.ID,
		Job:           job,
		TaskGroup:     "web",
		Resources:     &structs.Resources{CPU: 100, MemoryMB: 128},
		DesiredStatus: structs.AllocDesiredStatusRun,
		ClientStatus:  structs.AllocClientStatusPending,
	}
}

func mockVolume(ns, id, pluginID string) *structs.CSIVolume {
	return &structs.CSIVolume{
		ID:        id,
		Name:      id,
		Namespace: ns,
		PluginID:  pluginID,
		State:     structs.CSIVolumeStateReady,
		RequestedCapabilities: []*structs.CSIVolumeCapability{{
			AccessMode:     structs.CSIVolumeAccessModeSingleNodeWriter,
			AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
		}},
		Parameters: map[string]string{"type": "ssd"},
	}
}

func mockClaim(allocID, nodeID string, step structs.CSIClaimStep) *structs.CSIVolumeClaim {
	return &structs.CSIVolumeClaim{
		AllocID:        allocID,
		JobID:          "job-" + allocID,
		NodeID:         nodeID,
		Mode:           structs.CSIVolumeClaimWrite,
		AccessMode:     structs.CSIVolumeAccessModeSingleNodeWriter,
		AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
		Step:           step,
	}
}

func claimUpdate(ns, volID string, c *structs.CSIVolumeClaim) *structs.CSIVolumeClaimUpdate {
	return &structs.CSIVolumeClaimUpdate{Namespace: ns, VolumeID: volID, Claim: c}
}

// watchFired reports whether any channel of ws is closed, without
// blocking: memdb closes watch channels synchronously in Commit.
func watchFired(ws memdb.WatchSet) bool {
	for ch := range ws {
		select {
		case <-ch:
			return true
		default:
		}
	}
	return false
}

// ids drains an iterator into the IDs of its objects.
func ids(t *testing.T, iter memdb.ResultIterator, err error) []string {
	t.Helper()
	must.NoError(t, err)
	var out []string
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		switch o := raw.(type) {
		case *structs.Node:
			out = append(out, o.ID)
		case *structs.Job:
			out = append(out, o.Namespace+"/"+o.ID)
		case *structs.Allocation:
			out = append(out, o.ID)
		case *structs.Evaluation:
			out = append(out, o.ID)
		case *structs.CSIVolume:
			out = append(out, o.Namespace+"/"+o.ID)
		case *structs.CSIPlugin:
			out = append(out, o.ID)
		default:
			t.Fatalf("unexpected object %T", raw)
		}
	}
	return out
}

func mustIndex(t *testing.T, s *StateStore, table string) uint64 {
	t.Helper()
	idx, err := s.Index(table)
	must.NoError(t, err)
	return idx
}
