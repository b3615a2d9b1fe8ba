package e2e

import (
	"encoding/json"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

// TestE2E_SnapshotAndRestore: a job writes to a volume Berth created
// through the hostpath monolith; `volume snapshot create` snapshots it,
// `volume snapshot list` shows it under Berth's volume, a new volume
// created from the snapshot (snapshot_id) holds the data a second job
// reads back, and `volume snapshot delete` removes it.
func TestE2E_SnapshotAndRestore(t *testing.T) {
	h := NewHarness(t)
	c := h.NewCluster(t, 1, 1)
	c.RunPlugin(t, h.HostpathPlugin("monolith"))
	caps := []Capability{{SingleNodeWriter, FileSystem}, {SingleNodeReaderOnly, FileSystem}}
	c.Berth(t, "volume", "create", h.WriteFile(t, "src.volume.hcl", (&Volume{ID: "src", PluginID: "hostpath", Capabilities: caps}).HCL()))

	w := &Workload{JobID: "writer", Type: "batch", Volume: "src", AccessMode: SingleNodeWriter, Script: "echo kept-in-snapshot > /data/f"}
	c.RunJob(t, w.JobID, w.HCL(h.Root))
	wa := c.WaitForAllocs(t, w.JobID, 1, api.AllocClientStatusComplete)[0]
	c.WaitForClaimFreed(t, "src", wa.ID)

	var made []*api.CSISnapshot
	must.NoError(t, json.Unmarshal([]byte(lastJSON(c.Berth(t, "volume", "snapshot", "create", "-json", "src", "nightly"))), &made))
	must.SliceLen(t, 1, made)
	snap := made[0]
	must.NotEq(t, "", snap.ID)
	must.Eq(t, "src", snap.SourceVolumeID)

	var page api.CSISnapshotListResponse
	must.NoError(t, json.Unmarshal([]byte(c.Berth(t, "volume", "snapshot", "list", "-plugin", "hostpath", "-json")), &page))
	must.SliceLen(t, 1, page.Snapshots)
	must.Eq(t, snap.ID, page.Snapshots[0].ID)
	must.Eq(t, "src", page.Snapshots[0].SourceVolumeID)

	c.Berth(t, "volume", "create", h.WriteFile(t, "copy.volume.hcl",
		(&Volume{ID: "copy", PluginID: "hostpath", Capabilities: caps, SnapshotID: snap.ID}).HCL()))
	r := &Workload{JobID: "reader", Type: "batch", Volume: "copy", AccessMode: SingleNodeReaderOnly, Script: "cat /data/f"}
	c.RunJob(t, r.JobID, r.HCL(h.Root))
	ra := c.WaitForAllocs(t, r.JobID, 1, api.AllocClientStatusComplete)[0]
	must.Eq(t, "kept-in-snapshot\n", c.AllocLogs(t, ra.ID, WorkloadTask))

	must.StrContains(t, c.Berth(t, "volume", "snapshot", "delete", "hostpath", snap.ID), "deleted")
	must.StrContains(t, c.Berth(t, "volume", "snapshot", "list", "-plugin", "hostpath"), `No snapshots of plugin "hostpath"`)
}

// lastJSON drops the progress line a command prints before its -json
// output.
func lastJSON(out string) string {
	for i, r := range out {
		if r == '[' || r == '{' {
			return out[i:]
		}
	}
	return out
}
