package nomad

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-memdb"
	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/msgpack"
	"github.com/berth-io/berth/nomad/raftguard"
	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// Fixtures, prefixed fsm* so they never clash with other tests here.

func fsmTestFSM(t *testing.T) *FSM {
	t.Helper()
	f, err := NewFSM(nil)
	must.NoError(t, err)
	return f
}

// fsmApply encodes req as an entry of type mt at index and applies it.
func fsmApply(t *testing.T, f *FSM, index uint64, mt structs.MessageType, req any) any {
	t.Helper()
	buf, err := msgpack.Encode(mt, req)
	must.NoError(t, err)
	return f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: buf})
}

func fsmMustApply(t *testing.T, f *FSM, index uint64, mt structs.MessageType, req any) {
	t.Helper()
	// A write may answer with what it stored (a volume register does);
	// only an error fails.
	if err, ok := fsmApply(t, f, index, mt, req).(error); ok {
		t.Fatalf("applying type %d at %d: %v", mt, index, err)
	}
}

func fsmNode(id string) *structs.Node {
	return &structs.Node{
		ID: id, SecretID: "s-" + id, Name: id, Datacenter: "dc1",
		Attributes:    map[string]string{"kernel.name": "linux"},
		NodeResources: &structs.NodeResources{CPU: 1000, MemoryMB: 1024},
		Drivers:       map[string]*structs.DriverInfo{"exec": {Detected: true, Healthy: true}},
		CSINodePlugins: map[string]*structs.CSIInfo{"ebs": {
			PluginID: "ebs", Healthy: true, Provider: "ebs.csi", ProviderVersion: "1.0",
			NodeInfo: &structs.CSINodeInfo{ID: "i-" + id, AccessibleTopology: &structs.CSITopology{Segments: map[string]string{"zone": "a"}}},
		}},
		Status: structs.NodeStatusReady,
	}
}

func fsmJob(id string) *structs.Job {
	return &structs.Job{
		ID: id, Name: id, Namespace: structs.DefaultNamespace, Type: structs.JobTypeService, Priority: 50,
		Datacenters: []string{"dc1"},
		TaskGroups: []*structs.TaskGroup{{
			Name: "g", Count: 1,
			Volumes: map[string]*structs.VolumeRequest{"data": {
				Name: "data", Type: structs.VolumeTypeCSI, Source: "vol1",
				AccessMode:     structs.CSIVolumeAccessModeSingleNodeWriter,
				AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
			}},
			Tasks: []*structs.Task{{Name: "t", Driver: "exec", Env: map[string]string{"A": "b"}}},
		}},
	}
}

func fsmEval(id, jobID string) *structs.Evaluation {
	return &structs.Evaluation{
		ID: id, Namespace: structs.DefaultNamespace, JobID: jobID, Priority: 50,
		Type: structs.JobTypeService, TriggeredBy: structs.EvalTriggerJobRegister, Status: structs.EvalStatusPending,
	}
}

func fsmAlloc(id, jobID, nodeID string) *structs.Allocation {
	return &structs.Allocation{
		ID: id, Namespace: structs.DefaultNamespace, EvalID: "e1", Name: jobID + ".g[0]",
		NodeID: nodeID, JobID: jobID, TaskGroup: "g",
		Resources:     &structs.Resources{CPU: 100, MemoryMB: 64},
		DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusPending,
	}
}

func fsmVolume(id string) *structs.CSIVolume {
	return &structs.CSIVolume{
		ID: id, Name: id, Namespace: structs.DefaultNamespace, PluginID: "ebs", State: structs.CSIVolumeStateReady,
		RequestedCapabilities: []*structs.CSIVolumeCapability{{
			AccessMode:     structs.CSIVolumeAccessModeSingleNodeWriter,
			AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
		}},
		Secrets: structs.CSISecrets{"token": "t"},
	}
}

func fsmClaim(volID, allocID, nodeID string, step structs.CSIClaimStep) *structs.CSIVolumeClaimUpdate {
	return &structs.CSIVolumeClaimUpdate{Namespace: structs.DefaultNamespace, VolumeID: volID, Claim: &structs.CSIVolumeClaim{
		AllocID: allocID, JobID: "web", NodeID: nodeID, Mode: structs.CSIVolumeClaimWrite,
		AccessMode:     structs.CSIVolumeAccessModeSingleNodeWriter,
		AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
		Step:           step,
	}}
}

