package command

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

// setClaim replaces the data volume's claims with cs.
func setClaims(cs ...*api.CSIVolumeClaim) func(f *fakeAPI) {
	return func(f *fakeAPI) {
		v := *f.volumes["data"]
		v.Claims = cs
		f.volumes["data"] = &v
	}
}

func TestVolumeDetach(t *testing.T) {
	f := newFakeAPI(t)
	seedCluster(f)
	claim := *f.volumes["data"].Claims[1]
	done := claim
	done.Step, done.LastError, done.Attempts = api.CSIClaimControllerDetached, "", 0
	// The servers carry the release on: the command follows it step by
	// step until the node's claims are freed.
	f.script(setClaims(&done), setClaims())
	code, out, errOut := f.run("volume", "detach", "data", "9a0b1")
	must.Eq(t, 0, code, must.Sprintf("stderr: %s", errOut))
	must.StrContains(t, out, "alloc 5e6f7a8b: node-detached (attempt 3: controller unpublish: rpc error: code = Unavailable)")
	must.StrContains(t, out, "alloc 5e6f7a8b: controller-detached\n")
	must.StrContains(t, out, `Volume "data" detached from node "`+nodeA+`": every claim there is freed`)
	write, _, _ := f.lastWrite()
	must.Eq(t, "DELETE /v1/volume/csi/data/detach?namespace=default&node="+nodeA, write)

	// A release that stops on a plugin error: exit 1, naming the claim,
	// the step and the error, and what to do.
	stuck := claim
	stuck.Step, stuck.BlockedStep, stuck.LastError = api.CSIClaimNeedsOperator, api.CSIClaimNodeDetached,
		"controller unpublish: rpc error: code = InvalidArgument desc = unknown node"
	f.update(setClaims(&stuck))
	code, _, errOut = f.run("volume", "detach", "data", nodeA)
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, `Volume "data" is not detached from node "`+nodeA+`": alloc 5e6f7a8b stopped at step node-detached: `+
		"controller unpublish: rpc error: code = InvalidArgument desc = unknown node")
	must.StrContains(t, errOut, "berth volume detach data "+nodeA)

	// A release still going when -timeout passes: exit 1, and where to
	// follow it.
	f.update(setClaims(&claim))
	code, _, errOut = f.run("volume", "detach", "-timeout", "50ms", "data", nodeA)
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, `still being released on node "`+nodeA+`" after 50ms`)
	// -timeout 0 does not follow.
	code, out, _ = f.run("volume", "detach", "-timeout", "0", "data", nodeA)
	must.Eq(t, 0, code)
	must.StrContains(t, out, "follow it with 'berth volume status -verbose data'")

	// A node gone from the servers can still be named by its full ID.
	gone := "deadbeef-0000-4000-8000-000000000000"
	code, out, _ = f.run("volume", "detach", "data", gone)
	must.Eq(t, 0, code)
	must.StrContains(t, out, "every claim there is freed")
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
