package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

// TestE2E_WalkThrough is the README's stateful walk-through on one server
// and one client, separate processes, Raft on disk: the hostpath plugin as
// a system job (publishing without staging, as the dev agent's does), a
// registered volume, a writer that writes a file into it
// and completes, its claim released once it is stopped (volume status: no
// claims, a freed past claim, no mount left), and a reader whose logs show
// what the writer wrote.
func TestE2E_WalkThrough(t *testing.T) {
	h := NewHarness(t)
	c := h.NewCluster(t, 1, 1)
	client := c.Clients[0]

	c.RunPlugin(t, h.HostpathPlugin("node", "-stage=false"))
	c.RegisterVolume(t, &Volume{ID: "data", PluginID: "hostpath", Capabilities: []Capability{
		{SingleNodeWriter, FileSystem}, {SingleNodeReaderOnly, FileSystem},
	}})

	writer := &Workload{JobID: "writer", Type: "batch", Volume: "data", AccessMode: SingleNodeWriter,
		Script: "echo hello from berth > /data/hello.txt && cat /data/hello.txt"}
	c.RunJob(t, writer.JobID, writer.HCL(h.Root))
	wa := c.WaitForAllocs(t, "writer", 1, api.AllocClientStatusComplete)[0]
	b, err := os.ReadFile(filepath.Join(h.HostpathRoot(), "volumes", "data", "hello.txt"))
	must.NoError(t, err, must.Sprint("the writer's file is not in the volume's directory"))
	must.Eq(t, "hello from berth\n", string(b))

	c.Berth(t, "job", "stop", "writer")
	v := c.WaitForClaimFreed(t, "data", wa.ID)
	must.SliceEmpty(t, v.Claims)

	// What an operator sees.
	var vol api.CSIVolume
	c.BerthJSON(t, &vol, "volume", "status", "-json", "data")
	must.SliceEmpty(t, vol.Claims, must.Sprint("volume status -json still shows claims"))
	past := findClaim(vol.PastClaims, wa.ID)
	must.NotNil(t, past, must.Sprintf("no past claim of the writer's alloc %s in volume status -json", wa.ID))
	must.Eq(t, api.CSIClaimFreed, past.Step)
	out := c.Berth(t, "volume", "status", "-verbose", "data")
	must.StrContains(t, out, "Claims\nNo claims")
	i := strings.Index(out, "Past Claims\n")
	must.Positive(t, i, must.Sprintf("no past claims in volume status -verbose:\n%s", out))
	pastRow := lineWith(out[i:], wa.ID)
	must.StrContains(t, pastRow, string(api.CSIClaimFreed), must.Sprintf("volume status -verbose:\n%s", out))
	must.StrContains(t, pastRow, "released", must.Sprintf("volume status -verbose:\n%s", out))

	// Nothing of the writer is left mounted on the client.
	waitFor(t, claimTimeout, "the client's CSI mounts to be gone", func() (bool, error) {
		ms, err := MountsUnder(filepath.Join(client.DataDir, "client", "csi"))
		return err == nil && len(ms) == 0, fmt.Errorf("mounts: %v (%v)", ms, err)
	})

	reader := &Workload{JobID: "reader", Type: "batch", Volume: "data", AccessMode: SingleNodeReaderOnly,
		Script: "cat /data/hello.txt"}
	c.RunJob(t, reader.JobID, reader.HCL(h.Root))
	ra := c.WaitForAllocs(t, "reader", 1, api.AllocClientStatusComplete)[0]
	must.Eq(t, "hello from berth\n", c.AllocLogs(t, ra.ID, WorkloadTask))
	c.WaitForClaimFreed(t, "data", ra.ID)
}

// lineWith returns the first line of s that contains sub ("" if none).
func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
