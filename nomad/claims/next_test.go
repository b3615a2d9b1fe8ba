package claims

import (
	"bufio"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

var stepNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	stepAlloc = "alloc-1"
	stepNode  = "node-1"
)

func stepClaim(step structs.CSIClaimStep) *structs.CSIVolumeClaim {
	return &structs.CSIVolumeClaim{
		AllocID: stepAlloc, JobID: "web", NodeID: stepNode, ExternalNodeID: "ext-1",
		Mode: structs.CSIVolumeClaimWrite, AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter,
		AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem, Step: step, ControllerPublished: true,
	}
}

func stepVolume(claims ...*structs.CSIVolumeClaim) *structs.CSIVolume {
	v := &structs.CSIVolume{ID: "vol", Namespace: "default", PluginID: "p", Claims: map[string]*structs.CSIVolumeClaim{}}
	for _, c := range claims {
		v.Claims[c.AllocID] = c
	}
	return v
}

func stepNodeIn(status string, downFor time.Duration) *structs.Node {
	n := &structs.Node{ID: stepNode, Status: status, StatusUpdatedAt: stepNow.Add(-time.Hour).UnixNano()}
	if status == structs.NodeStatusDown {
		n.StatusUpdatedAt = stepNow.Add(-downFor).UnixNano()
	}
	return WithDeadline(n, 5*time.Minute)
}

func stepNodeNamed(name string) *structs.Node {
	switch name {
	case "ready":
		return stepNodeIn(structs.NodeStatusReady, 0)
	case "down":
		return stepNodeIn(structs.NodeStatusDown, time.Minute)
	case "down-late":
		return stepNodeIn(structs.NodeStatusDown, 10*time.Minute)
	case "gone":
		return nil
	}
	panic("unknown node state " + name)
}

func stepAllocNamed(name string) *structs.Allocation {
	a := &structs.Allocation{ID: stepAlloc, NodeID: stepNode, DesiredStatus: structs.AllocDesiredStatusRun,
		ClientStatus: structs.AllocClientStatusRunning}
	switch name {
	case "running":
	case "exited":
		a.ClientStatus, a.TasksExited = structs.AllocClientStatusComplete, true
	case "stopped":
		// Stopped just now: its client is still stopping it.
		a.DesiredStatus, a.ModifyTime = structs.AllocDesiredStatusStop, stepNow.Add(-time.Second).UnixNano()
	case "gone":
		return nil
	default:
		panic("unknown alloc state " + name)
	}
	return a
}

func kindNamed(t *testing.T, s string) ActionKind {
	for k := None; k <= NodeDetach; k++ {
		if k.String() == s {
			return k
		}
	}
	t.Fatalf("unknown action %q", s)
	return None
}

// stepProfiles are the table's plugin profiles, as the state store
// computes them from instance fingerprints (TestPluginProfile in
// nomad/state checks that half).
var stepProfiles = []struct {
	name   string
	plugin *structs.CSIPlugin
}{
	{"node-only", &structs.CSIPlugin{ID: "p", ControllerRequired: true,
		Nodes: map[string]*structs.CSIInfo{stepNode: {PluginID: "p", Healthy: true}}}},
	{"ctrl-nopub", &structs.CSIPlugin{ID: "p", ControllerRequired: true,
		Controllers: map[string]*structs.CSIInfo{"c": {PluginID: "p", Healthy: true, ControllerInfo: &structs.CSIControllerInfo{}}}}},
	{"ctrl-pub", &structs.CSIPlugin{ID: "p", ControllerRequired: true, PublishUnpublish: true,
		Controllers: map[string]*structs.CSIInfo{"c": {PluginID: "p", Healthy: true,
			ControllerInfo: &structs.CSIControllerInfo{SupportsAttachDetach: true}}}}},
}

