package command

import (
	"testing"

	"github.com/shoenig/test/must"
)

func TestVolumeDetach(t *testing.T) {
	f := newFakeAPI(t)
	seedCluster(f)
	code, out, errOut := f.run("volume", "detach", "data", "9a0b1")
	must.Eq(t, 0, code, must.Sprintf("stderr: %s", errOut))
	must.StrContains(t, out, `Volume "data" detached from node "`+nodeA+`"`)
	// The fake keeps the claims: the command says what is left.
	must.StrContains(t, out, "alloc 5e6f7a8b at step node-detached (last error: controller unpublish: rpc error: code = Unavailable)")
	write, _, _ := f.lastWrite()
	must.Eq(t, "DELETE /v1/volume/csi/data/detach?namespace=default&node="+nodeA, write)

	// A node gone from the servers can still be named by its full ID.
	gone := "deadbeef-0000-4000-8000-000000000000"
	code, _, _ = f.run("volume", "detach", "data", gone)
	must.Eq(t, 0, code)
	write, _, _ = f.lastWrite()
	must.StrContains(t, write, "node="+gone)

	code, _, _ = f.run("volume", "detach", "-force", "data", gone)
	must.Eq(t, 0, code)
	write, _, _ = f.lastWrite()
	must.Eq(t, "DELETE /v1/volume/csi/data/detach?force=true&namespace=default&node="+gone, write)

	code, _, errOut = f.run("volume", "detach", "data", "9a0b")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, `Prefix "9a0b" matched multiple nodes`)

	code, _, errOut = f.run("volume", "detach", "data")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, "two arguments")
}
