package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// example is the path of examples/<name>, as a user runs it.
func example(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "examples", name))
	must.NoError(t, err)
	return p
}

// TestE2E_VolumeExamples runs the volume examples as the README does,
// against the hostpath monolith: create examples/volume.hcl; create
// volume-grow.hcl, which expands it; register it again with its external
// ID and more capacity (the register path of expansion); create
// volume-modify.hcl, which sets its mutable parameter through
// ControllerModifyVolume, while an unknown one is refused by the plugin;
// snapshot it and create volume-restore.hcl from the snapshot. The
// controller's GetCapacity shows in `plugin status`.
func TestE2E_VolumeExamples(t *testing.T) {
	h := NewHarness(t)
	c := h.NewCluster(t, 1, 1)
	c.RunPlugin(t, h.HostpathPlugin("monolith"))

	c.Berth(t, "volume", "create", example(t, "volume.hcl"))
	must.Eq(t, int64(10<<20), c.Volume(t, "data").Capacity)

	c.Berth(t, "volume", "create", example(t, "volume-grow.hcl"))
	vol := c.Volume(t, "data")
	must.Eq(t, int64(20<<20), vol.Capacity)
	must.NotNil(t, vol.Expansion)
	must.True(t, vol.Expansion.ControllerDone)
	must.StrContains(t, c.Berth(t, "volume", "status", "data"), "expanded to 20 MiB")

	grow, err := os.ReadFile(example(t, "volume-grow.hcl"))
	must.NoError(t, err)
	spec := strings.Replace(string(grow), `capacity_min = "20MiB"`, `capacity_min = "30MiB"`, 1) +
		fmt.Sprintf("external_id = %q\n", vol.ExternalID)
	c.Berth(t, "volume", "register", h.WriteFile(t, "grow-register.volume.hcl", spec))
	vol = c.Volume(t, "data")
	must.Eq(t, int64(30<<20), vol.Capacity)
	must.Eq(t, int64(30<<20), vol.Expansion.RequestedBytes)

	// volume-modify.hcl asks for 10 MiB: less than the volume has, which is
	// not a shrink (capacity_min is a floor), so only the note changes.
	c.Berth(t, "volume", "create", example(t, "volume-modify.hcl"))
	vol = c.Volume(t, "data")
	must.Eq(t, map[string]string{"note": "nightly backups"}, vol.MutableParameters)
	must.Eq(t, int64(30<<20), vol.Capacity)
	out := c.Berth(t, "volume", "status", "data")
	must.StrContains(t, out, "Mutable Parameters")
	must.StrContains(t, out, "nightly backups")

	src, err := os.ReadFile(example(t, "volume-modify.hcl"))
	must.NoError(t, err)
	bad := h.WriteFile(t, "bad-modify.volume.hcl", strings.Replace(string(src), `note = "nightly backups"`, `iops = "9000"`, 1))
	out, err = c.BerthOn(c.Server(t), "volume", "create", bad)
	must.Error(t, err)
	must.StrContains(t, out, `mutable parameter "iops" is not supported`)
	must.Eq(t, map[string]string{"note": "nightly backups"}, c.Volume(t, "data").MutableParameters)

	c.Berth(t, "volume", "snapshot", "create", "data", "nightly")
	var page struct {
		Snapshots []struct{ ID, SourceVolumeID string }
	}
	c.BerthJSON(t, &page, "volume", "snapshot", "list", "-plugin", "hostpath", "-json")
	must.SliceLen(t, 1, page.Snapshots)
	src, err = os.ReadFile(example(t, "volume-restore.hcl"))
	must.NoError(t, err)
	restore := h.WriteFile(t, "restore.volume.hcl", strings.Replace(string(src), "SNAPSHOT-ID", page.Snapshots[0].ID, 1))
	c.Berth(t, "volume", "create", restore)
	restored := c.Volume(t, "data-restored")
	must.Eq(t, page.Snapshots[0].ID, restored.SnapshotID)
	must.NotEq(t, "", restored.ExternalID)

	out = c.Berth(t, "plugin", "status", "hostpath")
	must.StrContains(t, out, "Capacity\n")
	must.StrContains(t, out, "Available")
}