// fsmPopulate fills every table through Apply, at indexes 1..8.
func fsmPopulate(t *testing.T, f *FSM) {
	t.Helper()
	fsmMustApply(t, f, 1, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: fsmNode("n1")})
	fsmMustApply(t, f, 2, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: fsmNode("n2")})
	fsmMustApply(t, f, 3, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: fsmJob("web"), Eval: fsmEval("e1", "web")})
	fsmMustApply(t, f, 4, structs.CSIVolumeRegisterRequestType, &structs.CSIVolumeRegisterRequest{
		Volumes: []*structs.CSIVolume{fsmVolume("vol1"), fsmVolume("vol2")},
	})
	done := fsmEval("e1", "web")
	done.Status = structs.EvalStatusComplete
	fsmMustApply(t, f, 5, structs.ApplyPlanResultsRequestType, &structs.ApplyPlanResultsRequest{
		AllocsUpdated: []*structs.Allocation{fsmAlloc("a1", "web", "n1")},
		CSIClaims:     []*structs.CSIVolumeClaimUpdate{fsmClaim("vol1", "a1", "n1", structs.CSIClaimReserved)},
		Evals:         []*structs.Evaluation{done},
		Timestamp:     5000,
	})
	fsmMustApply(t, f, 6, structs.AllocClientUpdateRequestType, &structs.AllocUpdateRequest{Alloc: []*structs.Allocation{{
		ID: "a1", ClientStatus: structs.AllocClientStatusRunning, ModifyTime: 6000,
		TaskStates: map[string]*structs.TaskState{"t": {State: structs.TaskStateRunning, Events: []*structs.TaskEvent{
			{Type: "Started", Time: 6000, Details: map[string]string{"pid": "42"}},
		}}},
	}}})
	taken := fsmClaim("vol1", "a1", "n1", structs.CSIClaimTaken)
	taken.Claim.PublishContext = map[string]string{"device": "/dev/xvdf"}
	fsmMustApply(t, f, 7, structs.CSIVolumeClaimRequestType, &structs.CSIVolumeClaimBatchRequest{
		Claims: []*structs.CSIVolumeClaimUpdate{taken}, Timestamp: 7000,
	})
	// vol2 has a claim history.
	fsmMustApply(t, f, 8, structs.CSIVolumeClaimRequestType, &structs.CSIVolumeClaimBatchRequest{
		Claims: []*structs.CSIVolumeClaimUpdate{
			fsmClaim("vol2", "old", "n2", structs.CSIClaimReserved),
			fsmClaim("vol2", "old", "n2", structs.CSIClaimFreed),
		}, Timestamp: 8000,
	})
}

