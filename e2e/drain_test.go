package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

// devConfig is one agent that is both the only server and a client with
// raw_exec, as `berth agent -dev` is, with its state on disk.
func devConfig(dataDir string) string {
	return fmt.Sprintf(`name      = "dev"
data_dir  = %s
bind_addr = "127.0.0.1"
log_level = "DEBUG"

ports {
  http = 0
  rpc  = 0
}

server {
  enabled          = true
  bootstrap_expect = 1
}

client {
  enabled = true
}

plugin "raw_exec" {}
`, hclString(dataDir))
}

func sleepJob(id, typ string) *api.Job {
	job := &api.Job{ID: &id, Type: &typ, Datacenters: []string{"*"}}
	name := "sleep"
	job.TaskGroups = []*api.TaskGroup{{Name: &name, Tasks: []*api.Task{{
		Name: "sleep", Driver: "raw_exec",
		Config: map[string]any{"command": "/bin/sleep", "args": []string{"600"}},
	}}}}
	job.Canonicalize()
	return job
}

// TestE2E_NodeDrainIgnoreSystem is issue 17's: `node drain -enable
// -ignore-system -deadline 5s` on a dev agent running a system job and a
// service job returns once the service alloc has stopped and the servers
// mark the drain complete, leaving the system alloc running. It used to
// wait forever: the node's allocs carried no job, so the CLI could not
// tell the system alloc apart and waited for it to stop.
func TestE2E_NodeDrainIgnoreSystem(t *testing.T) {
	h := NewHarness(t)
	a := h.newAgent(t, "dev", devConfig)
	a.Start(t)
	client := a.API(t)

	var nodeID string
	waitFor(t, agentStartTimeout, "the dev agent's node to be ready", func() (bool, error) {
		nodes, _, err := client.Nodes().List(nil)
		if err != nil || len(nodes) != 1 {
			return false, fmt.Errorf("nodes: %d, %v", len(nodes), err)
		}
		nodeID = nodes[0].ID
		return nodes[0].Status == "ready", fmt.Errorf("node status %s", nodes[0].Status)
	})
	for _, j := range []*api.Job{sleepJob("sys", "system"), sleepJob("svc", "service")} {
		_, _, err := client.Jobs().Register(j, nil)
		must.NoError(t, err)
	}
	running := func(job string) (bool, error) {
		allocs, _, err := client.Jobs().Allocations(job, false, nil)
		if err != nil {
			return false, err
		}
		for _, al := range allocs {
			if al.ClientStatus == "running" {
				return true, nil
			}
		}
		return false, fmt.Errorf("job %s: no running alloc among %d", job, len(allocs))
	}
	for _, j := range []string{"sys", "svc"} {
		waitFor(t, agentStartTimeout, "job "+j+" to run", func() (bool, error) { return running(j) })
	}

	// The CLI's own bound is the harness's CLI timeout; the drain itself
	// has a 5s deadline, so a working drain ends well inside it and a
	// hanging one is killed and fails here.
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, h.Berth, "node", "drain", "-enable", "-ignore-system", "-deadline", "5s", "-yes", nodeID)
	cmd.Env = append(os.Environ(), "BERTH_ADDR=http://"+a.HTTPAddr())
	out, err := cmd.CombinedOutput()
	must.NoError(t, ctx.Err(), must.Sprintf("node drain did not return:\n%s", out))
	must.NoError(t, err, must.Sprintf("node drain:\n%s", out))
	must.StrContains(t, string(out), "drain complete")

	ok, err := running("sys")
	must.True(t, ok, must.Sprintf("the system alloc must keep running under -ignore-system: %v", err))
	ok, _ = running("svc")
	must.False(t, ok, must.Sprint("the service alloc must have stopped"))
}
