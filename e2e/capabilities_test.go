package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

// Issue 13: the claim protocol follows what each plugin advertises, and
// the plugin's own log is the witness. These scenarios run one server and
// one client and take a few seconds each.

// TestE2E_HostpathModesReadBack runs Berth's hostpath plugin as a node-only
// plugin and as a monolith: a writer writes, is stopped, its claim is
// freed, and a second job reads the data back. The plugin's RPC log shows
// the node side staged and published (it advertises STAGE_UNSTAGE_VOLUME),
// and only the monolith, whose controller advertises
// PUBLISH_UNPUBLISH_VOLUME, was ever sent a controller publish.
func TestE2E_HostpathModesReadBack(t *testing.T) {
	for _, mode := range []string{"node", "monolith"} {
		t.Run(mode, func(t *testing.T) {
			h := NewHarness(t)
			c := h.NewCluster(t, 1, 1)
			plugin := h.HostpathPlugin(mode, "-log-level", "trace")
			c.RunPlugin(t, plugin)
			vol := &Volume{ID: "data", PluginID: "hostpath",
				Capabilities: []Capability{{SingleNodeWriter, FileSystem}, {SingleNodeReaderOnly, FileSystem}}}
			if mode == "node" {
				c.RegisterVolume(t, vol)
			} else {
				c.Berth(t, "volume", "create", h.WriteFile(t, "data.volume.hcl", vol.HCL()))
			}

			w := &Workload{JobID: "writer", Type: "batch", Volume: "data", AccessMode: SingleNodeWriter,
				Script: "echo written-by-" + mode + " > /data/f"}
			c.RunJob(t, w.JobID, w.HCL(h.Root))
			wa := c.WaitForAllocs(t, w.JobID, 1, api.AllocClientStatusComplete)[0]
			c.WaitForClaimFreed(t, "data", wa.ID)

			r := &Workload{JobID: "reader", Type: "batch", Volume: "data", AccessMode: SingleNodeReaderOnly, Script: "cat /data/f"}
			c.RunJob(t, r.JobID, r.HCL(h.Root))
			ra := c.WaitForAllocs(t, r.JobID, 1, api.AllocClientStatusComplete)[0]
			must.Eq(t, "written-by-"+mode+"\n", c.AllocLogs(t, ra.ID, WorkloadTask))
			c.WaitForClaimFreed(t, "data", ra.ID)

			rpcs := hostpathRPCs(t, c, plugin)
			for _, m := range []string{"NodeStageVolume", "NodePublishVolume", "NodeUnpublishVolume", "NodeUnstageVolume"} {
				must.SliceContains(t, rpcs, m, must.Sprintf("the plugin was never sent %s: %v", m, rpcs))
			}
			if mode == "node" {
				for _, m := range rpcs {
					must.False(t, strings.HasPrefix(m, "Controller"), must.Sprintf("node-only plugin was sent %s: %v", m, rpcs))
				}
			} else {
				must.SliceContains(t, rpcs, "ControllerPublishVolume", must.Sprintf("the monolith advertises PUBLISH_UNPUBLISH_VOLUME: %v", rpcs))
				must.SliceContains(t, rpcs, "ControllerUnpublishVolume", must.Sprintf("%v", rpcs))
				must.Less(t, slices.Index(rpcs, "NodeStageVolume"), slices.Index(rpcs, "ControllerPublishVolume"),
					must.Sprintf("ControllerPublish comes before NodeStage: %v", rpcs))
			}
		})
	}
}

// rpcMethod finds the method in a hostpath "RPC done" or "RPC failed" log
// line (hclog's key=value format).
var rpcMethod = regexp.MustCompile(`RPC (?:done|failed): .*method=/csi\.v1\.\w+/(\w+)`)

// hostpathRPCs returns, in order, the CSI methods the hostpath plugin job
// logged serving (it logs every RPC at trace level).
func hostpathRPCs(t *testing.T, c *Cluster, p *PluginJob) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(pluginStderr(t, c, p), "\n") {
		if m := rpcMethod.FindStringSubmatch(line); m != nil {
			out = append(out, m[1])
		}
	}
	must.SliceNotEmpty(t, out, must.Sprint("the plugin logged no RPC; is it at -log-level trace?"))
	return out
}

// pluginStderr returns the stderr log of a plugin job's (only) alloc.
func pluginStderr(t *testing.T, c *Cluster, p *PluginJob) string {
	t.Helper()
	a := c.WaitForAllocs(t, p.ID(), 1, api.AllocClientStatusRunning)[0]
	return c.Berth(t, "alloc", "logs", "-stderr", a.ID, "plugin")
}

