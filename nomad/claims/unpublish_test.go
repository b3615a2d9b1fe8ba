package claims

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

// TestUnpublish: the steps a client's Unpublish writes in one entry, for
// each plugin profile and what else the volume holds on the node.
func TestUnpublish(t *testing.T) {
	detachedFreed := []structs.CSIClaimStep{structs.CSIClaimNodeDetached, structs.CSIClaimControllerDetached, structs.CSIClaimFreed}
	detachedOnly := []structs.CSIClaimStep{structs.CSIClaimNodeDetached}
	other := func(step structs.CSIClaimStep, node string) *structs.CSIVolumeClaim {
		c := stepClaim(step)
		c.AllocID, c.NodeID = "alloc-2", node
		return c
	}
	cases := []struct {
		name   string
		from   structs.CSIClaimStep
		claim  func(c *structs.CSIVolumeClaim)
		others []*structs.CSIVolumeClaim
		needs  bool // the plugin controller-publishes
		want   []structs.CSIClaimStep
	}{
		{name: "node-only plugin: freed in the same entry", from: structs.CSIClaimTaken, want: detachedFreed},
		{name: "node-only plugin, from a reservation", from: structs.CSIClaimReserved, want: detachedFreed},
		{name: "controller that attaches: the watcher controller-unpublishes", from: structs.CSIClaimTaken, needs: true, want: detachedOnly},
		{name: "controller that attaches, from a published reservation", from: structs.CSIClaimReserved, needs: true, want: detachedOnly},
		{
			name: "controller that attaches, claim never controller-published", from: structs.CSIClaimTaken, needs: true,
			claim: func(c *structs.CSIVolumeClaim) { c.ControllerPublished = false }, want: detachedFreed,
		},
		{
			name: "controller that attaches, no external node ID recorded", from: structs.CSIClaimTaken, needs: true,
			claim: func(c *structs.CSIVolumeClaim) { c.ExternalNodeID = "" }, want: detachedFreed,
		},
		{
			name: "controller that attaches, another claim still uses the volume on the node", from: structs.CSIClaimTaken, needs: true,
			others: []*structs.CSIVolumeClaim{other(structs.CSIClaimTaken, stepNode)}, want: detachedFreed,
		},
		{
			name: "controller that attaches, another claim on another node", from: structs.CSIClaimTaken, needs: true,
			others: []*structs.CSIVolumeClaim{other(structs.CSIClaimTaken, "node-2")}, want: detachedOnly,
		},
		{
			name: "controller that attaches, another claim on the node releasing too", from: structs.CSIClaimTaken, needs: true,
			others: []*structs.CSIVolumeClaim{other(structs.CSIClaimNodeDetached, stepNode)}, want: detachedOnly,
		},
		{
			name: "a recorded failure is cleared with the node side", from: structs.CSIClaimTaken,
			claim: func(c *structs.CSIVolumeClaim) {
				c.LastError, c.Attempts, c.NextRetry = "node 1: unpublish failed", 3, stepNow.UnixNano()
			},
			want: detachedFreed,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			claim := stepClaim(tc.from)
			if tc.claim != nil {
				tc.claim(claim)
			}
			vol := stepVolume(append([]*structs.CSIVolumeClaim{claim}, tc.others...)...)
			before := claim.Copy()
			got, next := Unpublish(vol, claim, Profile{ControllerPublish: tc.needs}, stepNow)
			if len(tc.want) == 1 {
				must.Eq(t, ControllerUnpublish, next, must.Sprint("the watcher's call comes next"))
			} else {
				must.Eq(t, Free, next)
			}
			var steps []structs.CSIClaimStep
			for _, c := range got {
				steps = append(steps, c.Step)
				must.Eq(t, stepAlloc, c.AllocID)
				must.Eq(t, stepNode, c.NodeID)
				must.Eq(t, "", c.LastError)
				must.Zero(t, c.Attempts)
				must.Zero(t, c.NextRetry)
				must.Eq(t, "", c.ReleaseReason, must.Sprint("the client's own unpublish is the normal path"))
			}
			must.Eq(t, tc.want, steps)
			must.Eq(t, before, claim, must.Sprint("the caller's claim is not touched"))
			must.Eq(t, tc.from, vol.Claims[stepAlloc].Step, must.Sprint("nor the volume"))
		})
	}
}
