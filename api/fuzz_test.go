package api

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecodeJobRegistration feeds arbitrary bodies to what a server does
// with PUT /v1/jobs: decode, then canonicalize. Neither may panic.
func FuzzDecodeJobRegistration(f *testing.F) {
	for _, name := range []string{"nomad_job_register.json", "job.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	job, _ := os.ReadFile(filepath.Join("testdata", "job.json"))
	f.Add(append(append([]byte(`{"Job":`), job...), '}'))
	f.Add([]byte(`{"Job":{"TaskGroups":[null,{"Tasks":[null,{"VolumeMounts":[null]}],"Volumes":{"a":null}}]}}`))
	f.Add([]byte(`{"Job":{"Type":"system","Reschedule":{},"TaskGroups":[{"RestartPolicy":{},"Tasks":[{"CSIPluginConfig":{}}]}]}}`))
	f.Add([]byte(`{"Job":null}`))
	f.Add([]byte(`null`))

	f.Fuzz(func(t *testing.T, body []byte) {
		var req JobRegisterRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return
		}
		if req.Job == nil {
			return
		}
		req.Job.Canonicalize()
		// Canonicalizing twice changes nothing and must not panic either.
		before, err := json.Marshal(req.Job)
		if err != nil {
			t.Fatalf("encoding a decoded job: %v", err)
		}
		req.Job.Canonicalize()
		after, _ := json.Marshal(req.Job)
		if string(before) != string(after) {
			t.Fatalf("Canonicalize is not idempotent:\n%s\n%s", before, after)
		}
	})
}

// FuzzVolumeDecodersLikeEncodingJSON holds the hand-written decoders of a
// volume register request, its answer and a volume list to encoding/json:
// for any body, the same result or the same error. The agent decodes
// every caller's register body with them, so a difference is a request
// that means one thing to Berth and another to every other JSON reader.
func FuzzVolumeDecodersLikeEncodingJSON(f *testing.F) {
	for _, body := range volumeEdgeBodies {
		f.Add([]byte(body))
	}
	for _, body := range stubEdgeBodies {
		f.Add([]byte(body))
	}
	vols := sampleVolumes(f, 2)
	req, err := json.Marshal(CSIVolumeRegisterRequest{Volumes: vols})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(req)
	stubs := make([]*CSIVolumeListStub, 0, len(vols))
	for _, v := range vols {
		stubs = append(stubs, &CSIVolumeListStub{ID: v.ID, Name: v.Name, PluginID: v.PluginID, AccessMode: v.AccessMode})
	}
	list, err := json.Marshal(stubs)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(list)

	f.Fuzz(func(t *testing.T, body []byte) {
		volumesLikeEncodingJSON(t, body)
		stubsLikeEncodingJSON(t, body)
	})
}
