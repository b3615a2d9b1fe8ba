package command

import (
	"testing"

	"github.com/shoenig/test/must"
)

func TestPluginStatus(t *testing.T) {
	f := newFakeAPI(t)
	seedCluster(f)
	cases := []struct {
		name   string
		args   []string
		code   int
		out    []string
		errOut []string
		json   bool
	}{
		{name: "list", args: []string{"plugin", "status"},
			out: []string{"ID        Provider           Controllers Healthy/Expected  Nodes Healthy/Expected",
				"host-b    b.example.com      0/0                           0/0",
				"hostpath  hostpath.berth.io  1/1                           0/1"}},
		{name: "one plugin: counts and instances with health", args: []string{"plugin", "status", "hostpath"},
			out: []string{"ID                   = hostpath", "Provider             = hostpath.berth.io", "Version              = 0.1.0",
				"Controllers Healthy  = 1", "Controllers Expected = 1", "Nodes Healthy        = 0", "Nodes Expected       = 1",
				"Instances", "Node ID   Type        Alloc ID  Healthy  Updated", "Description",
				"9a0b7777  controller  c0ffee00  true", "healthy",
				"9a0b1c2d  node        5e6f7a8b  false", "plugins unavailable: not root",
				"Capacity", "Node ID   Topology  Available  Max Volume  Min Volume", "9a0b7777  rack=r1   3 GiB      1 GiB       -",
				"Allocations", "5e6f7a8b"}},
		{name: "verbose adds capabilities", args: []string{"plugin", "status", "-verbose", "hostpath"},
			out: []string{nodeA, "Controller Capabilities", "CREATE_DELETE_VOLUME", "Node Capabilities", "STAGE_UNSTAGE_VOLUME"}},
		{name: "ambiguous prefix", args: []string{"plugin", "status", "host"}, code: 1,
			errOut: []string{`Prefix "host" matched multiple plugins`, "host-b", "hostpath"}},
		{name: "not found", args: []string{"plugin", "status", "nfs"}, code: 1, errOut: []string{`No plugin with prefix "nfs" found`}},
		{name: "json list", args: []string{"plugin", "status", "-json"}, json: true},
		{name: "json one", args: []string{"plugin", "status", "-json", "hostpath"}, json: true},
		{name: "template", args: []string{"plugin", "status", "-t", "{{.ID}} {{.NodesHealthy}}/{{.NodesExpected}}", "hostp"}, out: []string{"hostpath 0/1"}},
		{name: "type csi only", args: []string{"plugin", "status", "-type", "device"}, code: 1, errOut: []string{"Berth has CSI plugins only"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := f.run(tc.args...)
			must.Eq(t, tc.code, code, must.Sprintf("stdout:\n%s\nstderr:\n%s", out, errOut))
			mustOrder(t, out, tc.out...)
			mustOrder(t, errOut, tc.errOut...)
			if tc.json {
				mustJSON(t, out, nil)
			}
		})
	}
}
