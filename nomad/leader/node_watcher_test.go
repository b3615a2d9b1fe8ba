package leader

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

func watchedNode(id string) *structs.Node {
	return &structs.Node{
		ID: id, Datacenter: "dc1", Status: structs.NodeStatusReady, SchedulingEligibility: structs.NodeSchedulingEligible,
		NodeResources: &structs.NodeResources{CPU: 1000, MemoryMB: 1000},
		Drivers:       map[string]*structs.DriverInfo{"exec": {Detected: true, Healthy: true}},
	}
}

func TestDiffNodes(t *testing.T) {
	ready := watchedNode("a")
	edit := func(edit func(n *structs.Node)) *structs.Node {
		n := ready.Copy()
		edit(n)
		return n
	}
	initializing := edit(func(n *structs.Node) { n.Status = structs.NodeStatusInit })
	cases := []struct {
		name      string
		prev, cur *structs.Node
		want      nodeChanges
	}{
		{"unchanged", ready, ready, nodeChanges{}},
		{"new ready node", nil, ready, nodeChanges{schedulable: []string{"a"}, capacityGrew: true}},
		{"new initializing node", nil, initializing, nodeChanges{}},
		{"became ready", initializing, ready, nodeChanges{schedulable: []string{"a"}, capacityGrew: true}},
		{"went down", ready, edit(func(n *structs.Node) { n.Status = structs.NodeStatusDown }), nodeChanges{}},
		{"became ineligible", ready, edit(func(n *structs.Node) { n.SchedulingEligibility = structs.NodeSchedulingIneligible }), nodeChanges{}},
		{"drain cleared, eligible", edit(func(n *structs.Node) { n.DrainStrategy = &structs.DrainStrategy{} }), ready,
			nodeChanges{schedulable: []string{"a"}, capacityGrew: true}},
		{"new driver", ready, edit(func(n *structs.Node) { n.Drivers["raw_exec"] = &structs.DriverInfo{Detected: true, Healthy: true} }),
			nodeChanges{schedulable: []string{"a"}, capacityGrew: true}},
		{"driver health text only", ready, edit(func(n *structs.Node) { n.Drivers["exec"].HealthDescription = "fine" }), nodeChanges{}},
		{"plugin became healthy", edit(func(n *structs.Node) {
			n.CSINodePlugins = map[string]*structs.CSIInfo{"p": {PluginID: "p"}}
		}), edit(func(n *structs.Node) {
			n.CSINodePlugins = map[string]*structs.CSIInfo{"p": {PluginID: "p", Healthy: true}}
		}), nodeChanges{schedulable: []string{"a"}, capacityGrew: true}},
		{"status text only", ready, edit(func(n *structs.Node) { n.StatusDescription = "hello" }), nodeChanges{}},
		{"deregistered", ready, nil, nodeChanges{removed: []string{"a"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			prev, cur := map[string]*structs.Node{}, map[string]*structs.Node{}
			if tc.prev != nil {
				prev["a"] = tc.prev
			}
			if tc.cur != nil {
				cur["a"] = tc.cur
			}
			must.Eq(t, tc.want, diffNodes(prev, cur))
		})
	}
}