func TestFSM_ApplyEachMessageType(t *testing.T) {
	cases := []struct {
		name  string
		mt    structs.MessageType
		req   any
		check func(t *testing.T, s *state.StateStore)
	}{
		{
			name: "node register", mt: structs.NodeRegisterRequestType,
			req: &structs.NodeRegisterRequest{Node: fsmNode("n3")},
			check: func(t *testing.T, s *state.StateStore) {
				n, _ := s.NodeByID(nil, "n3")
				must.NotNil(t, n)
				must.Eq(t, 100, n.CreateIndex)
				p, _ := s.CSIPluginByID(nil, "ebs")
				must.Eq(t, 3, p.NodesExpected)
			},
		},
		{
			name: "node deregister", mt: structs.NodeDeregisterRequestType,
			req: &structs.NodeDeregisterRequest{NodeIDs: []string{"n2"}},
			check: func(t *testing.T, s *state.StateStore) {
				n, _ := s.NodeByID(nil, "n2")
				must.Nil(t, n)
				p, _ := s.CSIPluginByID(nil, "ebs")
				must.Eq(t, 1, p.NodesExpected)
			},
		},
		{
			name: "node status with evals", mt: structs.NodeUpdateStatusRequestType,
			req: &structs.NodeUpdateStatusRequest{NodeID: "n1", Status: structs.NodeStatusDown, Description: "ttl", Timestamp: 9,
				Evals: []*structs.Evaluation{fsmEval("e-node", "web")}},
			check: func(t *testing.T, s *state.StateStore) {
				n, _ := s.NodeByID(nil, "n1")
				must.Eq(t, structs.NodeStatusDown, n.Status)
				must.Eq(t, 9, n.StatusUpdatedAt)
				p, _ := s.CSIPluginByID(nil, "ebs")
				must.Eq(t, 1, p.NodesHealthy)
				e, _ := s.EvalByID(nil, "e-node")
				must.NotNil(t, e)
			},
		},
		{
			name: "node drain with evals", mt: structs.NodeUpdateDrainRequestType,
			req: &structs.NodeUpdateDrainRequest{NodeID: "n1", DrainStrategy: &structs.DrainStrategy{Deadline: 10}, Timestamp: 9,
				Evals: []*structs.Evaluation{fsmEval("e-drain", "web")}},
			check: func(t *testing.T, s *state.StateStore) {
				n, _ := s.NodeByID(nil, "n1")
				must.NotNil(t, n.DrainStrategy)
				must.Eq(t, structs.NodeSchedulingIneligible, n.SchedulingEligibility)
				e, _ := s.EvalByID(nil, "e-drain")
				must.NotNil(t, e)
			},
		},
		{
			name: "node eligibility with evals", mt: structs.NodeUpdateEligibilityRequestType,
			req: &structs.NodeUpdateEligibilityRequest{NodeID: "n1", Eligibility: structs.NodeSchedulingIneligible,
				Evals: []*structs.Evaluation{fsmEval("e-elig", "web")}},
			check: func(t *testing.T, s *state.StateStore) {
				n, _ := s.NodeByID(nil, "n1")
				must.Eq(t, structs.NodeSchedulingIneligible, n.SchedulingEligibility)
				e, _ := s.EvalByID(nil, "e-elig")
				must.NotNil(t, e)
			},
		},
		{
			name: "node batch status", mt: structs.NodeBatchUpdateStatusRequestType,
			req: &structs.NodeBatchUpdateStatusRequest{Updates: []*structs.NodeUpdateStatusRequest{
				{NodeID: "n1", Status: structs.NodeStatusDown},
				{NodeID: "n2", Status: structs.NodeStatusDown},
			}, Evals: []*structs.Evaluation{fsmEval("e-batch", "web")}},
			check: func(t *testing.T, s *state.StateStore) {
				for _, id := range []string{"n1", "n2"} {
					n, _ := s.NodeByID(nil, id)
					must.Eq(t, structs.NodeStatusDown, n.Status)
				}
				e, _ := s.EvalByID(nil, "e-batch")
				must.NotNil(t, e)
			},
		},
		{
			name: "job register with eval", mt: structs.JobRegisterRequestType,
			req: &structs.JobRegisterRequest{Job: fsmJob("batch1"), Eval: fsmEval("e-job", "batch1")},
			check: func(t *testing.T, s *state.StateStore) {
				j, _ := s.JobByID(nil, structs.DefaultNamespace, "batch1")
				must.NotNil(t, j)
				must.Eq(t, structs.JobStatusPending, j.Status)
				e, _ := s.EvalByID(nil, "e-job")
				must.Eq(t, 100, e.CreateIndex)
			},
		},
		{
			name: "job deregister stops", mt: structs.JobDeregisterRequestType,
			req: &structs.JobDeregisterRequest{JobID: "web", Eval: fsmEval("e-stop", "web")},
			check: func(t *testing.T, s *state.StateStore) {
				j, _ := s.JobByID(nil, structs.DefaultNamespace, "web")
				must.True(t, j.Stop)
				must.Eq(t, 1, j.Version)
				e, _ := s.EvalByID(nil, "e-stop")
				must.NotNil(t, e)
			},
		},
		{
			name: "job deregister purges", mt: structs.JobDeregisterRequestType,
			req: &structs.JobDeregisterRequest{JobID: "web", Purge: true},
			check: func(t *testing.T, s *state.StateStore) {
				j, _ := s.JobByID(nil, structs.DefaultNamespace, "web")
				must.Nil(t, j)
				v, _ := s.CSIVolumeByID(nil, structs.DefaultNamespace, "vol1")
				must.MapContainsKey(t, v.Claims, "a1") // purge never frees claims
			},
		},
		{
			name: "eval update", mt: structs.EvalUpdateRequestType,
			req: &structs.EvalUpdateRequest{Evals: []*structs.Evaluation{fsmEval("e2", "web")}},
			check: func(t *testing.T, s *state.StateStore) {
				e, _ := s.EvalByID(nil, "e2")
				must.NotNil(t, e)
			},
		},
		{
			name: "eval delete", mt: structs.EvalDeleteRequestType,
			req: &structs.EvalDeleteRequest{EvalIDs: []string{"e1"}},
			check: func(t *testing.T, s *state.StateStore) {
				e, _ := s.EvalByID(nil, "e1")
				must.Nil(t, e)
			},
		},
		{
			name: "alloc client update with evals", mt: structs.AllocClientUpdateRequestType,
			req: &structs.AllocUpdateRequest{
				Alloc: []*structs.Allocation{{ID: "a1", ClientStatus: structs.AllocClientStatusFailed, TasksExited: true}},
				Evals: []*structs.Evaluation{fsmEval("e-fail", "web")},
			},
			check: func(t *testing.T, s *state.StateStore) {
				a, _ := s.AllocByID(nil, "a1")
				must.Eq(t, structs.AllocClientStatusFailed, a.ClientStatus)
				must.True(t, a.TasksExited)
				e, _ := s.EvalByID(nil, "e-fail")
				must.NotNil(t, e)
			},
		},
		{
			name: "plan results", mt: structs.ApplyPlanResultsRequestType,
			req: &structs.ApplyPlanResultsRequest{
				AllocsStopped: []*structs.AllocStopUpdate{{AllocID: "a1", DesiredStatus: structs.AllocDesiredStatusStop}},
				AllocsUpdated: []*structs.Allocation{fsmAlloc("a2", "web", "n2")},
				CSIClaims:     []*structs.CSIVolumeClaimUpdate{fsmClaim("vol2", "a2", "n2", structs.CSIClaimReserved)},
			},
			check: func(t *testing.T, s *state.StateStore) {
				a1, _ := s.AllocByID(nil, "a1")
				must.Eq(t, structs.AllocDesiredStatusStop, a1.DesiredStatus)
				a2, _ := s.AllocByID(nil, "a2")
				must.Eq(t, 100, a2.CreateIndex)
				must.NotNil(t, a2.Job)
				v, _ := s.CSIVolumeByID(nil, structs.DefaultNamespace, "vol2")
				must.Eq(t, structs.CSIClaimReserved, v.Claims["a2"].Step)
			},
		},
		{
			name: "alloc delete", mt: structs.AllocDeleteRequestType,
			req: &structs.AllocDeleteRequest{AllocIDs: []string{"a1"}},
			check: func(t *testing.T, s *state.StateStore) {
				a, _ := s.AllocByID(nil, "a1")
				must.Nil(t, a)
			},
		},
		{
			name: "volume register", mt: structs.CSIVolumeRegisterRequestType,
			req: &structs.CSIVolumeRegisterRequest{Volumes: []*structs.CSIVolume{fsmVolume("vol3")}},
			check: func(t *testing.T, s *state.StateStore) {
				v, _ := s.CSIVolumeByID(nil, structs.DefaultNamespace, "vol3")
				must.Eq(t, 100, v.CreateIndex)
			},
		},
		{
			name: "volume deregister", mt: structs.CSIVolumeDeregisterRequestType,
			req: &structs.CSIVolumeDeregisterRequest{VolumeIDs: []string{"vol2"}},
			check: func(t *testing.T, s *state.StateStore) {
				v, _ := s.CSIVolumeByID(nil, structs.DefaultNamespace, "vol2")
				must.Nil(t, v)
			},
		},
		{
			name: "volume claim", mt: structs.CSIVolumeClaimRequestType,
			req: &structs.CSIVolumeClaimBatchRequest{
				Claims:    []*structs.CSIVolumeClaimUpdate{fsmClaim("vol1", "a1", "n1", structs.CSIClaimNodeDetached)},
				Timestamp: 99,
			},
			check: func(t *testing.T, s *state.StateStore) {
				v, _ := s.CSIVolumeByID(nil, structs.DefaultNamespace, "vol1")
				must.Eq(t, structs.CSIClaimNodeDetached, v.Claims["a1"].Step)
				must.Eq(t, 99, v.Claims["a1"].ModifyTime)
			},
		},
		{
			name: "job stability", mt: structs.JobStabilityRequestType,
			req: &structs.JobStabilityRequest{JobID: "web", JobVersion: 0, Stable: true},
			check: func(t *testing.T, s *state.StateStore) {
				j, _ := s.JobByID(nil, structs.DefaultNamespace, "web")
				must.True(t, j.Stable)
				must.Eq(t, 100, j.ModifyIndex)
			},
		},
		{
			name: "plugin delete", mt: structs.CSIPluginDeleteRequestType,
			req: &structs.CSIPluginDeleteRequest{ID: "ebs"},
			check: func(t *testing.T, s *state.StateStore) {
				p, _ := s.CSIPluginByID(nil, "ebs")
				must.Nil(t, p)
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := fsmTestFSM(t)
			fsmPopulate(t, f)
			if tc.mt == structs.CSIPluginDeleteRequestType { // only an empty plugin can go
				fsmMustApply(t, f, 99, structs.NodeDeregisterRequestType, &structs.NodeDeregisterRequest{NodeIDs: []string{"n1", "n2"}})
			}
			fsmMustApply(t, f, 100, tc.mt, tc.req)
			tc.check(t, f.State())
		})
	}
}

