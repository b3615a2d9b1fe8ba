package command

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

func TestNodeDrain_EnableFollowsUntilComplete(t *testing.T) {
	f := newFakeAPI(t)
	seedCluster(f)
	f.script(
		func(f *fakeAPI) { f.allocs[allocA].DesiredStatus = api.AllocDesiredStatusStop },
		func(f *fakeAPI) { f.allocs[allocA].ClientStatus = api.AllocClientStatusComplete },
		func(f *fakeAPI) { f.nodes[nodeA].Drain, f.nodes[nodeA].DrainStrategy = false, nil },
	)
	code, out, errOut := f.run("node", "drain", "-enable", "-deadline", "30m", "-ignore-system", nodeA)
	must.Eq(t, 0, code, must.Sprintf("stdout:\n%s\nstderr:\n%s", out, errOut))
	mustOrder(t, out,
		`Node "`+nodeA+`" drain strategy set`,
		`==> `, `Monitoring node "9a0b1c2d"`,
		`Alloc "5e6f7a8b" (job "web", group "g") draining`,
		`Alloc "5e6f7a8b" status "running" -> "complete"`,
		`All allocations on node "9a0b1c2d" have stopped`,
		`Node "9a0b1c2d" drain complete`,
	)
	must.GreaterEq(t, 3, f.blocking)

	f.mu.Lock()
	body := f.bodies[0]
	f.mu.Unlock()
	var req api.NodeUpdateDrainRequest
	must.NoError(t, json.Unmarshal([]byte(body), &req))
	must.Eq(t, 30*time.Minute, req.DrainSpec.Deadline)
	must.True(t, req.DrainSpec.IgnoreSystemJobs)
}

func TestNodeDrain_ForceDetachDisable(t *testing.T) {
	f := newFakeAPI(t)
	seedCluster(f)

	code, out, _ := f.run("node", "drain", "-enable", "-force", "-detach", nodeA)
	must.Eq(t, 0, code)
	must.StrContains(t, out, "drain strategy set")
	_, body, _ := f.lastWrite()
	var req api.NodeUpdateDrainRequest
	must.NoError(t, json.Unmarshal([]byte(body), &req))
	must.Eq(t, time.Duration(-1), req.DrainSpec.Deadline)

	code, out, _ = f.run("node", "drain", "-disable", nodeA)
	must.Eq(t, 0, code)
	must.StrContains(t, out, `Node "`+nodeA+`" drain strategy unset`)
	_, body, _ = f.lastWrite()
	req = api.NodeUpdateDrainRequest{}
	must.NoError(t, json.Unmarshal([]byte(body), &req))
	must.Nil(t, req.DrainSpec)
	must.True(t, req.MarkEligible)

	code, _, _ = f.run("node", "drain", "-disable", "-keep-ineligible", nodeA)
	must.Eq(t, 0, code)
	_, body, _ = f.lastWrite()
	req = api.NodeUpdateDrainRequest{}
	must.NoError(t, json.Unmarshal([]byte(body), &req))
	must.False(t, req.MarkEligible)
}

func TestNodeDrain_FlagErrors(t *testing.T) {
	f := newFakeAPI(t)
	seedCluster(f)
	for _, args := range [][]string{
		{"node", "drain", nodeA},
		{"node", "drain", "-enable", "-disable", nodeA},
		{"node", "drain", "-enable", "-force", "-deadline", "1h", nodeA},
		{"node", "drain", "-enable"},
	} {
		code, _, errOut := f.run(args...)
		must.Eq(t, 1, code, must.Sprintf("%v", args))
		must.StrContains(t, errOut, "Usage: berth node drain")
	}
	write, _, _ := f.lastWrite()
	must.Eq(t, "", write)
}

func TestNodeDrain_PrefixAsksForConfirmation(t *testing.T) {
	f := newFakeAPI(t)
	seedCluster(f)
	var out, errOut bytes.Buffer
	cmd := &NodeDrainCommand{Meta: Meta{ui: &UI{Out: &out, Err: &errOut}}, stdin: strings.NewReader("no\n")}
	must.Eq(t, 0, cmd.Run([]string{"-enable", "9a0b1"}))
	must.StrContains(t, out.String(), `Are you sure you want to enable drain mode for node "`+nodeA+`" (node-a)? [y/N]`)
	write, _, _ := f.lastWrite()
	must.Eq(t, "", write)

	code, _, _ := f.run("node", "drain", "-enable", "-yes", "-detach", "9a0b1")
	must.Eq(t, 0, code)
	write, _, _ = f.lastWrite()
	must.Eq(t, "PUT /v1/node/"+nodeA+"/drain", write)
}

// -monitor alone follows a drain under way without changing it, and
// names where each leaving alloc was replaced.
func TestNodeDrain_MonitorPrintsMigrations(t *testing.T) {
	const repl = "7e7e7e7e-dddd-4000-8000-00000000000d"
	f := newFakeAPI(t)
	seedCluster(f)
	f.update(func(f *fakeAPI) {
		f.nodes[nodeA].Drain = true
		f.nodes[nodeA].DrainStrategy = &api.DrainStrategy{DrainSpec: api.DrainSpec{Deadline: time.Hour}}
	})
	f.script(
		func(f *fakeAPI) {
			f.allocs[allocA].DesiredStatus = api.AllocDesiredStatusStop
			r := testAlloc(repl, "web", "e0a1b2c3-0000-4000-8000-000000000001", nodeB, api.AllocClientStatusPending)
			r.NodeName = "node-b"
			r.PreviousAllocation = allocA
			f.allocs[repl] = r
		},
		func(f *fakeAPI) { f.allocs[allocA].ClientStatus = api.AllocClientStatusComplete },
		func(f *fakeAPI) { f.nodes[nodeA].Drain, f.nodes[nodeA].DrainStrategy = false, nil },
	)
	code, out, errOut := f.run("node", "drain", "-monitor", nodeA)
	must.Eq(t, 0, code, must.Sprintf("stdout:\n%s\nstderr:\n%s", out, errOut))
	mustOrder(t, out,
		`Monitoring node "9a0b1c2d"`,
		`Alloc "5e6f7a8b" (job "web", group "g") draining`,
		`Alloc "5e6f7a8b" migrated: replaced by alloc "7e7e7e7e" on node "node-b"`,
		`Alloc "5e6f7a8b" status "running" -> "complete"`,
		`Node "9a0b1c2d" drain complete`,
	)
	must.StrNotContains(t, out, "drain strategy set")
	f.mu.Lock()
	writes := len(f.bodies)
	f.mu.Unlock()
	must.Eq(t, 0, writes, must.Sprint("-monitor alone must not change the drain"))

	code, out, _ = f.run("node", "drain", "-monitor", nodeB)
	must.Eq(t, 0, code)
	must.StrContains(t, out, "is not draining")

	for _, args := range [][]string{
		{"node", "drain", "-monitor", "-disable", nodeA},
		{"node", "drain", "-monitor", "-detach", "-enable", nodeA},
		{"node", "drain", "-monitor", "-force", nodeA},
	} {
		code, _, errOut := f.run(args...)
		must.Eq(t, 1, code, must.Sprint(args))
		must.StrContains(t, errOut, "-monitor", must.Sprint(args))
	}
}
