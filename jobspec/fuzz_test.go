package jobspec

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// addExamples seeds f with every example file whose name matches.
func addExamples(f *testing.F, match func(name string) bool) {
	entries, err := os.ReadDir(examplesDir)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || !match(e.Name()) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(examplesDir, e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(e.Name(), b)
	}
}

func isVolumeExample(name string) bool { return strings.HasPrefix(name, "volume") }

// FuzzParseJob checks that no input makes Parse panic, and that a job it
// accepts can be sent: it encodes as JSON and survives Canonicalize again.
func FuzzParseJob(f *testing.F) {
	addExamples(f, func(name string) bool { return !isVolumeExample(name) })
	f.Add("full.hcl", []byte(fullJob))
	for _, tc := range badJobs {
		f.Add("job.hcl", []byte(tc.src))
	}
	f.Fuzz(func(t *testing.T, name string, src []byte) {
		j, err := Parse(name, src)
		if err != nil {
			if j != nil {
				t.Fatalf("Parse returned a job and an error: %v", err)
			}
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if _, err := json.Marshal(j); err != nil {
			t.Fatalf("an accepted job does not encode: %v", err)
		}
		j.Canonicalize()
	})
}

// FuzzParseVolume checks that no input makes ParseVolume panic, in HCL or
// in JSON.
func FuzzParseVolume(f *testing.F) {
	addExamples(f, isVolumeExample)
	f.Add("full.hcl", []byte(fullVolumeHCL))
	f.Add("full.json", []byte(fullVolumeJSON))
	f.Add("init.hcl", []byte(VolumeInit(false)))
	f.Add("init.json", []byte(VolumeInit(true)))
	for _, tc := range badVolumes {
		f.Add(tc.file, []byte(tc.src))
	}
	f.Fuzz(func(t *testing.T, name string, src []byte) {
		v, err := ParseVolume(name, src)
		if err != nil {
			if v != nil {
				t.Fatalf("ParseVolume returned a volume and an error: %v", err)
			}
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if v.ID == "" || v.PluginID == "" || len(v.RequestedCapabilities) == 0 {
			t.Fatalf("accepted a volume without id, plugin_id or capability: %+v", v)
		}
		if _, err := json.Marshal(v); err != nil {
			t.Fatalf("an accepted volume does not encode: %v", err)
		}
	})
}