// TestNextStepTable checks testdata/next_step.txt: every claim step ×
// node × alloc × plugin profile.
func TestNextStepTable(t *testing.T) {
	f, err := os.Open("testdata/next_step.txt")
	must.NoError(t, err)
	defer f.Close()

	steps := []structs.CSIClaimStep{structs.CSIClaimReserved, structs.CSIClaimTaken,
		structs.CSIClaimNodeDetached, structs.CSIClaimControllerDetached, structs.CSIClaimNeedsOperator}
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		must.SliceLen(t, 3+len(stepProfiles), fields, must.Sprintf("line %d: %q", line, text))
		step, nodeName, allocName := structs.CSIClaimStep(fields[0]), fields[1], fields[2]
		key := strings.Join(fields[:3], " ")
		must.False(t, seen[key], must.Sprintf("line %d: %s given twice", line, key))
		seen[key] = true
		for i, prof := range stepProfiles {
			want := kindNamed(t, fields[3+i])
			claim := stepClaim(step)
			if step == structs.CSIClaimNeedsOperator {
				claim.BlockedStep, claim.LastError = structs.CSIClaimNodeDetached, "rpc error: code = InvalidArgument"
			}
			got := Next(stepVolume(claim), claim, stepAllocNamed(allocName), stepNodeNamed(nodeName), ProfileOf(prof.plugin, true), 0, stepNow)
			must.Eq(t, want, got.Kind, must.Sprintf("line %d: %s, %s: %s", line, key, prof.name, got.Reason))
			must.StrContains(t, got.Reason, stepAlloc, must.Sprintf("line %d: the reason names the alloc", line))
		}
	}
	must.NoError(t, sc.Err())
	for _, s := range steps {
		for _, n := range []string{"ready", "down", "down-late", "gone"} {
			for _, a := range []string{"running", "exited", "stopped", "gone"} {
				key := string(s) + " " + n + " " + a
				must.True(t, seen[key], must.Sprintf("testdata/next_step.txt lacks %q", key))
			}
		}
	}
}

