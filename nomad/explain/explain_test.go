package explain

import (
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

var now = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

const (
	allocID = "1a2b3c4d-0000-4000-8000-000000000001"
	nodeID  = "9f8e7d6c-0000-4000-8000-000000000002"
)

func plugin(attaches bool, ctrlHealthy, nodesHealthy int) *structs.CSIPlugin {
	p := &structs.CSIPlugin{ID: "ebs", NodesHealthy: nodesHealthy, NodesExpected: 1,
		Nodes: map[string]*structs.CSIInfo{nodeID: {AllocID: "pn1"}}}
	if attaches {
		p.PublishUnpublish = true
		p.ControllersHealthy, p.ControllersExpected = ctrlHealthy, 1
		p.Controllers = map[string]*structs.CSIInfo{"n9": {AllocID: "pc1", Healthy: ctrlHealthy > 0}}
	}
	return p
}

func volume(claims ...*structs.CSIVolumeClaim) *structs.CSIVolume {
	v := &structs.CSIVolume{ID: "db", Namespace: "default", PluginID: "ebs", State: structs.CSIVolumeStateReady,
		AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, Claims: map[string]*structs.CSIVolumeClaim{}}
	for _, c := range claims {
		v.Claims[c.AllocID] = c
	}
	return v
}

func claim(step structs.CSIClaimStep, mod func(c *structs.CSIVolumeClaim)) *structs.CSIVolumeClaim {
	c := &structs.CSIVolumeClaim{AllocID: allocID, NodeID: nodeID, JobID: "web", Mode: structs.CSIVolumeClaimWrite,
		AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, Step: step}
	if mod != nil {
		mod(c)
	}
	return c
}

func alloc(desired, client string) map[string]*structs.Allocation {
	return map[string]*structs.Allocation{allocID: {ID: allocID, JobID: "web", NodeID: nodeID, DesiredStatus: desired,
		ClientStatus: client, ModifyTime: now.Add(-time.Minute).UnixNano()}}
}

func node(status string, deadline time.Duration) map[string]*structs.Node {
	return map[string]*structs.Node{nodeID: {ID: nodeID, Status: status, StatusUpdatedAt: now.Add(-time.Minute).UnixNano(),
		DisconnectDeadline: deadline}}
}

func TestExplain(t *testing.T) {
	running := alloc(structs.AllocDesiredStatusRun, structs.AllocClientStatusRunning)
	stopped := alloc(structs.AllocDesiredStatusStop, structs.AllocClientStatusComplete)
	lost := alloc(structs.AllocDesiredStatusStop, structs.AllocClientStatusLost)
	ready := node(structs.NodeStatusReady, 5*time.Minute)
	jobs := map[string]string{"pc1": "ebs-controller", "pn1": "ebs-nodes"}
	cases := []struct {
		name    string
		in      Input
		summary string
		why     []string
		action  []string
	}{
		{name: "free volume, healthy plugin",
			in:      Input{Volume: volume(), Plugin: plugin(true, 1, 1)},
			summary: "volume db has no live claims; a job can claim it"},
		{name: "writer still running",
			in:      Input{Volume: volume(claim(structs.CSIClaimTaken, nil)), Plugin: plugin(true, 1, 1), Allocs: running, Nodes: ready},
			summary: "volume db is single-node-writer and held by 1 claim(s)",
			why:     []string{"alloc 1a2b3c4d is still running on node 9f8e7d6c"},
			action:  []string{"stop it (`berth job stop web`), or wait; release will follow"}},
		{name: "reserved, alloc not started",
			in:     Input{Volume: volume(claim(structs.CSIClaimReserved, nil)), Plugin: plugin(true, 1, 1), Allocs: running, Nodes: ready},
			why:    []string{"reserved for alloc 1a2b3c4d on node 9f8e7d6c, which has not claimed the volume yet"},
			action: []string{"its client claims the volume when the alloc starts"}},
		{name: "stopped, waiting for the client's unpublish",
			in:      Input{Volume: volume(claim(structs.CSIClaimTaken, nil)), Plugin: plugin(true, 1, 1), Allocs: stopped, Nodes: ready},
			summary: "volume db is being released (1 claim(s)); nothing to do but wait",
			why:     []string{"alloc " + allocID + " stopped; waiting for node " + nodeID + " to unpublish the volume"}},
		{name: "down node without a deadline, node-only plugin",
			in: Input{Volume: volume(claim(structs.CSIClaimTaken, nil)), Plugin: plugin(false, 0, 1), Allocs: lost,
				Nodes: node(structs.NodeStatusDown, -1), DefaultDisconnect: 0},
			summary: "volume db has 1 claim(s) that need an operator",
			why:     []string{"node 9f8e7d6c is down and promised no disconnect deadline"},
			action:  []string{"`berth volume detach -force db " + nodeID + "` after you confirm the node is fenced"}},
		{name: "down node with a deadline",
			in: Input{Volume: volume(claim(structs.CSIClaimTaken, nil)), Plugin: plugin(false, 0, 1), Allocs: lost,
				Nodes: node(structs.NodeStatusDown, 5*time.Minute)},
			why: []string{"node 9f8e7d6c is down; alloc 1a2b3c4d's claim is freed when its disconnect deadline passes at 2026-11-25T12:04:00Z"}},
		{name: "controller unpublish retrying, no healthy controller",
			in: Input{Volume: volume(claim(structs.CSIClaimNodeDetached, func(c *structs.CSIVolumeClaim) {
				c.ControllerPublished, c.ExternalNodeID = true, "i-1"
				c.LastError, c.Attempts, c.NextRetry = "controller unavailable", 3, now.Add(30*time.Second).UnixNano()
			})), Plugin: plugin(true, 0, 1), Allocs: stopped, Nodes: ready, PluginJobs: jobs},
			why: []string{"controller plugin ebs has 0 healthy instances (of 1 expected)",
				"release of alloc 1a2b3c4d's claim failed 3 time(s) (last: controller unavailable); retrying at 2026-11-25T12:00:30Z"},
			action: []string{"check job `ebs-controller`", "controller plugin ebs has 0 healthy instances — check job `ebs-controller`"}},
		{name: "needs operator, plugin error",
			in: Input{Volume: volume(claim(structs.CSIClaimNeedsOperator, func(c *structs.CSIVolumeClaim) {
				c.BlockedStep, c.LastError = structs.CSIClaimNodeDetached, "controller unpublish: invalid argument"
			})), Plugin: plugin(true, 1, 1), Allocs: stopped, Nodes: ready},
			summary: "volume db has 1 claim(s) that need an operator",
			why:     []string{"claim of alloc 1a2b3c4d stopped at needs-operator: step node-detached failed: controller unpublish: invalid argument"},
			action:  []string{"fix what the error says in plugin ebs, then `berth volume detach db " + nodeID + "` retries the step"}},
		{name: "needs operator, step unsupported",
			in: Input{Volume: volume(claim(structs.CSIClaimNeedsOperator, func(c *structs.CSIVolumeClaim) {
				c.BlockedStep, c.LastError, c.Unsupported = structs.CSIClaimNodeDetached, "unimplemented", true
			})), Plugin: plugin(true, 1, 1), Allocs: stopped, Nodes: ready},
			action: []string{"the plugin does not implement that step: `berth volume detach db " + nodeID + "` skips it"}},
		{name: "no plugin at all",
			in:      Input{Volume: volume()},
			summary: "it cannot be claimed now: plugin ebs is not running on any node",
			action:  []string{"run the job of plugin ebs"}},
		{name: "no healthy node plugin",
			in:     Input{Volume: volume(), Plugin: plugin(false, 0, 0), PluginJobs: jobs},
			why:    []string{"node plugin ebs has 0 healthy instances (of 1 expected): no node can mount the volume"},
			action: []string{"check job `ebs-nodes`"}},
		{name: "volume still being created",
			in:     Input{Volume: func() *structs.CSIVolume { v := volume(); v.State = structs.CSIVolumeStateCreating; return v }(), Plugin: plugin(true, 1, 1)},
			why:    []string{"volume db is creating"},
			action: []string{"wait for `berth volume create` to finish"}},
		{name: "freed by the servers now: node gone",
			in:  Input{Volume: volume(claim(structs.CSIClaimTaken, nil)), Plugin: plugin(false, 0, 1), Allocs: stopped},
			why: []string{"node " + nodeID + " of alloc " + allocID + " is no longer registered"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Now = now
			e := Explain(tc.in)
			text := e.Text()
			if tc.summary != "" {
				must.StrContains(t, e.Summary, tc.summary)
			}
			for _, w := range tc.why {
				must.StrContains(t, text, w)
			}
			for _, a := range tc.action {
				must.StrContains(t, text, "next: ")
				must.StrContains(t, text, a)
			}
			if len(tc.action) == 0 {
				must.StrNotContains(t, text, "next: ", must.Sprint(text))
			}
		})
	}
}