func TestFSM_ApplyReturnsStoreErrors(t *testing.T) {
	f := fsmTestFSM(t)
	fsmPopulate(t, f)

	// A second single-writer reservation on vol1 is refused with the
	// conflict, coded, naming the claim in the way.
	resp := fsmApply(t, f, 20, structs.CSIVolumeClaimRequestType, &structs.CSIVolumeClaimBatchRequest{
		Claims: []*structs.CSIVolumeClaimUpdate{fsmClaim("vol1", "b1", "n2", structs.CSIClaimReserved)},
	})
	err, ok := resp.(error)
	must.True(t, ok)
	must.ErrorIs(t, err, structs.ErrNotReady)
	must.StrContains(t, err.Error(), "a1")

	resp = fsmApply(t, f, 21, structs.CSIVolumeDeregisterRequestType, &structs.CSIVolumeDeregisterRequest{VolumeIDs: []string{"vol1"}})
	err, ok = resp.(error)
	must.True(t, ok)
	must.ErrorIs(t, err, structs.ErrConflict)

	// A body that does not decode is an error, not a panic.
	resp = f.Apply(&raft.Log{Index: 22, Data: []byte{byte(structs.NodeRegisterRequestType), 0xc1}})
	_, ok = resp.(error)
	must.True(t, ok)
}