// TestE2E_ReadOnlyBlockDevice: the hostpath plugin publishes a block
// volume as a loop device, and for a read-only claim binds its node
// read-only, which alone would not stop writes to the device. A read-write
// claim writes the device; a read-only claim reads that data and its
// write fails in the task with EPERM (the exec driver's device filter),
// and the volume's image still holds the first writer's data.
func TestE2E_ReadOnlyBlockDevice(t *testing.T) {
	h := NewHarness(t)
	c := h.NewCluster(t, 1, 1)
	c.RunPlugin(t, h.HostpathPlugin("node"))
	c.RegisterVolume(t, &Volume{ID: "blk", PluginID: "hostpath",
		Capabilities: []Capability{{SingleNodeWriter, BlockDevice}, {SingleNodeReaderOnly, BlockDevice}}})

	w := &Workload{JobID: "writer", Type: "batch", Volume: "blk", AccessMode: SingleNodeWriter, AttachmentMode: BlockDevice,
		Script: "test -b /data && printf RWOK > /data && echo wrote"}
	c.RunJob(t, w.JobID, w.HCL(h.Root))
	wa := c.WaitForAllocs(t, w.JobID, 1, api.AllocClientStatusComplete)[0]
	must.Eq(t, "wrote\n", c.AllocLogs(t, wa.ID, WorkloadTask))
	c.WaitForClaimFreed(t, "blk", wa.ID)

	r := &Workload{JobID: "reader", Type: "batch", Volume: "blk", AccessMode: SingleNodeReaderOnly, AttachmentMode: BlockDevice,
		Script: "head -c 4 /data; echo; if printf XXXX > /data; then echo WROTE; exit 1; fi; echo refused"}
	c.RunJob(t, r.JobID, r.HCL(h.Root))
	ra := c.WaitForAllocs(t, r.JobID, 1, api.AllocClientStatusComplete)[0]
	must.Eq(t, "RWOK\nrefused\n", c.AllocLogs(t, ra.ID, WorkloadTask))
	must.StrContains(t, c.Berth(t, "alloc", "logs", "-stderr", ra.ID, WorkloadTask), "Operation not permitted")
	c.WaitForClaimFreed(t, "blk", ra.ID)

	img, err := os.ReadFile(filepath.Join(h.HostpathRoot(), "volumes", "blk", "block.img"))
	must.NoError(t, err)
	must.Eq(t, "RWOK", string(img[:4]))
}

// TestE2E_NodePluginOutageShowsOnTheClaim: the node plugin's job is
// stopped while a workload uses a volume, then the workload is stopped.
// The client cannot unpublish and tells the servers why, so `volume
// status -verbose` shows the claim's step, attempts, the client's error
// and the next retry; once the plugin runs again the claim is freed.
func TestE2E_NodePluginOutageShowsOnTheClaim(t *testing.T) {
	h := NewHarness(t)
	c := h.NewCluster(t, 1, 1)
	plugin := h.HostpathPlugin("node")
	c.RunPlugin(t, plugin)
	c.RegisterVolume(t, &Volume{ID: "data", PluginID: "hostpath", Capabilities: []Capability{{SingleNodeWriter, FileSystem}}})
	w := &Workload{JobID: "svc", Type: "service", Volume: "data", AccessMode: SingleNodeWriter, Script: SlowStopScript(0)}
	c.RunJob(t, w.JobID, w.HCL(h.Root))
	a := c.WaitForAllocs(t, w.JobID, 1, api.AllocClientStatusRunning)[0]

	c.Berth(t, "job", "stop", plugin.ID())
	c.WaitForAllocs(t, plugin.ID(), 1, api.AllocClientStatusComplete)
	c.Berth(t, "job", "stop", w.JobID)

	var claim *api.CSIVolumeClaim
	waitFor(t, claimTimeout, "the claim to show the client's error", func() (bool, error) {
		v := c.Volume(t, "data")
		if claim = findClaim(v.Claims, a.ID); claim == nil {
			return false, fmt.Errorf("no live claim of alloc %s", a.ID)
		}
		return strings.Contains(claim.LastError, `node plugin "hostpath" not running`),
			fmt.Errorf("claim at step %s, attempts %d, last error %q", claim.Step, claim.Attempts, claim.LastError)
	})
	must.Eq(t, api.CSIClaimTaken, claim.Step, must.Sprint("the node side has not let go"))
	must.Positive(t, claim.Attempts)
	must.Greater(t, time.Now().Add(-time.Minute).UnixNano(), claim.NextRetry, must.Sprint("a next retry is set"))
	out := c.Berth(t, "volume", "status", "-verbose", "data")
	t.Logf("volume status -verbose:\n%s", out)
	must.StrContains(t, out, `node plugin "hostpath" not running`)
	must.StrContains(t, out, "Next Retry")

	c.RunPlugin(t, plugin)
	c.WaitForClaimFreed(t, "data", a.ID)
}
