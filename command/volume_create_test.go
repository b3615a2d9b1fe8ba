package command

import (
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

func TestVolumeCreate(t *testing.T) {
	f := newFakeAPI(t)
	path := writeFile(t, "vol.hcl", volumeHCL)
	code, out, errOut := f.run("volume", "create", path)
	must.Eq(t, 0, code, must.Sprintf("stderr: %s", errOut))
	mustOrder(t, out, `Created volume "data" (external ID "ext-data")`, "External ID = ext-data", "Plugin ID   = hostpath",
		"Capacity    = 10 MiB", "Topologies  = rack=R1")
	write, _, _ := f.lastWrite()
	must.StrHasPrefix(t, "PUT /v1/volume/csi/data/create", write)

	code, out, _ = f.run("volume", "create", "-json", path)
	must.Eq(t, 0, code)
	var vols []*api.CSIVolume
	mustJSON(t, out, &vols)
	must.Eq(t, "ext-data", vols[0].ExternalID)
}

// A create of a volume that exists says what it did: expanded or
// modified, not "Created".
func TestVolumeCreate_SaysWhenItExpandedOrModified(t *testing.T) {
	f := newFakeAPI(t)
	path := writeFile(t, "vol.hcl", volumeHCL)
	code, _, errOut := f.run("volume", "create", path)
	must.Eq(t, 0, code, must.Sprintf("stderr: %s", errOut))

	code, out, errOut := f.run("volume", "create", path)
	must.Eq(t, 0, code, must.Sprintf("stderr: %s", errOut))
	must.StrContains(t, out, `Modified volume "data"`)
	must.StrNotContains(t, out, "Created")

	bigger := writeFile(t, "big.hcl", strings.Replace(volumeHCL, `capacity_min = "10MiB"`, `capacity_min = "20MiB"`, 1))
	code, out, errOut = f.run("volume", "create", bigger)
	must.Eq(t, 0, code, must.Sprintf("stderr: %s", errOut))
	must.StrContains(t, out, `Expanded volume "data" to 20 MiB`)
	must.StrNotContains(t, out, "Created")
}
