package agent

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/nomad/structs"
)

// FuzzWriteBodies feeds arbitrary bodies through what the HTTP API does
// with the body of each write endpoint before the RPC: the body limits
// (size, depth), decoding, conversion to the data model and validation.
// None of it may panic.
func FuzzWriteBodies(f *testing.F) {
	for _, name := range []string{"nomad_job_register.json", "job.json"} {
		if b, err := os.ReadFile(filepath.Join("..", "..", "api", "testdata", name)); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"Job":{"ID":"a/b","TaskGroups":[{"Name":"..","Count":-1,"Tasks":[{"Name":"../x","KillTimeout":-1}]}]}}`))
	f.Add([]byte(`{"Volumes":[{"ID":"v","PluginID":"p","Context":{"a":"b"},"RequestedCapacityMin":-1}]}`))
	f.Add([]byte(`{"DrainSpec":{"Deadline":-1},"MarkEligible":true}`))
	f.Add([]byte(`{"Eligibility":"eligible"}`))
	f.Add([]byte(`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[`))
	f.Add([]byte(`{"Job":{"TaskGroups":[null,{"Tasks":[null]}]}}`))

	f.Fuzz(func(t *testing.T, body []byte) {
		req := func() *http.Request {
			r := httptest.NewRequest(http.MethodPut, "/v1/jobs", bytes.NewReader(body))
			if err := readBody(httptest.NewRecorder(), r, 1<<20, httpBodyReadTimeout); err != nil {
				return nil
			}
			return r
		}
		if r := req(); r != nil {
			var jr api.JobRegisterRequest
			if decodeBody(r, &jr) == nil && jr.Job != nil {
				var wr structs.WriteRequest
				if job, err := requestJob(r, jr.Job, "", &wr); err == nil {
					_ = job.Validate()
				}
			}
		}
		if r := req(); r != nil {
			var vr api.CSIVolumeRegisterRequest
			if decodeBody(r, &vr) == nil {
				for _, v := range vr.Volumes {
					if v != nil {
						_ = apiVolumeToStructs(v).Validate()
					}
				}
			}
		}
		if r := req(); r != nil {
			var dr api.NodeUpdateDrainRequest
			_ = decodeBody(r, &dr)
		}
		if r := req(); r != nil {
			var er api.NodeUpdateEligibilityRequest
			_ = decodeBody(r, &er)
		}
	})
}

// FuzzParseConfig: the agent config parser, merge and validation never
// panic, whatever the file holds.
func FuzzParseConfig(f *testing.F) {
	matches, _ := filepath.Glob(filepath.Join("..", "..", "examples", "cluster", "*.hcl"))
	for _, m := range matches {
		if b, err := os.ReadFile(m); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("limits {\n  http_max_body_bytes = -1\n}\nplugin \"exec\" {\n  config {\n    allow_caps = [\"sys_admin\", \"nope\"]\n  }\n}\n"))
	f.Add([]byte("client {\n  enabled = true\n  disconnect_deadline = \"-5m\"\n}\nserver {\n  bootstrap_expect = -1\n}\n"))
	f.Add([]byte("bind_addr = \"0.0.0.0\"\nports {\n  http = 99999\n}\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		c, err := ParseConfig("agent.hcl", src)
		if err != nil {
			return
		}
		merged := DefaultConfig().Merge(c)
		_ = merged.Validate()
		_, _ = enabledDrivers(merged)
		_, _ = execAllowCaps(merged)
	})
}
