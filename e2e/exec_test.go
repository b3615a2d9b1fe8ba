package e2e

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

// TestE2E_AllocExec: `alloc exec` runs a command inside a running exec
// task: it reads the file the task wrote into its CSI volume at /data (a
// path that exists only in the task's mount namespace), and the
// command's exit code is the CLI's.
func TestE2E_AllocExec(t *testing.T) {
	h := NewHarness(t)
	c := h.NewCluster(t, 1, 1)
	c.RunPlugin(t, h.HostpathPlugin("monolith"))
	caps := []Capability{{SingleNodeWriter, FileSystem}}
	c.Berth(t, "volume", "create", h.WriteFile(t, "data.volume.hcl", (&Volume{ID: "data", PluginID: "hostpath", Capabilities: caps}).HCL()))

	w := &Workload{JobID: "writer", Type: "service", Volume: "data", AccessMode: SingleNodeWriter,
		Script: "echo hello from the volume > /data/hello.txt && sleep 3600"}
	c.RunJob(t, w.JobID, w.HCL(h.Root))
	a := c.WaitForAllocs(t, w.JobID, 1, api.AllocClientStatusRunning)[0]
	waitFor(t, cliTimeout, "the task to write its file", func() (bool, error) {
		out, err := c.BerthOn(c.Server(t), "alloc", "exec", a.ID, "cat", "/data/hello.txt")
		return err == nil, errors.New(out)
	})

	out := c.Berth(t, "alloc", "exec", a.ID, "cat", "/data/hello.txt")
	must.Eq(t, "hello from the volume\n", out)
	_, err := os.Stat("/data/hello.txt")
	must.True(t, os.IsNotExist(err), must.Sprint("the host must not see the task's /data: the command ran in the task's mount namespace"))

	// Flags after the command are the command's; its exit code is ours.
	out, err = c.BerthOn(c.Server(t), "alloc", "exec", "-task", WorkloadTask, a.ID, "/bin/sh", "-c", "ls -d /data; exit 3")
	var ee *exec.ExitError
	must.True(t, errors.As(err, &ee), must.Sprintf("want exit 3, got %v: %s", err, out))
	must.Eq(t, 3, ee.ExitCode())
	must.Eq(t, "/data\n", out)

	// alloc fs asked of the server, whose agent runs no client: it reads
	// through the servers and the client's node session.
	c.Berth(t, "alloc", "exec", a.ID, "/bin/sh", "-c", "echo hi > /local/greeting")
	srv := "http://" + c.Server(t).HTTPAddr()
	body := httpGet(t, srv+"/v1/client/fs/cat/"+a.ID+"?path="+WorkloadTask+"/local/greeting")
	must.Eq(t, "hi\n", body)
	var files []struct{ Name string }
	must.NoError(t, json.Unmarshal([]byte(httpGet(t, srv+"/v1/client/fs/ls/"+a.ID+"?path=/"+WorkloadTask+"/local")), &files))
	must.SliceContainsFunc(t, files, "greeting", func(f struct{ Name string }, n string) bool { return f.Name == n })
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	must.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must.NoError(t, err)
	must.Eq(t, http.StatusOK, resp.StatusCode, must.Sprintf("GET %s: %s", url, b))
	return string(b)
}
