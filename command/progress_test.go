package command

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/testutil"
)

func TestVolumeCreate_SaysWhatItWaitsOn(t *testing.T) {
	oldFirst, oldEvery := progressFirst, progressEvery
	progressFirst, progressEvery = time.Millisecond, time.Hour
	t.Cleanup(func() { progressFirst, progressEvery = oldFirst, oldEvery })

	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /v1/volume/csi/{id}/create", func(w http.ResponseWriter, r *http.Request) {
		<-release // the controller is slow
		json.NewEncoder(w).Encode(api.CSIVolumeCreateResponse{Volumes: []*api.CSIVolume{{ID: "db", ExternalID: "vol-1"}}})
	})
	mux.HandleFunc("GET /v1/plugin/csi/{id}", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(api.CSIPlugin{ID: r.PathValue("id"), ControllersHealthy: 0, ControllersExpected: 1})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Setenv("BERTH_ADDR", srv.URL)
	t.Setenv("BERTH_TOKEN", "")
	t.Setenv("BERTH_NAMESPACE", "")
	spec := filepath.Join(t.TempDir(), "db.hcl")
	must.NoError(t, os.WriteFile(spec, []byte(`id = "db"
name = "db"
type = "csi"
plugin_id = "ebs"
capability {
  access_mode     = "single-node-writer"
  attachment_mode = "file-system"
}
`), 0o600))

	var out, errOut testutil.SyncBuffer
	code := make(chan int, 1)
	go func() { code <- Run([]string{"volume", "create", spec}, &out, &errOut) }()
	testutil.WaitForResult(t, func() (bool, error) {
		return strings.Contains(errOut.String(), "Still creating volume \"db\""), nil
	})
	must.StrContains(t, errOut.String(), `plugin "ebs" has no healthy controller (1 expected): the call waits for one; check its controller job`)
	close(release)
	must.Eq(t, 0, <-code)
	must.StrContains(t, out.String(), `Created volume "db" (external ID "vol-1")`)
	must.StrNotContains(t, out.String(), "Still") // progress goes to stderr only
}
