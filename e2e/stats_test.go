package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

// TestE2E_VolumeStats: a running job writes 3 MiB to a hostpath volume;
// the client samples NodeGetVolumeStats and reports it, and the volume's
// API object, `volume status` and the leader's Prometheus gauges show
// those bytes (and the file's inode) for the job's node.
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

	resp, err := http.Get("http://" + c.Server(t).HTTPAddr() + "/v1/metrics?format=prometheus")
	must.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	must.NoError(t, err)
	labels := fmt.Sprintf(`{namespace="default",node=%q,volume="data"} `, a.NodeID)
	gauge := func(name string) float64 {
		for _, l := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(l, name+labels); ok {
				f, err := strconv.ParseFloat(v, 64)
				must.NoError(t, err)
				return f
			}
		}
		t.Fatalf("no %s%s in the leader's metrics", name, labels)
		return 0
	}
	must.Eq(t, float64(size), gauge("berth_csi_volume_used_bytes"))
	must.Eq(t, 1, gauge("berth_csi_volume_inodes_used"))
	must.Positive(t, gauge("berth_csi_volume_capacity_bytes"))
}

// TestE2E_ExpandWhileInUse: re-running `volume create` with a larger
// capacity_min grows a hostpath volume a running job uses; the volume's
// capacity, its recorded expansion and the node's stats all show the new
// size, and asking for less is refused.
func TestE2E_ExpandWhileInUse(t *testing.T) {
	h := NewHarness(t)
	c := h.NewCluster(t, 1, 1)
	c.RunPlugin(t, h.HostpathPlugin("monolith"))
	caps := []Capability{{SingleNodeWriter, FileSystem}}
	spec := func(size string) string {
		return h.WriteFile(t, "grow-"+size+".volume.hcl", (&Volume{ID: "grow", PluginID: "hostpath", Capabilities: caps, CapacityMin: size}).HCL())
	}
	c.Berth(t, "volume", "create", spec("64MiB"))
	must.Eq(t, int64(64<<20), c.Volume(t, "grow").Capacity)

	w := &Workload{JobID: "user", Type: "service", Volume: "grow", AccessMode: SingleNodeWriter, Script: "echo hi > /data/f && sleep 3600"}
	c.RunJob(t, w.JobID, w.HCL(h.Root))
	a := c.WaitForAllocs(t, w.JobID, 1, api.AllocClientStatusRunning)[0]

	c.Berth(t, "volume", "create", spec("128MiB"))
	vol := c.Volume(t, "grow")
	must.Eq(t, int64(128<<20), vol.Capacity)
	must.NotNil(t, vol.Expansion)
	must.True(t, vol.Expansion.ControllerDone)
	must.Eq(t, int64(128<<20), vol.Expansion.RequestedBytes)
	waitFor(t, 60*time.Second, "the node's stats to show the new size", func() (bool, error) {
		st := c.Volume(t, "grow").Stats[a.NodeID]
		if st == nil {
			return false, fmt.Errorf("no stats from node %s yet", a.NodeID)
		}
		return st.TotalBytes == 128<<20, fmt.Errorf("total %d bytes", st.TotalBytes)
	})
	out := c.Berth(t, "volume", "status", "grow")
	must.StrContains(t, out, "Expansion\n")
	must.StrContains(t, out, "expanded to 128 MiB")

	small := h.WriteFile(t, "small.volume.hcl", (&Volume{ID: "grow", PluginID: "hostpath", Capabilities: caps}).HCL()+"capacity_max = \"32MiB\"\n")
	out, err := c.BerthOn(c.Server(t), "volume", "create", small)
	must.Error(t, err)
	must.StrContains(t, out, "never shrink")
	must.Eq(t, int64(128<<20), c.Volume(t, "grow").Capacity)
}