func TestNextStep(t *testing.T) {
	other := func(step structs.CSIClaimStep, node string) *structs.CSIVolumeClaim {
		c := stepClaim(step)
		c.AllocID, c.NodeID = "alloc-2", node
		return c
	}
	cases := []struct {
		name   string
		claim  func(c *structs.CSIVolumeClaim)
		others []*structs.CSIVolumeClaim
		alloc  string
		node   *structs.Node
		needs  bool
		// grace is the server's NodeDetachGrace (zero: the default).
		grace time.Duration
		want  Action
	}{
		{
			name:  "node-detached leaves the controller to a claim still in use on the node",
			claim: func(c *structs.CSIVolumeClaim) { c.Step = structs.CSIClaimNodeDetached }, alloc: "exited",
			others: []*structs.CSIVolumeClaim{other(structs.CSIClaimTaken, stepNode)}, node: stepNodeNamed("ready"), needs: true,
			want: Action{Kind: Free},
		},
		{
			name:  "node-detached: a reserved claim on the node counts as in use",
			claim: func(c *structs.CSIVolumeClaim) { c.Step = structs.CSIClaimNodeDetached }, alloc: "exited",
			others: []*structs.CSIVolumeClaim{other(structs.CSIClaimReserved, stepNode)}, node: stepNodeNamed("ready"), needs: true,
			want: Action{Kind: Free},
		},
		{
			// Seed 41530: the reservation is freed without
			// ControllerUnpublish once its alloc stops, so the attachment
			// must not be left to it.
			name:  "node-detached: a reservation whose ControllerPublish failed for good does not hold the attachment",
			claim: func(c *structs.CSIVolumeClaim) { c.Step = structs.CSIClaimNodeDetached }, alloc: "exited",
			others: []*structs.CSIVolumeClaim{func() *structs.CSIVolumeClaim {
				c := other(structs.CSIClaimReserved, stepNode)
				c.ControllerPublished, c.Attempts, c.LastError = false, 1, "rpc error: code = Unimplemented"
				return c
			}()}, node: stepNodeNamed("ready"), needs: true,
			want: Action{Kind: ControllerUnpublish},
		},
		{
			name:  "node-detached: a reservation that has not published yet does not hold the attachment",
			claim: func(c *structs.CSIVolumeClaim) { c.Step = structs.CSIClaimNodeDetached }, alloc: "exited",
			others: []*structs.CSIVolumeClaim{func() *structs.CSIVolumeClaim {
				c := other(structs.CSIClaimReserved, stepNode)
				c.ControllerPublished, c.ExternalNodeID = false, ""
				return c
			}()}, node: stepNodeNamed("ready"), needs: true,
			want: Action{Kind: ControllerUnpublish},
		},
		{
			name:  "node-detached: another releasing claim on the node does not stop the unpublish",
			claim: func(c *structs.CSIVolumeClaim) { c.Step = structs.CSIClaimNodeDetached }, alloc: "exited",
			others: []*structs.CSIVolumeClaim{other(structs.CSIClaimNodeDetached, stepNode)}, node: stepNodeNamed("ready"), needs: true,
			want: Action{Kind: ControllerUnpublish},
		},
		{
			name:  "node-detached: a claim in use on another node does not stop the unpublish",
			claim: func(c *structs.CSIVolumeClaim) { c.Step = structs.CSIClaimNodeDetached }, alloc: "exited",
			others: []*structs.CSIVolumeClaim{other(structs.CSIClaimTaken, "node-2")}, node: stepNodeNamed("ready"), needs: true,
			want: Action{Kind: ControllerUnpublish},
		},
		{
			name: "a failed controller call waits for its retry time",
			claim: func(c *structs.CSIVolumeClaim) {
				c.Step, c.Attempts, c.LastError = structs.CSIClaimNodeDetached, 2, "rpc error: Unavailable"
				c.NextRetry = stepNow.Add(time.Second).UnixNano()
			},
			alloc: "exited", node: stepNodeNamed("ready"), needs: true,
			want: Action{Kind: RetryAfter, At: stepNow.Add(time.Second)},
		},
		{
			name: "and retries once it has come",
			claim: func(c *structs.CSIVolumeClaim) {
				c.Step, c.Attempts, c.NextRetry = structs.CSIClaimNodeDetached, 2, stepNow.UnixNano()
			},
			alloc: "exited", node: stepNodeNamed("ready"), needs: true,
			want: Action{Kind: ControllerUnpublish},
		},
		{
			name: "fencing a down node also waits for the retry time",
			claim: func(c *structs.CSIVolumeClaim) {
				c.Attempts, c.NextRetry = 1, stepNow.Add(time.Minute).UnixNano()
			},
			alloc: "stopped", node: stepNodeNamed("down"), needs: true,
			want: Action{Kind: RetryAfter, At: stepNow.Add(time.Minute), ReleaseReason: ReasonFenced},
		},
		{
			name: "a reservation whose controller publish may still run waits it out before unpublishing (seed 20144)",
			claim: func(c *structs.CSIVolumeClaim) {
				c.Step, c.ControllerPublished = structs.CSIClaimReserved, true
				c.PublishUntil = stepNow.Add(30 * time.Second).UnixNano()
			},
			alloc: "stopped", node: stepNodeNamed("ready"), needs: true,
			want: Action{Kind: Wait, Record: true, At: stepNow.Add(30*time.Second + ClockSkew)},
		},
		{
			name: "and unpublishes once it is over, clock skew included",
			claim: func(c *structs.CSIVolumeClaim) {
				c.Step, c.ControllerPublished = structs.CSIClaimReserved, true
				c.PublishUntil = stepNow.Add(-ClockSkew).UnixNano()
			},
			alloc: "stopped", node: stepNodeNamed("ready"), needs: true,
			want: Action{Kind: ControllerUnpublish},
		},
		{
			name: "a lost alloc's reservation on a down node waits out a publish that may still run too",
			claim: func(c *structs.CSIVolumeClaim) {
				c.Step, c.ControllerPublished = structs.CSIClaimReserved, true
				c.PublishUntil = stepNow.Add(time.Second).UnixNano()
			},
			alloc: "lost", node: stepNodeNamed("down"), needs: true,
			want: Action{Kind: Wait, Record: true, At: stepNow.Add(time.Second + ClockSkew)},
		},
		{
			name:  "a reservation that never recorded an external node ID was never published",
			claim: func(c *structs.CSIVolumeClaim) { c.Step, c.ExternalNodeID = structs.CSIClaimReserved, "" },
			alloc: "stopped", node: stepNodeNamed("ready"), needs: true,
			want: Action{Kind: Free},
		},
		{
			// Seed 550: the stopped reservation's ControllerUnpublish
			// detached the volume from under alloc-2's running tasks,
			// which kept their claim with nothing published.
			name:   "a stopped reservation leaves the attachment to a claim taken on the node",
			claim:  func(c *structs.CSIVolumeClaim) { c.Step = structs.CSIClaimReserved },
			others: []*structs.CSIVolumeClaim{other(structs.CSIClaimTaken, stepNode)},
			alloc:  "stopped", node: stepNodeNamed("ready"), needs: true,
			want: Action{Kind: Free},
		},
		{
			name: "but first waits out a publish of its own that may still run",
			claim: func(c *structs.CSIVolumeClaim) {
				c.Step, c.PublishUntil = structs.CSIClaimReserved, stepNow.Add(time.Second).UnixNano()
			},
			others: []*structs.CSIVolumeClaim{other(structs.CSIClaimTaken, stepNode)},
			alloc:  "stopped", node: stepNodeNamed("ready"), needs: true,
			want: Action{Kind: Wait, Record: true, At: stepNow.Add(time.Second + ClockSkew)},
		},
		{
			// Both stopped and decided on one snapshot: each leaving it
			// to the other would leave the volume attached to the node.
			name:   "another published reservation on the node does not hold the attachment for it",
			claim:  func(c *structs.CSIVolumeClaim) { c.Step = structs.CSIClaimReserved },
			others: []*structs.CSIVolumeClaim{other(structs.CSIClaimReserved, stepNode)},
			alloc:  "stopped", node: stepNodeNamed("ready"), needs: true,
			want: Action{Kind: ControllerUnpublish},
		},
		{
			name:  "nor does a releasing claim on the node, or a claim taken on another node",
			claim: func(c *structs.CSIVolumeClaim) { c.Step = structs.CSIClaimReserved },
			others: []*structs.CSIVolumeClaim{other(structs.CSIClaimNodeDetached, stepNode), func() *structs.CSIVolumeClaim {
				c := other(structs.CSIClaimTaken, "node-2")
				c.AllocID = "alloc-3"
				return c
			}()},
			alloc: "stopped", node: stepNodeNamed("ready"), needs: true,
			want: Action{Kind: ControllerUnpublish},
		},
		{
			name:  "a node-detached claim without an external node ID was never published",
			claim: func(c *structs.CSIVolumeClaim) { c.Step, c.ExternalNodeID = structs.CSIClaimNodeDetached, "" },
			alloc: "stopped", node: stepNodeNamed("ready"), needs: true,
			want: Action{Kind: Free},
		},
		{
			name:  "a down node cannot be fenced without the external node ID: it waits for the deadline",
			claim: func(c *structs.CSIVolumeClaim) { c.ExternalNodeID = "" },
			alloc: "stopped", node: stepNodeNamed("down"), needs: true,
			want: Action{Kind: Wait, Record: true, At: stepNow.Add(4 * time.Minute)},
		},
		{
			name:  "a down node waits for its deadline, shown on the claim",
			alloc: "stopped", node: stepNodeNamed("down"),
			want: Action{Kind: Wait, Record: true, At: stepNow.Add(4 * time.Minute)},
		},
		{
			name:  "a down node's own disconnect deadline wins over the default",
			alloc: "stopped",
			node: func() *structs.Node {
				n := stepNodeIn(structs.NodeStatusDown, 2*time.Minute)
				n.DisconnectDeadline = time.Minute
				return n
			}(),
			want: Action{Kind: MarkNodeDetached, ReleaseReason: ReasonDisconnectPassed},
		},
		{
			name:  "the deadline is inclusive",
			alloc: "stopped", node: stepNodeIn(structs.NodeStatusDown, 5*time.Minute),
			want: Action{Kind: MarkNodeDetached, ReleaseReason: ReasonDisconnectPassed},
		},
		{
			name:  "a down node is fenced by the controller",
			alloc: "gone", node: stepNodeNamed("down"), needs: true,
			want: Action{Kind: ControllerUnpublish, ReleaseReason: ReasonFenced},
		},
		{
			name:  "a down node with no status time never reaches a deadline",
			alloc: "stopped",
			node: func() *structs.Node {
				n := stepNodeIn(structs.NodeStatusDown, time.Hour)
				n.StatusUpdatedAt = 0
				return n
			}(),
			want: Action{Kind: Wait, Record: true},
		},
		{
			name:  "a gone node releases its node side",
			alloc: "stopped", node: nil,
			want: Action{Kind: MarkNodeDetached, ReleaseReason: ReasonNodeGone},
		},
		{
			name:  "a stopped alloc on a live node waits for its client, quietly, for the grace",
			alloc: "stopped", node: stepNodeNamed("ready"),
			want: Action{Kind: Wait, At: stepNow.Add(-time.Second + DefaultNodeDetachGrace)},
		},
		{
			name:  "a stopped alloc whose client said nothing for the grace: ask the client",
			alloc: "stopped-long-ago", node: stepNodeNamed("ready"),
			want: Action{Kind: NodeDetach, ReleaseReason: ReasonServerDetach},
		},
		{
			name:  "a garbage collected alloc on a live node: ask its client",
			alloc: "gone", node: stepNodeNamed("ready"),
			want: Action{Kind: NodeDetach, ReleaseReason: ReasonServerDetach},
		},
		{
			name: "a failed node detach waits for its retry time",
			claim: func(c *structs.CSIVolumeClaim) {
				c.Attempts, c.LastError, c.NextRetry = 1, "tasks still run", stepNow.Add(time.Minute).UnixNano()
			},
			alloc: "gone", node: stepNodeNamed("ready"),
			want: Action{Kind: RetryAfter, At: stepNow.Add(time.Minute)},
		},
		{
			name:  "an initializing node counts as live",
			alloc: "stopped", node: stepNodeIn(structs.NodeStatusInit, 0),
			want: Action{Kind: Wait, At: stepNow.Add(-time.Second + DefaultNodeDetachGrace)},
		},
		{
			name:  "a lost alloc is stopped",
			alloc: "lost", node: stepNodeNamed("down"),
			want: Action{Kind: Wait, Record: true, At: stepNow.Add(4 * time.Minute)},
		},
		{
			name:  "a shorter grace from the server config ends the quiet wait sooner",
			alloc: "stopped", node: stepNodeNamed("ready"), grace: 3 * time.Second,
			want: Action{Kind: Wait, At: stepNow.Add(-time.Second + 3*time.Second)},
		},
		{
			name:  "past a shorter grace: ask the client",
			alloc: "stopped-3s-ago", node: stepNodeNamed("ready"), grace: 3 * time.Second,
			want: Action{Kind: NodeDetach, ReleaseReason: ReasonServerDetach},
		},
		{
			name:  "the same stop within the default grace still waits",
			alloc: "stopped-3s-ago", node: stepNodeNamed("ready"),
			want: Action{Kind: Wait, At: stepNow.Add(-3*time.Second + DefaultNodeDetachGrace)},
		},
		{
			name:  "a grace never shortens a down node's deadline",
			alloc: "stopped-3s-ago", node: stepNodeNamed("down"), grace: 3 * time.Second,
			want: Action{Kind: Wait, Record: true, At: stepNow.Add(4 * time.Minute)},
		},
		{
			// Seed 4060: freed, the claim would take the deadline of an
			// abandoned unpublish out of state, and a new leader would let
			// a publish to the node run before it can no longer land.
			name: "a controller-detached claim is not freed while an unpublish for it may still run",
			claim: func(c *structs.CSIVolumeClaim) {
				c.Step, c.UnpublishUntil = structs.CSIClaimControllerDetached, stepNow.Add(20*time.Second).UnixNano()
			},
			alloc: "exited", node: stepNodeNamed("ready"), needs: true,
			want: Action{Kind: Wait, Record: true, At: stepNow.Add(20*time.Second + ClockSkew)},
		},
		{
			name: "and is freed once it is over, clock skew included",
			claim: func(c *structs.CSIVolumeClaim) {
				c.Step, c.UnpublishUntil = structs.CSIClaimControllerDetached, stepNow.Add(-ClockSkew).UnixNano()
			},
			alloc: "exited", node: stepNodeNamed("ready"), needs: true,
			want: Action{Kind: Free},
		},
		{
			name: "a claim freed without the controller waits out its own abandoned unpublish too",
			claim: func(c *structs.CSIVolumeClaim) {
				c.Step, c.UnpublishUntil = structs.CSIClaimNodeDetached, stepNow.Add(time.Second).UnixNano()
			},
			others: []*structs.CSIVolumeClaim{other(structs.CSIClaimTaken, stepNode)},
			alloc:  "exited", node: stepNodeNamed("ready"), needs: true,
			want: Action{Kind: Wait, Record: true, At: stepNow.Add(time.Second + ClockSkew)},
		},
		{
			name: "an unpublish that may still run does not hold a claim in use",
			claim: func(c *structs.CSIVolumeClaim) {
				c.UnpublishUntil = stepNow.Add(time.Second).UnixNano() // a fencing call, then the node came back
			},
			alloc: "running", node: stepNodeNamed("ready"), needs: true,
			want: Action{Kind: None},
		},
		{
			name:  "a client-terminal alloc without TasksExited is not done",
			alloc: "complete", node: stepNodeNamed("ready"),
			want: Action{Kind: Wait, At: stepNow.Add(DefaultNodeDetachGrace)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			claim := stepClaim(structs.CSIClaimTaken)
			if tc.claim != nil {
				tc.claim(claim)
			}
			var alloc *structs.Allocation
			switch tc.alloc {
			case "lost":
				alloc = stepAllocNamed("running")
				alloc.DesiredStatus, alloc.ClientStatus = structs.AllocDesiredStatusStop, structs.AllocClientStatusLost
			case "complete":
				alloc = stepAllocNamed("running")
				alloc.ClientStatus, alloc.ModifyTime = structs.AllocClientStatusComplete, stepNow.UnixNano()
			case "stopped-long-ago":
				alloc = stepAllocNamed("stopped")
				alloc.ModifyTime = stepNow.Add(-DefaultNodeDetachGrace).UnixNano()
			case "stopped-3s-ago":
				alloc = stepAllocNamed("stopped")
				alloc.ModifyTime = stepNow.Add(-3 * time.Second).UnixNano()
			default:
				alloc = stepAllocNamed(tc.alloc)
			}
			vol := stepVolume(append([]*structs.CSIVolumeClaim{claim}, tc.others...)...)
			got := Next(vol, claim, alloc, tc.node, Profile{ControllerPublish: tc.needs}, tc.grace, stepNow)
			must.Eq(t, tc.want.Kind, got.Kind, must.Sprint(got.Reason))
			must.Eq(t, tc.want.At, got.At)
			must.Eq(t, tc.want.Record, got.Record)
			must.Eq(t, tc.want.ReleaseReason, got.ReleaseReason)
			must.StrContains(t, got.Reason, stepAlloc)
		})
	}
}

