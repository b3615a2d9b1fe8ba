package command

import (
	"testing"

	"github.com/shoenig/test/must"
)

func TestVolumeDelete_SendsSecretsInHeader(t *testing.T) {
	f := newFakeAPI(t)
	seedCluster(f)
	code, out, errOut := f.run("volume", "delete", "-secret", "user=admin", "-secret", "pw=a=b", "logs")
	must.Eq(t, 0, code, must.Sprintf("stderr: %s", errOut))
	must.StrContains(t, out, `Volume "logs" deleted`)
	write, _, hdr := f.lastWrite()
	must.StrHasPrefix(t, "DELETE /v1/volume/csi/logs/delete", write)
	must.Eq(t, "pw=a=b,user=admin", hdr.Get("X-Nomad-CSI-Secrets"))

	code, _, errOut = f.run("volume", "delete", "-secret", "novalue", "logs")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, "want key=value")
}