func TestFSM_UnknownMessageTypes(t *testing.T) {
	f := fsmTestFSM(t)
	fsmPopulate(t, f)
	before, err := f.State().LatestIndex()
	must.NoError(t, err)

	ignorable := structs.IgnoreUnknownTypeFlag | 77
	must.Nil(t, fsmApply(t, f, 30, ignorable, &structs.GenericRequest{}))
	after, err := f.State().LatestIndex()
	must.NoError(t, err)
	must.Eq(t, before, after)

	// A known type carrying the flag is applied as usual.
	fsmMustApply(t, f, 32, structs.IgnoreUnknownTypeFlag|structs.NodeRegisterRequestType,
		&structs.NodeRegisterRequest{Node: fsmNode("flagged")})
	n, err := f.State().NodeByID(nil, "flagged")
	must.NoError(t, err)
	must.NotNil(t, n)

	// An unknown type without the flag halts the FSM: no panic, an error
	// naming the entry, and nothing applied after it.
	haltCh, h := f.Halted()
	must.Nil(t, h)
	resp := fsmApply(t, f, 33, structs.MessageType(77), &structs.GenericRequest{})
	var he *HaltError
	must.ErrorAs[error](t, resp.(error), &he)
	must.Eq(t, uint64(33), he.Index)
	must.Eq(t, uint8(77), he.Type)
	<-haltCh
	resp = fsmApply(t, f, 34, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: fsmNode("after")})
	must.ErrorAs[error](t, resp.(error), &he)
	must.Eq(t, uint64(33), he.Index)
	n, err = f.State().NodeByID(nil, "after")
	must.NoError(t, err)
	must.Nil(t, n)
}

// TestFSM_EveryKnownTypeIsApplied: every type structs calls known has a
// case in Apply (a body that does not decode is an error, not a halt),
// and the first unknown one halts: bumping lastMessageType without a case,
// or a case without the bump, fails here.
func TestFSM_EveryKnownTypeIsApplied(t *testing.T) {
	f := fsmTestFSM(t)
	for mt := structs.MessageType(0); mt < structs.IgnoreUnknownTypeFlag; mt++ {
		resp := f.Apply(&raft.Log{Index: uint64(mt) + 1, Data: []byte{byte(mt), 0xc1}})
		_, halted := resp.(*HaltError)
		if mt.Known() {
			must.False(t, halted, must.Sprintf("known type %d has no case in FSM.Apply", mt))
			continue
		}
		must.True(t, halted, must.Sprintf("type %d is not known but FSM.Apply took it", mt))
		return
	}
}

// fsmSink is an in-memory raft.SnapshotSink.
type fsmSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *fsmSink) ID() string    { return "test" }
func (s *fsmSink) Cancel() error { s.cancelled = true; return nil }
func (s *fsmSink) Close() error  { s.closed = true; return nil }

// fsmDump reads every table of s, in index order, for comparison.
func fsmDump(t *testing.T, s *state.StateStore) map[string][]any {
	t.Helper()
	out := map[string][]any{}
	add := func(table string, iter memdb.ResultIterator, err error) {
		must.NoError(t, err)
		for raw := iter.Next(); raw != nil; raw = iter.Next() {
			out[table] = append(out[table], raw)
		}
	}
	iter, err := s.Nodes(nil)
	add(state.TableNodes, iter, err)
	iter, err = s.Jobs(nil, structs.AllNamespaces)
	add(state.TableJobs, iter, err)
	iter, err = s.Allocs(nil)
	add(state.TableAllocs, iter, err)
	iter, err = s.Evals(nil, structs.AllNamespaces)
	add(state.TableEvals, iter, err)
	iter, err = s.CSIVolumes(nil, structs.AllNamespaces)
	add(state.TableCSIVolumes, iter, err)
	iter, err = s.CSIPlugins(nil)
	add(state.TableCSIPlugins, iter, err)
	iter, err = s.AllCSIPluginInstances(nil)
	add(state.TableCSIPluginInstances, iter, err)
	iter, err = s.JobVersions(nil)
	add(state.TableJobVersions, iter, err)
	iter, err = s.Indexes()
	add(state.TableIndex, iter, err)
	return out
}

