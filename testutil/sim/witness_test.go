package sim

import (
	"fmt"
	"slices"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/shoenig/test/must"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/berth-io/berth/nomad/claims"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi/fake"
)

func publish(w *Witness, node, vol, alloc string, ro bool) {
	req := &csipb.NodePublishVolumeRequest{VolumeId: vol, Readonly: ro,
		TargetPath: "/d/" + node + "/client/csi/p/per-alloc/" + alloc + "/" + vol + "/usage"}
	obs := w.Observer(node)
	obs(fake.Call{Method: "NodePublishVolume", Req: req})
	obs(fake.Call{Method: "NodePublishVolume", Req: req, Done: true})
}

func checks(vs []Violation) []Check {
	var out []Check
	for _, v := range vs {
		out = append(out, v.Check)
	}
	return out
}

// TestWitness_TwoWritersOnTwoNodes: a witness that sees a single-node
// volume published on two nodes reports check 1; readers of a
// multi-node-reader volume are fine, one writer is not.
func TestWitness_TwoWritersOnTwoNodes(t *testing.T) {
	w := NewWitness(map[string]structs.CSIVolumeAccessMode{
		"snw": structs.CSIVolumeAccessModeSingleNodeWriter,
		"mnr": structs.CSIVolumeAccessModeMultiNodeReader,
		"mnw": structs.CSIVolumeAccessModeMultiNodeMultiWriter,
		"msw": structs.CSIVolumeAccessModeMultiNodeSingleWriter,
	})
	publish(w, "n0", "snw", "a1", false)
	must.SliceEmpty(t, w.Violations())
	publish(w, "n1", "snw", "a2", false)
	must.Eq(t, []Check{CheckWriters}, checks(w.Violations()))

	publish(w, "n0", "mnr", "a3", true)
	publish(w, "n1", "mnr", "a4", true)
	must.Len(t, 1, w.Violations(), must.Sprint("readers on two nodes are allowed"))
	publish(w, "n1", "mnr", "a5", false)
	must.Len(t, 2, w.Violations(), must.Sprint("a writer of a read-only volume"))

	publish(w, "n0", "mnw", "a6", false)
	publish(w, "n1", "mnw", "a7", false)
	must.Len(t, 2, w.Violations(), must.Sprint("multi-node-multi-writer allows writers everywhere"))

	publish(w, "n0", "msw", "a8", false)
	publish(w, "n1", "msw", "a9", true)
	must.Len(t, 2, w.Violations())
	publish(w, "n1", "msw", "a10", false)
	must.Len(t, 3, w.Violations(), must.Sprint("two writers of a single-writer volume"))
}

// TestWitness_UnpublishFreesTheSlot: once unpublished (or NotFound), a
// volume may be published elsewhere; a failed unpublish keeps it.
func TestWitness_UnpublishFreesTheSlot(t *testing.T) {
	w := NewWitness(map[string]structs.CSIVolumeAccessMode{"v": structs.CSIVolumeAccessModeSingleNodeWriter})
	w.Running = func(string) []string { return nil }
	publish(w, "n0", "v", "a1", false)
	un := &csipb.NodeUnpublishVolumeRequest{VolumeId: "v", TargetPath: "/d/n0/client/csi/p/per-alloc/a1/v/usage"}
	w.Observer("n0")(fake.Call{Method: "NodeUnpublishVolume", Req: un, Done: true, Err: status.Error(codes.Unavailable, "down")})
	must.Len(t, 1, w.Pubs())
	w.Observer("n0")(fake.Call{Method: "NodeUnpublishVolume", Req: un, Done: true, Err: status.Error(codes.NotFound, "gone")})
	must.SliceEmpty(t, w.Pubs())
	publish(w, "n1", "v", "a2", false)
	must.SliceEmpty(t, w.Violations())
}