func TestNextStep_ReasonsNameTheNode(t *testing.T) {
	claim := stepClaim(structs.CSIClaimTaken)
	got := Next(stepVolume(claim), claim, stepAllocNamed("stopped"), stepNodeNamed("down"), Profile{}, 0, stepNow)
	must.StrContains(t, got.Reason, stepNode)
	must.StrContains(t, got.Reason, "2026-03-01T12:04:00Z")

	got = Next(stepVolume(claim), claim, stepAllocNamed("gone"), stepNodeNamed("ready"), Profile{}, 0, stepNow)
	must.StrContains(t, got.Reason, "client of node "+stepNode)
}

func TestWithDeadline(t *testing.T) {
	n := &structs.Node{ID: "n"}
	got := WithDeadline(n, time.Minute)
	must.Eq(t, time.Minute, got.DisconnectDeadline)
	must.Eq(t, time.Duration(0), n.DisconnectDeadline, must.Sprint("the stored node is never touched"))
	own := &structs.Node{ID: "n", DisconnectDeadline: time.Hour}
	must.True(t, WithDeadline(own, time.Minute) == own)
	must.Nil(t, WithDeadline(nil, time.Minute))
}

// TestNextStep_NoDeadlineNoTimedRelease: a down node without a disconnect
// deadline (its client never promised to stop its allocs) is never
// released on a timer, however long it has been down: only fencing or an
// operator may release it.
func TestNextStep_NoDeadlineNoTimedRelease(t *testing.T) {
	claim := stepClaim(structs.CSIClaimTaken)
	node := stepNodeNamed("down")
	node.DisconnectDeadline = 0
	node.StatusUpdatedAt = stepNow.Add(-24 * time.Hour).UnixNano()

	got := Next(stepVolume(claim), claim, stepAllocNamed("stopped"), node, Profile{}, 0, stepNow)
	must.Eq(t, Wait, got.Kind, must.Sprintf("got %+v", got))
	must.StrContains(t, got.Reason, "volume detach -force")

	// With a controller that published it, fencing still releases it.
	claim.ExternalNodeID = "ext-1"
	got = Next(stepVolume(claim), claim, stepAllocNamed("stopped"), node, Profile{ControllerPublish: true}, 0, stepNow)
	must.Eq(t, ControllerUnpublish, got.Kind, must.Sprintf("got %+v", got))
}

