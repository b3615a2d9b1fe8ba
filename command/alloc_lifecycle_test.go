package command

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/testutil"
)

// The alloc lifecycle commands against a -dev agent running a raw_exec
// task: exec (stdin, stdout, exit code; flags after the command are the
// command's), signal, restart and stop.
func TestAllocLifecycleCommands(t *testing.T) {
	client := devAgent(t)
	id, typ, name := "life", "service", "g"
	job := &api.Job{ID: &id, Type: &typ, TaskGroups: []*api.TaskGroup{{Name: &name, Tasks: []*api.Task{{
		Name: "t", Driver: "raw_exec", Config: map[string]any{"command": "/bin/sleep", "args": []string{"300"}},
	}}}}}
	job.Canonicalize()
	_, _, err := client.Jobs().Register(job, nil)
	must.NoError(t, err)
	alloc := waitRunning(t, client, "life", "")
	short := alloc.ID[:8]

	var out, errOut bytes.Buffer
	c := &AllocExecCommand{Meta: Meta{ui: &UI{Out: &out, Err: &errOut}}, stdin: strings.NewReader("from stdin\n")}
	code := c.Run([]string{short, "/bin/sh", "-c", `cat; echo "$NOMAD_TASK_NAME" -n; exit 4`})
	must.Eq(t, 4, code, must.Sprint(errOut.String()))
	must.Eq(t, "from stdin\nt -n\n", out.String())

	code, _, errOut2 := runCLI("alloc", "exec", short)
	must.Eq(t, 1, code)
	must.StrContains(t, errOut2, "the command to run")

	// alloc fs: the task dir's files; nothing outside the alloc dir.
	code, _, errOut2 = runCLI("alloc", "exec", short, "/bin/sh", "-c", "echo hi > local/greeting && ln -s /etc/passwd local/out")
	must.Eq(t, 0, code, must.Sprint(errOut2))
	code, out2, errOut2 := runCLI("alloc", "fs", short, "t/local/greeting")
	must.Eq(t, 0, code, must.Sprint(errOut2))
	must.Eq(t, "hi\n", out2)
	code, out2, errOut2 = runCLI("alloc", "fs", short, "/t/local")
	must.Eq(t, 0, code, must.Sprint(errOut2))
	must.StrContains(t, out2, "greeting")
	must.StrContains(t, out2, "Modified Time")
	code, _, errOut2 = runCLI("alloc", "fs", short, "t/local/out")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut2, "outside the alloc dir")
	code, _, errOut2 = runCLI("alloc", "fs", short, "t/../../..")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut2, "'..' is not allowed")

	code, out2, errOut2 = runCLI("alloc", "signal", "-s", "winch", short, "t")
	must.Eq(t, 0, code, must.Sprint(errOut2))
	must.StrContains(t, out2, `Sent SIGWINCH to task "t" of allocation `+short)
	code, _, errOut2 = runCLI("alloc", "signal", "-s", "SIGWINCH", short, "nope")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut2, `has no task "nope"`)

	code, out2, errOut2 = runCLI("alloc", "restart", short)
	must.Eq(t, 0, code, must.Sprint(errOut2))
	must.StrContains(t, out2, "Restarting the running tasks of allocation "+short)
	testutil.WaitForResult(t, func() (bool, error) {
		a, _, err := client.Allocations().Info(alloc.ID, nil)
		if err != nil {
			return false, err
		}
		ok := slices.ContainsFunc(a.TaskStates["t"].Events, func(e *api.TaskEvent) bool { return e.Type == "Restart Signaled" })
		return ok, fmt.Errorf("no restart event yet")
	})

	code, out2, errOut2 = runCLI("alloc", "stop", short)
	must.Eq(t, 0, code, must.Sprint(errOut2))
	must.StrContains(t, out2, "Allocation "+short+" stopped; evaluation ")
	repl := waitRunning(t, client, "life", alloc.ID)
	// The command followed the evaluation to the replacement running.
	mustOrder(t, out2, "Monitoring evaluation", `Allocation "`+repl.ID[:8]+`" created`, `Job "life": 1 running`)
	code, _, errOut2 = runCLI("alloc", "stop", short)
	must.Eq(t, 1, code)
	must.StrContains(t, errOut2, "already stopped")
}

// waitRunning waits for a running alloc of job other than not.
func waitRunning(t *testing.T, client *api.Client, job, not string) *api.AllocationListStub {
	t.Helper()
	var got *api.AllocationListStub
	testutil.WaitForResult(t, func() (bool, error) {
		allocs, _, err := client.Jobs().Allocations(job, false, nil)
		if err != nil {
			return false, err
		}
		for _, a := range allocs {
			if a.ID != not && a.ClientStatus == api.AllocClientStatusRunning && a.DesiredStatus == api.AllocDesiredStatusRun {
				got = a
				return true, nil
			}
		}
		return false, fmt.Errorf("no running alloc of %s besides %q among %d", job, not, len(allocs))
	})
	return got
}