// TestWitness_UnpublishWhileTasksRun reports check 2 unless the volume was
// force-detached.
func TestWitness_UnpublishWhileTasksRun(t *testing.T) {
	w := NewWitness(map[string]structs.CSIVolumeAccessMode{"v": structs.CSIVolumeAccessModeSingleNodeWriter})
	w.Running = func(a string) []string {
		if a == "a1" {
			return []string{"a1/t"}
		}
		return nil
	}
	un := func(alloc string) fake.Call {
		return fake.Call{Method: "NodeUnpublishVolume", Req: &csipb.NodeUnpublishVolumeRequest{VolumeId: "v",
			TargetPath: "/d/n0/client/csi/p/per-alloc/" + alloc + "/v/usage"}}
	}
	w.Observer("n0")(un("a2"))
	must.SliceEmpty(t, w.Violations())
	w.Observer("n0")(un("a1"))
	must.Eq(t, []Check{CheckEarlyFree}, checks(w.Violations()))
	w.Excuse("v", "detach -force")
	w.Observer("n0")(un("a1"))
	must.Len(t, 1, w.Violations())
}

// TestWitness_ProtocolFollowsTheProfile reports check 7 for RPCs the
// plugin's capabilities do not allow.
func TestWitness_ProtocolFollowsTheProfile(t *testing.T) {
	w := NewWitness(nil)
	obs := w.Observer("n0")
	obs(fake.Call{Method: "ControllerPublishVolume", Req: &csipb.ControllerPublishVolumeRequest{}})
	obs(fake.Call{Method: "NodeStageVolume", Req: &csipb.NodeStageVolumeRequest{}})
	must.Eq(t, []Check{CheckProtocol, CheckProtocol}, checks(w.Violations()))

	w = NewWitness(nil)
	w.Profile = Profile{Controller: true, PublishUnpublish: true, StageUnstage: true}
	obs = w.Observer("n0")
	obs(fake.Call{Method: "ControllerPublishVolume", Req: &csipb.ControllerPublishVolumeRequest{}})
	obs(fake.Call{Method: "NodeStageVolume", Req: &csipb.NodeStageVolumeRequest{}})
	must.SliceEmpty(t, w.Violations())
	obs(fake.Call{Method: "ControllerPublishVolume", Req: &csipb.ControllerPublishVolumeRequest{Readonly: true}})
	must.Eq(t, []Check{CheckProtocol}, checks(w.Violations()), must.Sprint("readonly without PUBLISH_READONLY"))
}

// TestWitness_ControllerAttachesOneNode reports check 1 when a
// single-node volume is controller-published to a second node before the
// first was unpublished.
func TestWitness_ControllerAttachesOneNode(t *testing.T) {
	w := NewWitness(map[string]structs.CSIVolumeAccessMode{"v": structs.CSIVolumeAccessModeSingleNodeWriter})
	w.Profile = Profile{Controller: true, PublishUnpublish: true}
	pub := func(node string) {
		w.Observer("n")(fake.Call{Method: "ControllerPublishVolume", Req: &csipb.ControllerPublishVolumeRequest{VolumeId: "v", NodeId: node}, Done: true})
	}
	pub("x")
	w.Observer("n")(fake.Call{Method: "ControllerUnpublishVolume", Req: &csipb.ControllerUnpublishVolumeRequest{VolumeId: "v", NodeId: "x"}, Done: true})
	pub("y")
	must.SliceEmpty(t, w.Violations())
	pub("x")
	must.Eq(t, []Check{CheckWriters}, checks(w.Violations()))
	must.Len(t, 2, w.Attached())
}

// TestWitness_ControllerDetachFences: once the controller detached a
// volume from a node (fencing a node that is down), what that node still
// has published of it no longer counts.
func TestWitness_ControllerDetachFences(t *testing.T) {
	w := NewWitness(map[string]structs.CSIVolumeAccessMode{"v": structs.CSIVolumeAccessModeSingleNodeWriter})
	w.Profile = Profile{Controller: true, PublishUnpublish: true}
	publish(w, "n0", "v", "a1", false)
	w.Observer("n")(fake.Call{Method: "ControllerUnpublishVolume", Req: &csipb.ControllerUnpublishVolumeRequest{VolumeId: "v", NodeId: extNodeID("n1")}, Done: true})
	must.Len(t, 1, w.Pubs(), must.Sprint("a detach from another node fences nothing here"))
	w.Observer("n")(fake.Call{Method: "ControllerUnpublishVolume", Req: &csipb.ControllerUnpublishVolumeRequest{VolumeId: "v", NodeId: extNodeID("n0")}, Done: true})
	must.SliceEmpty(t, w.Pubs())
	publish(w, "n1", "v", "a2", false)
	must.SliceEmpty(t, w.Violations())
}