// UnpublishHold finds the live claim whose ControllerUnpublish from a
// node may still land, the latest when there are several, and nothing
// for another node or once the deadline plus the clock skew passed.
func TestUnpublishHold(t *testing.T) {
	held := func(alloc, ext string, until time.Duration) *structs.CSIVolumeClaim {
		c := stepClaim(structs.CSIClaimNodeDetached)
		c.AllocID, c.ExternalNodeID = alloc, ext
		if until != 0 {
			c.UnpublishUntil = stepNow.Add(until).UnixNano()
		}
		return c
	}
	vol := stepVolume(
		held("a1", "ext-1", 5*time.Second),
		held("a2", "ext-1", 9*time.Second),
		held("a3", "ext-1", -ClockSkew), // over
		held("a4", "ext-2", time.Minute),
		held("a5", "ext-1", 0), // old state: no field
	)
	c, until := UnpublishHold(vol, "ext-1", stepNow)
	must.NotNil(t, c)
	must.Eq(t, "a2", c.AllocID)
	must.Eq(t, stepNow.Add(9*time.Second+ClockSkew), until)

	c, _ = UnpublishHold(vol, "ext-1", stepNow.Add(9*time.Second+ClockSkew))
	must.Nil(t, c, must.Sprint("over at the deadline plus the clock skew"))
	c, _ = UnpublishHold(vol, "ext-3", stepNow)
	must.Nil(t, c)
	c, _ = UnpublishHold(stepVolume(held("a5", "ext-1", 0)), "ext-1", stepNow)
	must.Nil(t, c, must.Sprint("a claim written before UnpublishUntil holds nothing"))
}
