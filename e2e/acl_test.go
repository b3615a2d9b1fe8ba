package e2e

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

// TestE2E_ACLs runs a server and a client with acl { enabled = true }:
// bootstrap from a file, a csi-read-volume token that can read but not
// register (403 naming the capability), a submit-job + csi-mount-volume
// token that runs a job mounting a volume, and an audit log with every
// write and no read. The harness's own calls use the management token
// through BERTH_TOKEN, as an operator's shell would.
func TestE2E_ACLs(t *testing.T) {
	h := NewHarness(t)
	addrs := freeAddrs(t, 1)
	s := h.NewServer(t, "s1", addrs[0], addrs)
	cl := h.NewClient(t, "c1", addrs)
	for _, a := range []*Agent{s, cl} {
		f, err := os.OpenFile(a.ConfigPath, os.O_APPEND|os.O_WRONLY, 0)
		must.NoError(t, err)
		_, err = f.WriteString("\nacl {\n  enabled = true\n}\n")
		must.NoError(t, err)
		must.NoError(t, f.Close())
	}
	c := &Cluster{h: h, Servers: []*Agent{s}, Clients: []*Agent{cl}}
	s.Start(t)
	c.WaitForLeader(t)

	mgmt := "9b1e7c3a-5d2f-4e8a-b6c4-1f0a2d3e4b5c"
	t.Setenv("BERTH_TOKEN", mgmt)
	out := c.Berth(t, "acl", "bootstrap", h.WriteFile(t, "bootstrap.token", mgmt+"\n"))
	must.StrContains(t, out, "Type         = management")
	cl.Start(t)
	c.WaitForNodesReady(t)

	plugin := h.HostpathPlugin("node")
	c.RunPlugin(t, plugin)

	c.Berth(t, "acl", "policy", "apply", "csi-ro", h.WriteFile(t, "csi-ro.hcl",
		`namespace "default" { capabilities = ["csi-read-volume", "csi-list-volume"] }`))
	c.Berth(t, "acl", "policy", "apply", "runner", h.WriteFile(t, "runner.hcl",
		`namespace "default" { capabilities = ["submit-job", "csi-mount-volume", "read-job", "list-jobs"] }`))
	var ro, runner api.ACLToken
	c.BerthJSON(t, &ro, "acl", "token", "create", "-name", "ro", "-policy", "csi-ro", "-json")
	c.BerthJSON(t, &runner, "acl", "token", "create", "-name", "runner", "-policy", "runner", "-json")

	vol := &Volume{ID: "data", PluginID: "hostpath", Capabilities: []Capability{{SingleNodeWriter, FileSystem}}}
	volFile := h.WriteFile(t, "data.volume.hcl", vol.HCL())
	out, err := c.BerthOn(s, "volume", "register", "-token", ro.SecretID, volFile)
	must.Error(t, err)
	must.StrContains(t, out, "token lacks csi-write-volume in namespace default")
	c.RegisterVolume(t, vol)
	out, err = c.BerthOn(s, "volume", "status", "-token", ro.SecretID, "data")
	must.NoError(t, err, must.Sprint(out))
	must.StrContains(t, out, "data")

	w := &Workload{JobID: "writer", Type: "batch", Volume: "data", AccessMode: SingleNodeWriter, Script: "echo acl-ok > /data/f && cat /data/f"}
	jobFile := h.WriteFile(t, "writer.job.hcl", w.HCL(h.Root))
	out, err = c.BerthOn(s, "job", "run", "-detach", "-token", ro.SecretID, jobFile)
	must.Error(t, err)
	must.StrContains(t, out, "token lacks submit-job")
	out, err = c.BerthOn(s, "job", "run", "-detach", "-token", runner.SecretID, jobFile)
	must.NoError(t, err, must.Sprint(out))
	a := c.WaitForAllocs(t, w.JobID, 1, api.AllocClientStatusComplete)[0]
	must.Eq(t, "acl-ok\n", c.AllocLogs(t, a.ID, WorkloadTask))

	// The audit log: each write once, by its token, and no read.
	var entries []*api.AuditEntry
	c.BerthJSON(t, &entries, "operator", "audit", "-n", "1000", "-json")
	var writes []string
	for _, e := range entries {
		must.False(t, strings.HasSuffix(e.Endpoint, ".List") || strings.Contains(e.Endpoint, ".Get"),
			must.Sprintf("a read in the audit log: %+v", e))
		if !strings.HasPrefix(e.Accessor, "node:") {
			writes = append(writes, e.Endpoint+" "+e.Result)
		}
	}
	for _, want := range []string{"ACL.Bootstrap ok", "ACL.UpsertPolicies ok", "ACL.UpsertTokens ok",
		"CSIVolume.Register denied", "CSIVolume.Register ok", "Job.Register denied", "Job.Register ok"} {
		must.True(t, slices.Contains(writes, want), must.Sprintf("audit log lacks %q: %v", want, writes))
	}
	var runnerJob bool
	for _, e := range entries {
		if e.Endpoint == "Job.Register" && e.Result == "ok" && e.Accessor == runner.AccessorID {
			runnerJob = true
		}
		b, _ := json.Marshal(e)
		must.StrNotContains(t, string(b), mgmt)
		must.StrNotContains(t, string(b), runner.SecretID)
	}
	must.True(t, runnerJob, must.Sprint("the job's write is recorded under the runner token's accessor"))
}
