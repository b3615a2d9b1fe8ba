package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

// TestE2E_VolumeStats: a running job writes 3 MiB to a hostpath volume;
// the client samples NodeGetVolumeStats and reports it, and the volume's
// API object and `volume status` show those bytes (and the file's inode)
// for the job's node.
func TestE2E_VolumeStats(t *testing.T) {
	h := NewHarness(t)
	c := h.NewCluster(t, 1, 1)
	c.RunPlugin(t, h.HostpathPlugin("monolith"))
	caps := []Capability{{SingleNodeWriter, FileSystem}}
	c.Berth(t, "volume", "create", h.WriteFile(t, "data.volume.hcl", (&Volume{ID: "data", PluginID: "hostpath", Capabilities: caps}).HCL()))

	const size = 3 << 20
	w := &Workload{JobID: "filler", Type: "service", Volume: "data", AccessMode: SingleNodeWriter,
		Script: fmt.Sprintf("head -c %d /dev/zero > /data/blob && sleep 3600", size)}
	c.RunJob(t, w.JobID, w.HCL(h.Root))
	a := c.WaitForAllocs(t, w.JobID, 1, api.AllocClientStatusRunning)[0]

	var st *api.CSIVolumeStats
	waitFor(t, 60*time.Second, "the volume's stats to show the written bytes", func() (bool, error) {
		st = c.Volume(t, "data").Stats[a.NodeID]
		if st == nil {
			return false, fmt.Errorf("no stats from node %s yet", a.NodeID)
		}
		return st.UsedBytes == size, fmt.Errorf("used %d bytes, want %d", st.UsedBytes, size)
	})
	must.Eq(t, int64(1), st.UsedInodes, must.Sprint("one file"))
	must.Positive(t, st.TotalBytes)
	must.Positive(t, st.AvailableBytes)
	must.Positive(t, st.SampledAt)

	out := c.Berth(t, "volume", "status", "data")
	must.StrContains(t, out, "Usage\n")
	var row string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, a.NodeID[:8]) {
			row = l
		}
	}
	must.StrContains(t, row, "3 MiB", must.Sprintf("usage row of node %s in:\n%s", a.NodeID, out))
}
