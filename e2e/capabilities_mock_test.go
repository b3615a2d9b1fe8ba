package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

// Issue 13 scenarios that need the servers' capability-driven claims:
// csi-test's mock-driver without PUBLISH_UNPUBLISH_VOLUME, declared
// node-only, and answering Unimplemented on a release RPC.

// mockCall is one RPC csi-test's mock-driver logged (at -v=3).
type mockCall struct {
	Method  string
	Request json.RawMessage
	Error   string
}

// Name is the method without its service ("NodeStageVolume").
func (m mockCall) Name() string { return m.Method[strings.LastIndex(m.Method, "/")+1:] }

// mockCalls returns, in order, every RPC the mock-driver plugin job
// logged: with -v=3 it logs one "gRPCCall: {json}" line per call.
func mockCalls(t *testing.T, c *Cluster, p *PluginJob) []mockCall {
	t.Helper()
	var out []mockCall
	for _, line := range strings.Split(pluginStderr(t, c, p), "\n") {
		_, js, ok := strings.Cut(line, "gRPCCall: ")
		if !ok {
			continue
		}
		var call mockCall
		must.NoError(t, json.Unmarshal([]byte(js), &call), must.Sprintf("log line %q", line))
		out = append(out, call)
	}
	must.SliceNotEmpty(t, out, must.Sprint("the mock-driver logged no RPC; is it run with -v=3?"))
	return out
}

func callNames(calls []mockCall) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.Name()
	}
	return out
}

// mockPlugin is csi-test's mock-driver as a plugin job, logging every RPC.
func mockPlugin(h *Harness, bin, typ string, args ...string) *PluginJob {
	return &PluginJob{PluginID: "mock", Type: typ, Command: bin,
		Args: append([]string{"--name", "mock.csi.berth.test", "-v=3"}, args...),
		Env:  map[string]string{markerEnv: h.Root}}
}

// TestE2E_MockDriverWithoutAttach runs the mock-driver as a monolith with
// --disable-attach: its controller does not advertise
// PUBLISH_UNPUBLISH_VOLUME, so a claim is taken and released with node
// RPCs alone; ControllerPublishVolume and ControllerUnpublishVolume are
// never sent.
func TestE2E_MockDriverWithoutAttach(t *testing.T) {
	h := NewHarness(t)
	bin := mockDriverBinary(t)
	c := h.NewCluster(t, 1, 1)
	plugin := mockPlugin(h, bin, "monolith", "--disable-attach")
	c.RunPlugin(t, plugin)
	spec := h.WriteFile(t, "mockvol.volume.hcl", (&Volume{ID: "mockvol", PluginID: "mock",
		Capabilities: []Capability{{SingleNodeWriter, FileSystem}}}).HCL())
	c.Berth(t, "volume", "create", spec)

	w := &Workload{JobID: "writer", Type: "batch", Volume: "mockvol", AccessMode: SingleNodeWriter, Script: "echo ok > /data/f && cat /data/f"}
	c.RunJob(t, w.JobID, w.HCL(h.Root))
	a := c.WaitForAllocs(t, w.JobID, 1, api.AllocClientStatusComplete)[0]
	must.Eq(t, "ok\n", c.AllocLogs(t, a.ID, WorkloadTask))
	c.WaitForClaimFreed(t, "mockvol", a.ID)

	names := callNames(mockCalls(t, c, plugin))
	for _, m := range []string{"NodeStageVolume", "NodePublishVolume", "NodeUnpublishVolume", "NodeUnstageVolume"} {
		must.SliceContains(t, names, m, must.Sprintf("%v", names))
	}
	for _, m := range []string{"ControllerPublishVolume", "ControllerUnpublishVolume"} {
		must.SliceNotContains(t, names, m, must.Sprintf("sent to a controller without PUBLISH_UNPUBLISH_VOLUME: %v", names))
	}
}

