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