func TestFSM_SnapshotRestoreRoundTrip(t *testing.T) {
	f := fsmTestFSM(t)
	fsmPopulate(t, f)
	// A second version of web: both versions travel in the snapshot.
	web2 := fsmJob("web")
	web2.Priority = 70
	fsmMustApply(t, f, 9, structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: web2})
	want := fsmDump(t, f.State())
	for _, table := range []string{state.TableNodes, state.TableJobs, state.TableAllocs, state.TableEvals,
		state.TableCSIVolumes, state.TableCSIPlugins, state.TableCSIPluginInstances, state.TableJobVersions, state.TableIndex} {
		must.SliceNotEmpty(t, want[table], must.Sprint(table)) // every table is in the test
	}
	must.SliceLen(t, 2, want[state.TableJobVersions])

	snap, err := f.Snapshot()
	must.NoError(t, err)
	// Writes after Snapshot are not in it.
	fsmMustApply(t, f, 50, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: fsmNode("late")})
	sink := &fsmSink{}
	must.NoError(t, snap.Persist(sink))
	snap.Release()
	must.True(t, sink.closed)
	must.False(t, sink.cancelled)

	restored := fsmTestFSM(t)
	must.NoError(t, restored.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))))
	must.Eq(t, want, fsmDump(t, restored.State()))

	// Secondary indexes work on the restored store.
	vols, err := restored.State().CSIVolumesByNodeID(nil, "n1")
	must.NoError(t, err)
	v := vols.Next().(*structs.CSIVolume)
	must.Eq(t, "vol1", v.ID)
	allocs, err := restored.State().AllocsByJob(nil, structs.DefaultNamespace, "web")
	must.NoError(t, err)
	must.Len(t, 1, allocs)

	// And it carries on applying entries.
	fsmMustApply(t, restored, 60, structs.CSIVolumeClaimRequestType, &structs.CSIVolumeClaimBatchRequest{
		Claims: []*structs.CSIVolumeClaimUpdate{fsmClaim("vol1", "a1", "n1", structs.CSIClaimNodeDetached)},
	})
	idx, err := restored.State().Index(state.TableCSIVolumes)
	must.NoError(t, err)
	must.Eq(t, 60, idx)
}

// TestFSM_JobVersionsKeptAsTheEntrySays: the number of versions kept
// comes from the Raft entry, so every server trims the same ones whatever
// its own config.
func TestFSM_JobVersionsKeptAsTheEntrySays(t *testing.T) {
	f := fsmTestFSM(t)
	for i := range 5 {
		j := fsmJob("web")
		j.Priority = 10 + i
		fsmMustApply(t, f, uint64(i+1), structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: j, TrackedVersions: 3})
	}
	vs, err := f.State().JobVersionsByID(nil, structs.DefaultNamespace, "web")
	must.NoError(t, err)
	var got []uint64
	for _, v := range vs {
		got = append(got, v.Version)
	}
	must.Eq(t, []uint64{4, 3, 2}, got)

	fsmMustApply(t, f, 6, structs.JobDeregisterRequestType, &structs.JobDeregisterRequest{JobID: "web", TrackedVersions: 2})
	vs, err = f.State().JobVersionsByID(nil, structs.DefaultNamespace, "web")
	must.NoError(t, err)
	must.SliceLen(t, 2, vs)
	must.Eq(t, 5, vs[0].Version)
	must.True(t, vs[0].Stop)
}

// TestFSM_RestoreBackfillsJobVersions: a snapshot written before versions
// were kept has jobs and no version records; each job's version in force
// becomes its one kept version.
func TestFSM_RestoreBackfillsJobVersions(t *testing.T) {
	src := fsmTestFSM(t)
	fsmPopulate(t, src)
	snap, err := src.Snapshot()
	must.NoError(t, err)
	sink := &fsmSink{}
	must.NoError(t, snap.Persist(sink))
	old := withoutRecords(t, sink.Bytes(), fsmSnapJobVersion)
	must.Less(t, len(sink.Bytes()), len(old)) // the version records were there

	f := fsmTestFSM(t)
	must.NoError(t, f.Restore(io.NopCloser(bytes.NewReader(old))))
	vs, err := f.State().JobVersionsByID(nil, structs.DefaultNamespace, "web")
	must.NoError(t, err)
	must.SliceLen(t, 1, vs)
	job, err := f.State().JobByID(nil, structs.DefaultNamespace, "web")
	must.NoError(t, err)
	must.Eq(t, job, vs[0])
}

// withoutRecords re-encodes a snapshot leaving out the records of type
// drop, as a server that did not know them wrote it.
func withoutRecords(t *testing.T, data []byte, drop fsmSnapshotRecord) []byte {
	t.Helper()
	dec := codec.NewDecoder(bytes.NewReader(data), msgpack.Handle())
	var out bytes.Buffer
	var header codec.Raw
	must.NoError(t, dec.Decode(&header))
	out.Write(header)
	for {
		// Record types are positive fixints: one byte each.
		var rec fsmSnapshotRecord
		must.NoError(t, dec.Decode(&rec))
		if rec == fsmSnapEnd {
			out.WriteByte(byte(rec))
			return out.Bytes()
		}
		var obj codec.Raw
		must.NoError(t, dec.Decode(&obj))
		if rec == drop {
			continue
		}
		out.WriteByte(byte(rec))
		out.Write(obj)
	}
}

