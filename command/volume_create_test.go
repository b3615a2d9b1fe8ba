package command

import (
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
