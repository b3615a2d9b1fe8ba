package command

import (
	"testing"

	"github.com/shoenig/test/must"
)

func TestVolumeDeregister(t *testing.T) {
	f := newFakeAPI(t)
	seedCluster(f)

	code, out, _ := f.run("volume", "deregister", "lo")
	must.Eq(t, 0, code)
	must.StrContains(t, out, `Volume "logs" deregistered`)
	write, _, _ := f.lastWrite()
	must.Eq(t, "DELETE /v1/volume/csi/logs?force=false&namespace=default", write)

	// In use: the error says what to do.
	code, _, errOut := f.run("volume", "deregister", "data")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, `Error deregistering volume "data": Unexpected response code: 400 (volume in use: 1 claim)`)
	must.StrContains(t, errOut, "berth volume status data")

	code, _, _ = f.run("volume", "deregister", "-force", "data")
	must.Eq(t, 0, code)
	write, _, _ = f.lastWrite()
	must.StrContains(t, write, "force=true")

	code, _, errOut = f.run("volume", "deregister", "da")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, `Prefix "da" matched multiple volumes`)

	code, _, errOut = f.run("volume", "deregister", "zz")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, `No volume with prefix "zz" found`)
}