// TestWitness_PublishLandingOnAFencedNode: a NodePublish in flight when
// the controller detached the volume from its node (the servers fencing a
// node that went down) lands after the volume was attached and published
// elsewhere (seed 2875 with its process stopped 4 s: 2 of 4 runs). The
// fenced node has no device to write through, so it is no second writer;
// once the controller attaches the volume there again, it counts again.
func TestWitness_PublishLandingOnAFencedNode(t *testing.T) {
	w := NewWitness(map[string]structs.CSIVolumeAccessMode{"v": structs.CSIVolumeAccessModeMultiNodeSingleWriter})
	w.Profile = Profile{Controller: true, PublishUnpublish: true}
	ctrl := func(method, node string) {
		var req proto.Message = &csipb.ControllerPublishVolumeRequest{VolumeId: "v", NodeId: extNodeID(node)}
		if method == "ControllerUnpublishVolume" {
			req = &csipb.ControllerUnpublishVolumeRequest{VolumeId: "v", NodeId: extNodeID(node)}
		}
		w.Observer("n0")(fake.Call{Method: method, Req: req, Done: true})
	}
	ctrl("ControllerPublishVolume", "n1")
	ctrl("ControllerUnpublishVolume", "n1") // the fence
	ctrl("ControllerPublishVolume", "n0")
	publish(w, "n0", "v", "a2", false)
	publish(w, "n1", "v", "a1", false) // the publish that was in flight
	must.SliceEmpty(t, w.Violations())
	must.Len(t, 2, w.Pubs(), must.Sprint("the fenced node's mount is still one to clean up"))

	ctrl("ControllerPublishVolume", "n1") // attached again: n1 can write
	publish(w, "n1", "v", "a3", false)
	must.Eq(t, []Check{CheckWriters}, checks(w.Violations()))
}

// TestShrink keeps exactly the ops a failure needs.
func TestShrink(t *testing.T) {
	var ops []Op
	for i := range 20 {
		ops = append(ops, Op{Kind: OpWait, Job: i})
	}
	needs := func(o []Op) bool {
		return slices.ContainsFunc(o, func(x Op) bool { return x.Job == 3 }) &&
			slices.ContainsFunc(o, func(x Op) bool { return x.Job == 17 })
	}
	got := Shrink(ops, needs, 1000)
	must.Eq(t, []Op{{Kind: OpWait, Job: 3}, {Kind: OpWait, Job: 17}}, got)

	// A budget of 0 changes nothing.
	must.Eq(t, ops, Shrink(ops, needs, 0))
}

// TestGenerate is deterministic by seed and draws every kind of step and
// profile over a few hundred seeds.
func TestGenerate(t *testing.T) {
	must.Eq(t, Generate(7, DefaultGen).String(), Generate(7, DefaultGen).String())
	must.NotEq(t, Generate(7, DefaultGen).String(), Generate(8, DefaultGen).String())
	kinds, profiles, modesSeen, codesSeen := map[Kind]bool{}, map[string]bool{}, map[structs.CSIVolumeAccessMode]bool{}, map[codes.Code]bool{}
	for seed := range uint64(400) {
		s := Generate(seed, GenConfig{Ops: 14, Nodes: 2, Servers: 3})
		profiles[s.Profile.String()] = true
		for _, v := range s.Volumes {
			modesSeen[v.Mode] = true
		}
		for _, o := range s.Ops {
			kinds[o.Kind] = true
			if o.Kind == FaultNode || o.Kind == FaultCtrl {
				codesSeen[o.Code] = true
			}
		}
	}
	for _, k := range []Kind{OpRunJob, OpStopJob, OpPurgeJob, OpDrain, OpIneligible, OpEligible, OpDetach, OpGC, OpWait,
		OpExitTasks, FaultKill, FaultRestart, FaultNode, FaultCtrl, FaultHealCSI, FaultRestartS, FaultLoseMnts,
		FaultCutNode, FaultCutServer, FaultLossyRaft, FaultSlow} {
		must.True(t, kinds[k], must.Sprintf("no schedule has %s", k))
	}
	must.MapLen(t, len(modes), modesSeen)
	for _, c := range errorCodes {
		must.True(t, codesSeen[c], must.Sprintf("no fault injects %s", c))
	}
	must.MapLen(t, 8, profiles, must.Sprintf("profiles drawn: %v", profiles))
}

func isCapsFault(o Op) bool { return slices.Contains(capsMethods, o.Method) }

