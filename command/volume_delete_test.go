package command

import (
	"bytes"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

func TestVolumeDelete_SendsSecretsInHeader(t *testing.T) {
	f := newFakeAPI(t)
	seedCluster(f)
	f.update(func(f *fakeAPI) { f.volumes["logs"].Created = true })
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

// A volume Berth did not create is deleted only after a yes that was
// asked with the consequence and the non-destructive alternative named.
func TestVolumeDelete_AsksForARegisteredVolume(t *testing.T) {
	f := newFakeAPI(t)
	seedCluster(f)
	run := func(answer string, args ...string) (int, string) {
		var out, errOut bytes.Buffer
		cmd := &VolumeDeleteCommand{Meta: Meta{ui: &UI{Out: &out, Err: &errOut}}, stdin: strings.NewReader(answer)}
		return cmd.Run(args), out.String() + errOut.String()
	}
	before := len(f.writes)
	code, out := run("n\n", "logs")
	must.Eq(t, 1, code)
	must.StrContains(t, out, `Volume "logs" was registered, not created by Berth: plugin "host-b" will DELETE it and its data`)
	must.StrContains(t, out, "'berth volume deregister logs'")
	must.StrContains(t, out, `Volume "logs" not deleted`)
	must.Eq(t, before, len(f.writes), must.Sprint("nothing deleted on no"))

	code, out = run("y\n", "logs")
	must.Eq(t, 0, code, must.Sprint(out))
	write, _, _ := f.lastWrite()
	must.StrHasPrefix(t, "DELETE /v1/volume/csi/logs/delete", write)

	code, out = run("", "-yes", "logs")
	must.Eq(t, 0, code, must.Sprint(out))
	must.StrNotContains(t, out, "Delete it?")
}
