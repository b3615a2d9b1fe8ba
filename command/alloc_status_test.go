package command

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

func TestAllocStatus(t *testing.T) {
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
		{name: "fields, CSI volumes with claim step, task events", args: []string{"alloc", "status", "5e6f7a8b-a"},
			out: []string{"ID                  = 5e6f7a8b", "Name                = web.g[0]", "Node ID             = 9a0b1c2d",
				"Client Status       = running", "Client Description  = Tasks are running",
				"CSI Volumes", "Volume  Source  Mode   Destination  Claim Step", "data    data    write  /srv/data    taken",
				`Task "web" is "running"`, "Total Restarts = 0",
				"Recent Events:", "Time", "Type", "Description", "Started     Task started by client",
				"Task Setup  Building Task Directory", "Received    Task received by client"}},
		{name: "the replacement and the alloc it replaced name each other", args: []string{"alloc", "status", "-verbose", "5e6f7a8b-a"},
			out: []string{"Previous Allocation", "= " + allocA2}},
		{name: "claim at a later step with its error, verbose", args: []string{"alloc", "status", "-verbose", "5e6f7a8b-b"},
			out: []string{"ID                   = " + allocA2, "Replacement Alloc ID = " + allocA, "Claim Step", "Last Error",
				"node-detached", "single-node-writer", "hostpath", "3", "controller unpublish: rpc error: code = Unavailable"}},
		{name: "ambiguous prefix lists the matches", args: []string{"alloc", "status", "5e6f"}, code: 1,
			errOut: []string{`Prefix "5e6f" matched multiple allocations; give more of the ID:`, "ID        Eval ID   Job ID",
				"5e6f7a8b  e0a1b2c3  web     g           run      running", "5e6f7a8b  e0a1b2c3  web     g           run      failed"}},
		{name: "not found", args: []string{"alloc", "status", "dead"}, code: 1, errOut: []string{`No allocation with prefix "dead" found`}},
		{name: "too short", args: []string{"alloc", "status", "5"}, code: 1, errOut: []string{"too short"}},
		{name: "json", args: []string{"alloc", "status", "-json", "c0ffee"}, json: true},
		{name: "template", args: []string{"alloc", "status", "-t", "{{.JobID}} {{.ClientStatus}}", "c0ffee"}, out: []string{"worker running"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := f.run(tc.args...)
			must.Eq(t, tc.code, code, must.Sprintf("stdout:\n%s\nstderr:\n%s", out, errOut))
			mustOrder(t, out, tc.out...)
			mustOrder(t, errOut, tc.errOut...)
			if tc.json {
				var a api.Allocation
				mustJSON(t, out, &a)
				must.Eq(t, allocC, a.ID)
			}
		})
	}
}

func TestAllocStatus_VolumeNotFoundAndNoVolumes(t *testing.T) {
	f := newFakeAPI(t)
	seedCluster(f)
	f.update(func(f *fakeAPI) { delete(f.volumes, "data") })
	code, out, _ := f.run("alloc", "status", "5e6f7a8b-a")
	must.Eq(t, 0, code)
	must.StrContains(t, out, "data    data    write  /srv/data    volume not found")

	// An alloc whose job has no CSI volumes has no CSI section.
	f.update(func(f *fakeAPI) {
		j := webJob("plain")
		j.TaskGroups[0].Volumes = nil
		f.allocs[allocC].Job = j
	})
	code, out, _ = f.run("alloc", "status", "c0ffee")
	must.Eq(t, 0, code)
	must.StrNotContains(t, out, "CSI Volumes")
}