// TestFSM_RestoreOldPluginFormat: a snapshot from a server that kept
// every plugin instance in the plugin's maps (no instance records)
// restores into the instance table, with the same plugins to every
// reader, and node writes after it count right.
func TestFSM_RestoreOldPluginFormat(t *testing.T) {
	src := fsmTestFSM(t)
	fsmPopulate(t, src)
	full, err := src.State().CSIPluginByID(nil, "ebs")
	must.NoError(t, err)
	must.MapLen(t, 2, full.Nodes)
	snap, err := src.Snapshot()
	must.NoError(t, err)
	sink := &fsmSink{}
	must.NoError(t, snap.Persist(sink))
	old := withoutRecords(t, sink.Bytes(), fsmSnapCSIPluginInstance)
	old = replaceRecords(t, old, fsmSnapCSIPlugin, full) // the maps, as the older server wrote them

	f := fsmTestFSM(t)
	must.NoError(t, f.Restore(io.NopCloser(bytes.NewReader(old))))
	got, err := f.State().CSIPluginByID(nil, "ebs")
	must.NoError(t, err)
	must.Eq(t, full.Nodes, got.Nodes)
	must.Eq(t, [4]int{full.ControllersHealthy, full.ControllersExpected, full.NodesHealthy, full.NodesExpected},
		[4]int{got.ControllersHealthy, got.ControllersExpected, got.NodesHealthy, got.NodesExpected})
	for _, nodeID := range []string{"n1", "n2"} {
		// One row per node; its ModifyIndex is the plugin's, the old
		// format kept none per instance.
		row, err := f.State().CSIPluginInstance(nil, "ebs", nodeID)
		must.NoError(t, err)
		must.Eq(t, full.Nodes[nodeID], row.Node)
		must.Eq(t, full.ModifyIndex, row.ModifyIndex)
	}

	// A node going down after the restore is counted from the moved rows.
	fsmMustApply(t, f, 40, structs.NodeUpdateStatusRequestType, &structs.NodeUpdateStatusRequest{NodeID: "n2", Status: structs.NodeStatusDown})
	summary, err := f.State().CSIPluginSummary(nil, "ebs")
	must.NoError(t, err)
	must.Eq(t, 1, summary.NodesHealthy)
	must.Eq(t, 2, summary.NodesExpected)
}

// replaceRecords re-encodes a snapshot with every record of type rec
// replaced by obj.
func replaceRecords(t *testing.T, data []byte, rec fsmSnapshotRecord, obj any) []byte {
	t.Helper()
	dec := codec.NewDecoder(bytes.NewReader(data), msgpack.Handle())
	var out bytes.Buffer
	enc := codec.NewEncoder(&out, msgpack.Handle())
	var header codec.Raw
	must.NoError(t, dec.Decode(&header))
	out.Write(header)
	for {
		var r fsmSnapshotRecord
		must.NoError(t, dec.Decode(&r))
		out.WriteByte(byte(r))
		if r == fsmSnapEnd {
			return out.Bytes()
		}
		var raw codec.Raw
		must.NoError(t, dec.Decode(&raw))
		if r == rec {
			must.NoError(t, enc.Encode(obj))
			continue
		}
		out.Write(raw)
	}
}

func TestFSM_RestoreSwapsAndAbandons(t *testing.T) {
	src := fsmTestFSM(t)
	fsmPopulate(t, src)
	snap, err := src.Snapshot()
	must.NoError(t, err)
	sink := &fsmSink{}
	must.NoError(t, snap.Persist(sink))

	f := fsmTestFSM(t)
	fsmMustApply(t, f, 1, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: fsmNode("stale")})
	old := f.State()
	must.NoError(t, f.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))))

	select {
	case <-old.AbandonCh():
	default:
		t.Fatal("old store was not abandoned")
	}
	must.NotEq(t, old, f.State())
	n, err := f.State().NodeByID(nil, "stale")
	must.NoError(t, err)
	must.Nil(t, n) // previous state is discarded
	n, err = f.State().NodeByID(nil, "n1")
	must.NoError(t, err)
	must.NotNil(t, n)
}

func TestFSM_RestoreRejectsBadSnapshots(t *testing.T) {
	src := fsmTestFSM(t)
	fsmPopulate(t, src)
	snap, err := src.Snapshot()
	must.NoError(t, err)
	sink := &fsmSink{}
	must.NoError(t, snap.Persist(sink))
	full := sink.Bytes()

	cases := []struct {
		name string
		data []byte
	}{
		{name: "empty", data: nil},
		{name: "truncated", data: full[:len(full)/2]},
		{name: "no end record", data: full[:len(full)-1]},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := fsmTestFSM(t)
			fsmMustApply(t, f, 1, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: fsmNode("keep")})
			err := f.Restore(io.NopCloser(bytes.NewReader(tc.data)))
			must.Error(t, err)
			n, _ := f.State().NodeByID(nil, "keep")
			must.NotNil(t, n) // a failed restore leaves the state alone
		})
	}
}

