package command

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/testutil"
)

func seedLogs(f *fakeAPI) {
	var b strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	f.update(func(f *fakeAPI) {
		f.logs[allocA+"/web/stdout"] = b.String()
		f.logs[allocA+"/web/stderr"] = "oops\n"
	})
}

func TestAllocLogs(t *testing.T) {
	f := newFakeAPI(t)
	seedCluster(f)
	seedLogs(f)
	cases := []struct {
		name   string
		args   []string
		code   int
		out    string
		errOut string
	}{
		{name: "whole stdout, task left out", args: []string{"alloc", "logs", "5e6f7a8b-a"}, out: "line 1\nline 2\n"},
		{name: "task named", args: []string{"alloc", "logs", "5e6f7a8b-a", "web"}, out: "line 30\n"},
		{name: "stderr", args: []string{"alloc", "logs", "-stderr", "5e6f7a8b-a"}, out: "oops\n"},
		{name: "tail defaults to 10 lines", args: []string{"alloc", "logs", "-tail", "5e6f7a8b-a"}, out: "line 21\n"},
		{name: "tail -n", args: []string{"alloc", "logs", "-tail", "-n", "2", "5e6f7a8b-a"}, out: "line 29\nline 30\n"},
		{name: "tail -c", args: []string{"alloc", "logs", "-tail", "-c", "8", "5e6f7a8b-a"}, out: "line 30\n"},
		{name: "by job", args: []string{"alloc", "logs", "-job", "web"}, out: "line 1\n"},
		{name: "unknown task", args: []string{"alloc", "logs", "5e6f7a8b-a", "db"}, code: 1, errOut: `has no task "db"; its tasks are: web`},
		{name: "-n without -tail", args: []string{"alloc", "logs", "-n", "3", "5e6f7a8b-a"}, code: 1, errOut: "use them with -tail"},
		{name: "ambiguous alloc", args: []string{"alloc", "logs", "5e6f"}, code: 1, errOut: `Prefix "5e6f" matched multiple allocations`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := f.run(tc.args...)
			must.Eq(t, tc.code, code, must.Sprintf("stdout:\n%s\nstderr:\n%s", out, errOut))
			must.StrContains(t, out, tc.out)
			must.StrContains(t, errOut, tc.errOut)
		})
	}

	// -n 2 prints exactly two lines.
	_, out, _ := f.run("alloc", "logs", "-tail", "-n", "2", "5e6f7a8b-a")
	must.Eq(t, "line 29\nline 30\n", out)
	_, out, _ = f.run("alloc", "logs", "-tail", "5e6f7a8b-a")
	must.StrHasPrefix(t, "line 21\n", out)
}

func TestAllocLogs_FallsBackToConfiguredAgent(t *testing.T) {
	f := newFakeAPI(t)
	seedCluster(f)
	seedLogs(f)
	// The node's own address does not answer: the CLI asks its agent.
	f.update(func(f *fakeAPI) { f.nodes[nodeA].HTTPAddr = "127.0.0.1:1" })
	code, out, errOut := f.run("alloc", "logs", "-stderr", "5e6f7a8b-a", "web")
	must.Eq(t, 0, code, must.Sprintf("stderr: %s", errOut))
	must.Eq(t, "oops\n", out)
}

func TestAllocLogs_AgentErrorIsShown(t *testing.T) {
	f := newFakeAPI(t)
	seedCluster(f)
	// No logs for the task: the agent answers 400 with a reason.
	code, _, errOut := f.run("alloc", "logs", "5e6f7a8b-a", "web")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, `Error reading the stdout log of task "web" in allocation 5e6f7a8b`)
	must.StrContains(t, errOut, `has no task "web"`)
}

func TestAllocLogs_FollowPrintsWhatComesLater(t *testing.T) {
	f := newFakeAPI(t)
	seedCluster(f)
	f.update(func(f *fakeAPI) { f.logs[allocA+"/web/stdout"] = "first\n" })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out testutil.SyncBuffer
	m := &Meta{ui: &UI{Out: &out, Err: &out}}
	r := &logReader{meta: m, addrs: []string{""}, allocID: allocA, task: "web", logType: "stdout"}
	n, err := r.copy(ctx, &out, "start", 0)
	must.NoError(t, err)

	done := make(chan error, 1)
	go func() { done <- r.follow(ctx, &out, n, time.Millisecond) }()
	f.update(func(f *fakeAPI) { f.logs[allocA+"/web/stdout"] += "second\n" })
	for !strings.Contains(out.String(), "second") {
		select {
		case <-ctx.Done():
			t.Fatalf("follow did not print the new line: %q", out.String())
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	must.ErrorIs(t, <-done, context.Canceled)
	must.Eq(t, "first\nsecond\n", out.String())
}

func TestPickTask(t *testing.T) {
	a := testAlloc(allocA, "web", "e", nodeA, api.AllocClientStatusRunning)
	a.TaskStates = map[string]*api.TaskState{"a": {}, "b": {}}
	_, err := pickTask(a, "", false, "berth alloc logs %s <task>")
	must.ErrorContains(t, err, "runs 2 tasks (a, b); name one: berth alloc logs "+allocA[:8]+" <task>")
	got, err := pickTask(a, "b", false, "berth alloc logs %s <task>")
	must.NoError(t, err)
	must.Eq(t, "b", got)
}
