package command

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/jobspec"
)

func TestVolumeInit_WritesParsableSpecAndRefusesToOverwrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		file string
	}{
		{"hcl", nil, "volume.hcl"},
		{"json", []string{"-json"}, "volume.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			var out, errOut bytes.Buffer
			must.Eq(t, 0, Run(append([]string{"volume", "init"}, tc.args...), &out, &errOut))
			must.StrContains(t, out.String(), "Example volume specification written to "+tc.file)
			vol, err := jobspec.ParseVolumeFile(tc.file)
			must.NoError(t, err)
			must.Eq(t, "data", vol.ID)

			// A second run keeps the edited file.
			must.NoError(t, os.WriteFile(tc.file, []byte("edited"), 0o600))
			out.Reset()
			must.Eq(t, 1, Run(append([]string{"volume", "init"}, tc.args...), &out, &errOut))
			must.StrContains(t, errOut.String(), `Volume specification file "`+tc.file+`" already exists`)
			b, err := os.ReadFile(tc.file)
			must.NoError(t, err)
			must.Eq(t, "edited", string(b))
		})
	}
}

func TestVolumeInit_NamedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mine.hcl")
	var out, errOut bytes.Buffer
	must.Eq(t, 0, Run([]string{"volume", "init", path}, &out, &errOut))
	_, err := jobspec.ParseVolumeFile(path)
	must.NoError(t, err)
	must.Eq(t, 1, Run([]string{"volume", "init", path}, &out, &errOut))
}