func ExampleFSM_Apply() {
	f, _ := NewFSM(nil)
	buf, _ := msgpack.Encode(structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: fsmNode("n1")})
	fmt.Println(f.Apply(&raft.Log{Index: 1, Data: buf}))
	n, _ := f.State().NodeByID(nil, "n1")
	fmt.Println(n.Status, n.CreateIndex)
	// Output:
	// <nil>
	// ready 1
}

// TestEncodeEntry_RefusesWhatNoFSMCouldApply: the leader checks an entry
// before proposing it, so nothing is committed that every server would
// then fail (or halt) on.
func TestEncodeEntry_RefusesWhatNoFSMCouldApply(t *testing.T) {
	deep := map[string]any{}
	cur := deep
	for range 9000 {
		next := map[string]any{}
		cur["a"] = next
		cur = next
	}
	job := &structs.Job{ID: "deep", TaskGroups: []*structs.TaskGroup{{Name: "g", Tasks: []*structs.Task{{Name: "t", Config: deep}}}}}
	_, err := encodeEntry(structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: job})
	must.ErrorIs(t, err, structs.ErrInvalid)
	must.ErrorContains(t, err, "nested")

	_, err = encodeEntry(structs.MessageType(77), &structs.GenericRequest{})
	must.ErrorContains(t, err, "message type 77 is unknown")

	big := &structs.NodeRegisterRequest{Node: fsmNode("big")}
	big.Node.Meta = map[string]string{"x": strings.Repeat("x", maxEntrySize)}
	_, err = encodeEntry(structs.NodeRegisterRequestType, big)
	must.ErrorIs(t, err, structs.ErrInvalid)
	must.ErrorContains(t, err, "byte limit")

	_, err = encodeEntry(structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: fsmNode("ok")})
	must.NoError(t, err)

	// A plan skips the decode only when none of its allocs carries a job:
	// one that does is checked like a job register.
	plan := &structs.ApplyPlanResultsRequest{AllocsUpdated: []*structs.Allocation{{ID: "a1"}, {ID: "a2", Job: job}}}
	must.False(t, joblessPlan(plan))
	_, err = encodeEntry(structs.ApplyPlanResultsRequestType, plan)
	must.ErrorIs(t, err, structs.ErrInvalid)
	must.ErrorContains(t, err, "nested")
	plan.AllocsUpdated[1].Job = nil
	must.True(t, joblessPlan(plan))
	_, err = encodeEntry(structs.ApplyPlanResultsRequestType, plan)
	must.NoError(t, err)
}

// FuzzFSMApply: no entry, whatever its bytes, makes Apply panic; an
// unknown type halts the FSM instead, and the raftguard entry check
// refuses exactly the entries that would halt it.
func FuzzFSMApply(f *testing.F) {
	job, _ := msgpack.Encode(structs.JobRegisterRequestType, &structs.JobRegisterRequest{Job: &structs.Job{ID: "j", Namespace: "default"}})
	f.Add(job)
	f.Add([]byte{77, 0x80})
	f.Add([]byte{byte(structs.ApplyPlanResultsRequestType), 0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		fsm, err := NewFSM(nil)
		if err != nil {
			t.Fatal(err)
		}
		resp := fsm.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: data})
		_, halted := resp.(*HaltError)
		refused := raftguard.CheckEntries([]*raft.Log{{Index: 1, Type: raft.LogCommand, Data: data}}) != nil
		if halted && !refused {
			t.Fatalf("entry %x halts the fsm but the guard lets it through", data)
		}
	})
}

// decodesSurely lets through, without the decode check, exactly the
// message types that cannot nest without limit: a volume register (the
// bulk write it was made for) and a node register do; a job (its task
// config is map[string]any) and a recursive type do not.
func TestDecodesSurely(t *testing.T) {
	type recursive struct {
		Name string
		Next *recursive
	}
	for typ, want := range map[reflect.Type]bool{
		reflect.TypeFor[structs.CSIVolumeRegisterRequest](): true,
		reflect.TypeFor[structs.NodeRegisterRequest]():      true,
		reflect.TypeFor[structs.JobRegisterRequest]():       false,
		reflect.TypeFor[recursive]():                        false,
		reflect.TypeFor[struct{ X any }]():                  false,
		reflect.TypeFor[struct{ T time.Time }]():            true,
	} {
		must.Eq(t, want, decodesSurely(typ), must.Sprintf("%v", typ))
	}
	deep := reflect.TypeFor[int]()
	for range maxStaticDepth {
		deep = reflect.SliceOf(deep)
	}
	must.False(t, decodesSurely(deep), must.Sprint("nested deeper than maxStaticDepth"))
	must.True(t, decodesSurely(reflect.SliceOf(reflect.TypeFor[int]())))

	// A plan does not, for its allocs' jobs; without them it does (what
	// joblessPlan relies on: a field that could nest without limit added
	// to an alloc, a claim or an eval fails here).
	must.False(t, decodesSurely(reflect.TypeFor[structs.ApplyPlanResultsRequest]()))
	must.True(t, planDecodesSurelyWithoutJobs())
}
