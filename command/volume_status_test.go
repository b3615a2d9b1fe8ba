package command

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

func TestVolumeStatus(t *testing.T) {
	f := newFakeAPI(t)
	seedCluster(f)
	cases := []struct {
		name   string
		args   []string
		code   int
		out    []string
		errOut []string
		not    string
		json   bool
	}{
		{name: "list with claims", args: []string{"volume", "status"},
			out: []string{"ID      Name    Namespace  Plugin ID  Schedulable  Access Mode         Claims",
				"data    data    default    hostpath   true         single-node-writer  2",
				"data-2", "logs"}},
		{name: "list by plugin", args: []string{"volume", "status", "-plugin-id", "host-b"}, out: []string{"logs"}, not: "data"},
		{name: "list by node prefix", args: []string{"volume", "status", "-node", "9a0b1"}, out: []string{"data "}, not: "logs"},
		{name: "one volume: fields, topologies, allocations, claims", args: []string{"volume", "status", "data"},
			out: []string{"ID                   = data", "External ID          = ext-data", "Plugin ID            = hostpath",
				"Provider             = hostpath.berth.io", "Version              = 0.1.0", "State                = ready",
				"Capacity             = 10 MiB", "Schedulable          = true", "Controllers Healthy  = 1", "Controllers Expected = 1",
				"Nodes Healthy        = 0", "Nodes Expected       = 1", "Access Mode          = single-node-writer",
				"Attachment Mode      = file-system", "Mount Options        = <none>", "Namespace            = default",
				"Topologies", "Topology  Segments", "00        rack=R1, zone=a",
				"Allocations", "ID        Node ID   Task Group  Version  Desired  Status", "5e6f7a8b  9a0b1c2d  g",
				"Claims", "Alloc ID  Node ID   Mode   Step           Attempts  Last Error", "Age",
				"5e6f7a8b  9a0b1c2d  write  taken          0         <none>", "1h ago",
				"5e6f7a8b  9a0b1c2d  write  node-detached  3         controller unpublish: rpc error: code = Unavailable", "2h ago"},
			not: "Timeline"},
		{name: "verbose adds past claims and how they ended", args: []string{"volume", "status", "-verbose", "data"},
			out: []string{"Claims", "Next Retry", allocA, "in 30s",
				"Claim Timeline", "alloc " + allocA2 + " on node " + nodeA, "Time", "Transition", "Attempts", "Error",
				"reserved ", "reserved -> taken", "taken -> node-detached",
				"node-detached (retry)   3         controller unpublish: rpc error: code = Unavailable",
				"Past Claims", "Alloc ID", "Ended", "0dd0dd00-0000-4000-8000-000000000007", "freed  detach -force", "3h ago"}},
		{name: "ambiguous prefix lists the matches", args: []string{"volume", "status", "da"}, code: 1,
			errOut: []string{`Prefix "da" matched multiple volumes; give more of the ID:`, "ID      Name", "data ", "data-2"}},
		{name: "not found", args: []string{"volume", "status", "x"}, code: 1,
			errOut: []string{`No volume with prefix "x" found. Run 'berth volume status' to list them.`}},
		{name: "json list", args: []string{"volume", "status", "-json"}, json: true},
		{name: "json one", args: []string{"volume", "status", "-json", "data"}, json: true, out: []string{`"Step": "node-detached"`}},
		{name: "template", args: []string{"volume", "status", "-t", "{{.ID}} {{len .Claims}}", "data"}, out: []string{"data 2"}},
		{name: "json and template conflict", args: []string{"volume", "status", "-json", "-t", "x", "data"}, code: 1,
			errOut: []string{"-json and -t cannot be used together"}},
		{name: "host volumes are not Berth's", args: []string{"volume", "status", "-type", "host"}, code: 1,
			errOut: []string{"Berth has CSI volumes only"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := f.run(tc.args...)
			must.Eq(t, tc.code, code, must.Sprintf("stdout:\n%s\nstderr:\n%s", out, errOut))
			mustOrder(t, out, tc.out...)
			mustOrder(t, errOut, tc.errOut...)
			if tc.not != "" {
				must.StrNotContains(t, out, tc.not)
			}
			if tc.json {
				mustJSON(t, out, nil)
			}
		})
	}
}

func TestVolumeStatus_Empty(t *testing.T) {
	f := newFakeAPI(t)
	code, out, _ := f.run("volume", "status")
	must.Eq(t, 0, code)
	must.StrContains(t, out, "No CSI volumes")
	code, out, _ = f.run("volume", "status", "-json")
	must.Eq(t, 0, code)
	var vols []*api.CSIVolumeListStub
	mustJSON(t, out, &vols)
	must.SliceEmpty(t, vols)
}