// TestGenerate_CapsFaults: the plugins' capability calls fail in some
// schedules, on every controller or on one node, once or until healed;
// never a controller fault where the plugin has no controller, and never
// more than one per schedule.
func TestGenerate_CapsFaults(t *testing.T) {
	seen := map[string]bool{}
	for seed := range uint64(400) {
		s := Generate(seed, DefaultGen)
		faults := slices.DeleteFunc(slices.Clone(s.Ops), func(o Op) bool { return !isCapsFault(o) })
		must.SliceLen(t, min(len(faults), 1), faults, must.Sprintf("seed %d: %v", seed, faults))
		for _, o := range faults {
			must.True(t, o.Hang || o.Code == codes.Unavailable || o.Code == codes.DeadlineExceeded, must.Sprintf("seed %d: %s", seed, o))
			if o.Method == "ControllerGetCapabilities" {
				must.Eq(t, FaultCtrl, o.Kind)
				must.True(t, s.Profile.Controller, must.Sprintf("seed %d: %s without a controller", seed, o))
			} else {
				must.Eq(t, FaultNode, o.Kind)
			}
			seen[fmt.Sprintf("%s hang=%v", o.Method, o.Hang)] = true
		}
	}
	must.MapLen(t, 4, seen, must.Sprintf("drawn: %v", seen))
}

// TestGenerate_Partitions: partitions heal by themselves, server ones
// only where there are servers to cut, slow calls end within the call
// timeout, and a seed's other ops are what they were without partitions
// and slow calls (replays of older seeds keep their base).
func TestGenerate_Partitions(t *testing.T) {
	deadlines := 0
	for seed := range uint64(400) {
		s := Generate(seed, DefaultGen)
		base := Generate(seed, GenConfig{Ops: DefaultGen.Ops, Nodes: DefaultGen.Nodes, Servers: DefaultGen.Servers, NoPartitions: true, NoSlow: true})
		base.Ops = slices.DeleteFunc(base.Ops, isCapsFault)
		var rest []Op
		for _, o := range s.Ops {
			if isCapsFault(o) {
				continue
			}
			switch o.Kind {
			case FaultSlow:
				must.Between(t, 300*time.Millisecond, o.Wait, 1500*time.Millisecond,
					must.Sprintf("seed %d: %s must end within the clients' 2 s call timeout", seed, o))
				must.False(t, slices.ContainsFunc(s.Ops, func(k Op) bool { return (k.Kind == FaultKill || k.Kind == FaultLoseMnts) && k.Node == o.Node }),
					must.Sprintf("seed %d: %s on a node whose client is killed", seed, o))
			case FaultCutNode, FaultCutServer, FaultLossyRaft:
				must.Positive(t, o.Wait, must.Sprintf("seed %d: %s never heals by itself", seed, o))
				if o.Kind != FaultCutNode {
					must.Eq(t, 3, s.Servers, must.Sprintf("seed %d: %s with one server", seed, o))
				}
			default:
				rest = append(rest, o)
			}
		}
		must.Eq(t, base.Ops, rest, must.Sprintf("seed %d: partitions changed the other ops", seed))
		if s.DisconnectDeadline > 0 {
			deadlines++
		}
	}
	must.Positive(t, deadlines, must.Sprint("no schedule gives its clients a disconnect deadline"))
}

