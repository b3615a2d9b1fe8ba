package command

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

const volumeHCL = `id        = "data"
name      = "data"
type      = "csi"
plugin_id = "hostpath"
capacity_min = "10MiB"

capability {
  access_mode     = "single-node-writer"
  attachment_mode = "file-system"
}
`

func TestVolumeRegister(t *testing.T) {
	f := newFakeAPI(t)
	code, out, errOut := f.run("volume", "register", writeFile(t, "vol.hcl", volumeHCL))
	must.Eq(t, 0, code, must.Sprintf("stderr: %s", errOut))
	must.StrContains(t, out, `Volume "data" registered`)
	write, body, _ := f.lastWrite()
	must.StrHasPrefix(t, "PUT /v1/volume/csi/data", write)
	var req api.CSIVolumeRegisterRequest
	must.NoError(t, json.Unmarshal([]byte(body), &req))
	must.Eq(t, "hostpath", req.Volumes[0].PluginID)
}

func TestVolumeRegister_JSONFromStdin(t *testing.T) {
	f := newFakeAPI(t)
	b, err := os.ReadFile("../examples/volume.json")
	must.NoError(t, err)
	var out, errOut bytes.Buffer
	cmd := &VolumeRegisterCommand{Meta: Meta{ui: &UI{Out: &out, Err: &errOut}}, stdin: bytes.NewReader(b)}
	must.Eq(t, 0, cmd.Run([]string{"-"}), must.Sprintf("stderr: %s", errOut.String()))
	must.StrContains(t, out.String(), `Volume "data" registered`)
	write, _, _ := f.lastWrite()
	must.StrHasPrefix(t, "PUT /v1/volume/csi/data", write)
}

func TestVolumeRegister_BadFileNamesLineAndColumn(t *testing.T) {
	f := newFakeAPI(t)
	path := writeFile(t, "bad.hcl", strings.Replace(volumeHCL, `"single-node-writer"`, `"sometimes"`, 1))
	code, _, errOut := f.run("volume", "register", path)
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, path+":8,")
	must.StrContains(t, errOut, "sometimes")
	write, _, _ := f.lastWrite()
	must.Eq(t, "", write)

	code, _, errOut = f.run("volume", "register", writeFile(t, "bad.json", "{\n  \"id\": \"x\",\n}\n"))
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, "bad.json:")
}

func TestVolumeRegister_ServerErrorNamesVolume(t *testing.T) {
	f := newFakeAPI(t)
	f.update(func(f *fakeAPI) { f.failCode, f.failBody = 400, `plugin "hostpath" not found` })
	code, _, errOut := f.run("volume", "register", writeFile(t, "vol.hcl", volumeHCL))
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, `Error registering volume "data": Unexpected response code: 400 (plugin "hostpath" not found)`)
}
