package command

import (
	"testing"

	"github.com/shoenig/test/must"
)

func TestJobStatus(t *testing.T) {
	f := newFakeAPI(t)
	seedCluster(f)
	cases := []struct {
		name   string
		args   []string
		code   int
		out    []string // in order, on stdout
		errOut []string // on stderr
		json   bool
	}{
		{name: "list", args: []string{"job", "status"},
			out: []string{"ID      Type     Priority  Status   Submit Date", "web     service  50        running", "worker", "writer"}},
		{name: "one job by exact ID among longer ones", args: []string{"job", "status", "web"},
			out: []string{"ID          = web", "Type        = service", "Namespace   = default", "Status      = running",
				"Summary", "Task Group  Queued  Starting  Running  Failed  Complete  Lost", "g           1       0         1        1",
				"Placement Failure", `Task Group "g" (failed to place 1 allocation):`,
				`* Constraint "CSI volume data has exhausted its available writer claims": 2 nodes excluded by filter`,
				`Evaluation "b10cced0" is waiting for capacity`,
				"Allocations", "ID        Node ID   Task Group  Version  Desired  Status   Created", "5e6f7a8b  9a0b1c2d  g"}},
		{name: "unique prefix", args: []string{"job", "status", "wo"}, out: []string{"ID          = worker"}},
		{name: "ambiguous prefix lists the matches", args: []string{"job", "status", "w"}, code: 1,
			errOut: []string{`Prefix "w" matched multiple jobs`, "ID      Type", "web", "worker", "writer"}},
		{name: "not found", args: []string{"job", "status", "nope"}, code: 1,
			errOut: []string{`No job with prefix "nope" found. Run 'berth job status' to list them.`}},
		{name: "verbose shows full IDs", args: []string{"job", "status", "-verbose", "web"},
			out: []string{allocA, nodeA}},
		{name: "json list", args: []string{"job", "status", "-json"}, json: true},
		{name: "json one", args: []string{"job", "status", "-json", "web"}, json: true},
		{name: "template", args: []string{"job", "status", "-t", "{{.Job.ID}}:{{len .Allocations}}", "web"}, out: []string{"web:2"}},
		{name: "template on list", args: []string{"job", "status", "-t", "{{range .}}{{.ID}},{{end}}"}, out: []string{"web,worker,writer,"}},
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

func TestJobStatus_NoJobs(t *testing.T) {
	f := newFakeAPI(t)
	code, out, _ := f.run("job", "status")
	must.Eq(t, 0, code)
	must.StrContains(t, out, "No running jobs")
	code, out, _ = f.run("job", "status", "-json")
	must.Eq(t, 0, code)
	must.Eq(t, "[]\n", out)
}
