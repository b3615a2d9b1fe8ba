package compat

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	nomad "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/testutil"
)

// TestCompat_AllocLifecycle drives alloc exec, signal, restart and stop
// through the upstream client's Allocations() calls, as `nomad alloc
// exec|signal|restart|stop` make them.
func TestCompat_AllocLifecycle(t *testing.T) {
	_, client := testAgent(t)
	stub := runningAlloc(t, client, sleepJob("life", 1))
	alloc, _, err := client.Allocations().Info(stub.ID, nil)
	must.NoError(t, err)

	// Exec speaks the websocket: stdin in, stdout and stderr out, the
	// exit code back. raw_exec runs it in the task dir with the task's env.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code, err := client.Allocations().Exec(ctx, alloc, "web", false,
		[]string{"/bin/sh", "-c", `read x; echo "got $x in $NOMAD_TASK_NAME"; echo oops >&2; exit 7`},
		strings.NewReader("hello\n"), &stdout, &stderr, nil, nil)
	must.NoError(t, err)
	must.Eq(t, 7, code)
	must.Eq(t, "got hello in web\n", stdout.String())
	must.Eq(t, "oops\n", stderr.String())

	// AllocFS: list, stat and cat, as `nomad alloc fs` calls them.
	_, err = client.Allocations().Exec(ctx, alloc, "web", false, []string{"/bin/sh", "-c", "echo hi > local/greeting"},
		strings.NewReader(""), io.Discard, io.Discard, nil, nil)
	must.NoError(t, err)
	files, _, err := client.AllocFS().List(alloc, "/web/local", nil)
	must.NoError(t, err)
	must.SliceContainsFunc(t, files, "greeting", func(f *nomad.AllocFileInfo, name string) bool { return f.Name == name && !f.IsDir })
	st, _, err := client.AllocFS().Stat(alloc, "web/local/greeting", nil)
	must.NoError(t, err)
	must.Eq(t, int64(3), st.Size)
	rc, err := client.AllocFS().Cat(alloc, "web/local/greeting", nil)
	must.NoError(t, err)
	b, err := io.ReadAll(rc)
	rc.Close()
	must.NoError(t, err)
	must.Eq(t, "hi\n", string(b))

	// SIGWINCH: a signal the task ignores, so it is still running for the
	// restart below.
	must.NoError(t, client.Allocations().Signal(alloc, nil, "web", "SIGWINCH"))
	err = client.Allocations().Signal(alloc, nil, "web", "SIGBOGUS")
	must.ErrorContains(t, err, `unknown signal "SIGBOGUS"`)
	must.NoError(t, client.Allocations().Restart(alloc, "web", nil))
	testutil.WaitForResult(t, func() (bool, error) {
		a, _, err := client.Allocations().Info(alloc.ID, nil)
		if err != nil {
			return false, err
		}
		for _, e := range a.TaskStates["web"].Events {
			if e.Type == "Restart Signaled" {
				return true, nil
			}
		}
		return false, fmt.Errorf("no restart event yet")
	})

	resp, err := client.Allocations().Stop(alloc, nil)
	must.NoError(t, err)
	must.NotEq(t, "", resp.EvalID)
	testutil.WaitForResult(t, func() (bool, error) {
		a, _, err := client.Allocations().Info(alloc.ID, nil)
		if err != nil {
			return false, err
		}
		return a.DesiredStatus == "stop", fmt.Errorf("desired %s", a.DesiredStatus)
	})
	testutil.WaitForResult(t, func() (bool, error) { // a replacement runs
		allocs, _, err := client.Jobs().Allocations("life", false, nil)
		if err != nil {
			return false, err
		}
		for _, a := range allocs {
			if a.ID != alloc.ID && a.ClientStatus == nomad.AllocClientStatusRunning {
				return true, nil
			}
		}
		return false, fmt.Errorf("no replacement running among %d allocs", len(allocs))
	})
}