// TestE2E_NodeOnlyPlugin runs the mock-driver declared as a node plugin
// (csi_plugin type "node"; there is no controller anywhere, though the
// binary could serve one): a registered volume is claimed, published,
// released and freed with node RPCs alone, and the plugin is never sent a
// controller RPC.
func TestE2E_NodeOnlyPlugin(t *testing.T) {
	h := NewHarness(t)
	bin := mockDriverBinary(t)
	c := h.NewCluster(t, 1, 1)
	// --disable-attach: its node service then stages without a publish
	// context from a controller.
	plugin := mockPlugin(h, bin, "node", "--disable-attach")
	c.RunPlugin(t, plugin)
	// The mock-driver starts with volumes "1" to "3" in memory.
	c.RegisterVolume(t, &Volume{ID: "nodevol", PluginID: "mock", ExternalID: "1",
		Capabilities: []Capability{{SingleNodeWriter, FileSystem}}})

	w := &Workload{JobID: "writer", Type: "batch", Volume: "nodevol", AccessMode: SingleNodeWriter, Script: "echo ok > /data/f"}
	c.RunJob(t, w.JobID, w.HCL(h.Root))
	a := c.WaitForAllocs(t, w.JobID, 1, api.AllocClientStatusComplete)[0]
	c.WaitForClaimFreed(t, "nodevol", a.ID)

	names := callNames(mockCalls(t, c, plugin))
	must.SliceContains(t, names, "NodePublishVolume", must.Sprintf("%v", names))
	must.SliceContains(t, names, "NodeUnpublishVolume", must.Sprintf("%v", names))
	for _, m := range names {
		must.False(t, strings.HasPrefix(m, "Controller") || m == "CreateVolume" || m == "ValidateVolumeCapabilities",
			must.Sprintf("a node-only plugin was sent %s: %v", m, names))
	}
}

// claimStepNeedsOperator is the step of a claim whose release hit an
// error the plugin will keep answering.
const claimStepNeedsOperator api.CSIClaimStep = "needs-operator"

// TestE2E_UnimplementedReleaseNeedsOperator: a plugin whose controller
// advertises PUBLISH_UNPUBLISH_VOLUME but answers Unimplemented to every
// ControllerUnpublishVolume. Once the writer is stopped its claim reaches
// a visible needs-operator step naming the error within seconds (not
// retried forever), and `berth volume detach -force` clears it.
func TestE2E_UnimplementedReleaseNeedsOperator(t *testing.T) {
	h := NewHarness(t)
	bin := mockDriverBinary(t)
	hooks := h.WriteFile(t, "hooks.yaml", "controllerUnpublishVolumeStart: |\n  UNIMPLEMENTED;\n")
	c := h.NewCluster(t, 1, 1)
	plugin := mockPlugin(h, bin, "monolith", "--hooks-file", hooks)
	c.RunPlugin(t, plugin)
	spec := h.WriteFile(t, "mockvol.volume.hcl", (&Volume{ID: "mockvol", PluginID: "mock",
		Capabilities: []Capability{{SingleNodeWriter, FileSystem}}}).HCL())
	c.Berth(t, "volume", "create", spec)

	w := &Workload{JobID: "svc", Type: "service", Volume: "mockvol", AccessMode: SingleNodeWriter, Script: SlowStopScript(0)}
	c.RunJob(t, w.JobID, w.HCL(h.Root))
	a := c.WaitForAllocs(t, w.JobID, 1, api.AllocClientStatusRunning)[0]
	c.Berth(t, "job", "stop", w.JobID)

	var claim *api.CSIVolumeClaim
	waitFor(t, claimTimeout, "the claim to need an operator", func() (bool, error) {
		v, _, err := c.API(t).CSIVolumes().Info("mockvol", nil)
		if err != nil {
			return false, err
		}
		if claim = findClaim(v.Claims, a.ID); claim == nil {
			return false, fmt.Errorf("no live claim of alloc %s (past: %v)", a.ID, findClaim(v.PastClaims, a.ID))
		}
		return claim.Step == claimStepNeedsOperator, fmt.Errorf("claim at step %s (attempts %d, last error %q)", claim.Step, claim.Attempts, claim.LastError)
	})
	must.StrContains(t, strings.ToLower(claim.LastError), "unimplemented")
	unpublishes := 0
	for _, m := range callNames(mockCalls(t, c, plugin)) {
		if m == "ControllerUnpublishVolume" {
			unpublishes++
		}
	}
	must.Between(t, 1, unpublishes, 3, must.Sprint("a final error is not retried"))

	out := c.Berth(t, "volume", "detach", "-force", "mockvol", a.NodeID)
	t.Logf("volume detach -force: %s", out)
	waitFor(t, claimTimeout, "the detached claim to be freed", func() (bool, error) {
		v, _, err := c.API(t).CSIVolumes().Info("mockvol", nil)
		if err != nil {
			return false, err
		}
		if cl := findClaim(v.Claims, a.ID); cl != nil {
			return false, fmt.Errorf("live claim at step %s (last error %q)", cl.Step, cl.LastError)
		}
		past := findClaim(v.PastClaims, a.ID)
		return past != nil && past.Step == api.CSIClaimFreed, fmt.Errorf("past claim %v", past)
	})
}
