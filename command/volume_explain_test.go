package command

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

func TestVolumeExplain(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/volumes", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode([]*api.CSIVolumeListStub{{ID: "db", Namespace: "default"}})
	})
	mux.HandleFunc("GET /v1/volume/csi/{id}/explain", func(w http.ResponseWriter, r *http.Request) {
		must.Eq(t, "db", r.PathValue("id"))
		json.NewEncoder(w).Encode(api.CSIVolumeExplanation{VolumeID: "db", Summary: "volume db has 1 claim(s) that need an operator",
			Findings: []api.CSIVolumeExplainFinding{{AllocID: "a1", NodeID: "n2", Kind: "waiting",
				Why:    "node n2 is down and promised no disconnect deadline; alloc a1's claim waits for it",
				Action: "`berth volume detach -force db n2` after you confirm the node is fenced"}}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Setenv("BERTH_ADDR", srv.URL)
	t.Setenv("BERTH_TOKEN", "")
	t.Setenv("BERTH_NAMESPACE", "")

	var out, errOut bytes.Buffer
	must.Eq(t, 0, Run([]string{"volume", "explain", "d"}, &out, &errOut), must.Sprint(errOut.String()))
	must.Eq(t, "volume db has 1 claim(s) that need an operator\n\n"+
		"- node n2 is down and promised no disconnect deadline; alloc a1's claim waits for it\n"+
		"  next: `berth volume detach -force db n2` after you confirm the node is fenced\n", out.String())

	out.Reset()
	must.Eq(t, 0, Run([]string{"volume", "explain", "-json", "db"}, &out, &errOut))
	must.StrContains(t, out.String(), `"Action": "`+"`berth volume detach -force db n2`")

	must.Eq(t, 1, Run([]string{"volume", "explain"}, &out, &errOut))
	must.StrContains(t, errOut.String(), "one argument")
}