// TestAbandonedByOperator: check 4 leaves a controller attachment alone
// only where the servers record that an operator's detach skipped its
// ControllerUnpublish after it was made (seed 41635), never one a normal
// release, another node's skip or a skip before the attachment left.
func TestAbandonedByOperator(t *testing.T) {
	t0 := time.Unix(1000, 0)
	skip := func(node string, at time.Time, reason string) *structs.CSIVolumeClaim {
		return &structs.CSIVolumeClaim{AllocID: "a", NodeID: node, Step: structs.CSIClaimFreed, History: []structs.CSIClaimTransition{
			{From: structs.CSIClaimNodeDetached, To: structs.CSIClaimNeedsOperator, Time: at.Add(-time.Second).UnixNano()},
			{From: structs.CSIClaimNeedsOperator, To: structs.CSIClaimControllerDetached, Time: at.UnixNano(), Reason: reason},
			{From: structs.CSIClaimControllerDetached, To: structs.CSIClaimFreed, Time: at.UnixNano(), Reason: reason},
		}}
	}
	normal := &structs.CSIVolumeClaim{AllocID: "a", NodeID: "n1", Step: structs.CSIClaimFreed, History: []structs.CSIClaimTransition{
		{From: structs.CSIClaimNodeDetached, To: structs.CSIClaimControllerDetached, Time: t0.Add(time.Second).UnixNano()},
	}}
	for _, tc := range []struct {
		name string
		past *structs.CSIVolumeClaim
		want bool
	}{
		{"forced skip after the attachment", skip("n1", t0.Add(time.Second), claims.ReasonDetachForce), true},
		{"unimplemented step skipped", skip("n1", t0.Add(time.Second), claims.ReasonOperatorSkipped), true},
		{"skip before the attachment was made again", skip("n1", t0.Add(-time.Second), claims.ReasonDetachForce), false},
		{"skip on another node", skip("n2", t0.Add(time.Second), claims.ReasonDetachForce), false},
		{"resumed by the operator, not skipped", skip("n1", t0.Add(time.Second), claims.ReasonOperatorResumed), false},
		{"normal release", normal, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vol := &structs.CSIVolume{ID: "v0", PastClaims: []*structs.CSIVolumeClaim{tc.past}}
			must.Eq(t, tc.want, abandonedByOperator(vol, "n1", t0))
		})
	}
	must.False(t, abandonedByOperator(nil, "n1", t0))
}

// TestWitness_UnpublishByTheWrongVolumeID: a NodeUnpublishVolume must name
// the volume published at its target (check 7).
func TestWitness_UnpublishByTheWrongVolumeID(t *testing.T) {
	w := NewWitness(map[string]structs.CSIVolumeAccessMode{"ext-v": structs.CSIVolumeAccessModeSingleNodeWriter})
	w.Running = func(string) []string { return nil }
	publish(w, "n", "ext-v", "a1", false)
	unpub := func(vol string) {
		req := &csipb.NodeUnpublishVolumeRequest{VolumeId: vol, TargetPath: "/d/n/client/csi/p/per-alloc/a1/ext-v/usage"}
		w.Observer("n")(fake.Call{Method: "NodeUnpublishVolume", Req: req})
	}
	unpub("ext-v")
	must.SliceEmpty(t, w.Violations())
	unpub("v")
	must.Eq(t, []Check{CheckProtocol}, checks(w.Violations()))
}

// TestStoppedCheck: check 8 flags exactly a task still running for an
// alloc the servers stopped on a node whose client is up, naming the
// alloc, the task and the node; a killed or cut-off client, an alloc
// still wanted, one its client reported terminal (check 4's) and a
// stopped alloc whose tasks all exited are not its business.
func TestStoppedCheck(t *testing.T) {
	alloc := func(id, node, desired, client string) *structs.Allocation {
		return &structs.Allocation{ID: id, NodeID: node, DesiredStatus: desired, DesiredDescription: "alloc not needed",
			ClientStatus: client}
	}
	const (
		up   = "node-up-0000000000000000000000000000"
		down = "node-down-00000000000000000000000000"
	)
	allocs := []*structs.Allocation{
		alloc("leaked-000", up, structs.AllocDesiredStatusStop, structs.AllocClientStatusRunning),
		alloc("evicted-00", up, structs.AllocDesiredStatusEvict, structs.AllocClientStatusRunning),
		alloc("on-down-00", down, structs.AllocDesiredStatusStop, structs.AllocClientStatusRunning),
		alloc("wanted-000", up, structs.AllocDesiredStatusRun, structs.AllocClientStatusRunning),
		alloc("complete-0", up, structs.AllocDesiredStatusStop, structs.AllocClientStatusComplete),
		alloc("exited-000", up, structs.AllocDesiredStatusStop, structs.AllocClientStatusRunning),
	}
	clientUp := func(id string) (string, bool) {
		if id == up {
			return "n0", true
		}
		return "n1", false
	}
	running := func(a string) []string {
		if a == "exited-000" {
			return nil
		}
		return []string{a + "/web"}
	}
	vs := stoppedCheck(allocs, clientUp, running)
	must.Eq(t, []Check{CheckStopped, CheckStopped}, checks(vs))
	for i, want := range []string{"leaked-000", "evicted-00"} {
		for _, part := range []string{"alloc " + want, want + "/web", "still run on n0"} {
			must.StrContains(t, vs[i].Msg, part)
		}
	}
}
