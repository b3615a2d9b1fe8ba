package command

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/shoenig/test/must"
)

func TestEventStream_PrintsClaimTransitionsAndSkipsHeartbeats(t *testing.T) {
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		must.Eq(t, "/v1/event/stream", r.URL.Path)
		query = r.URL.RawQuery
		fmt.Fprintln(w, `{}`)
		fmt.Fprintln(w, `{"Index":12,"Events":[{"Topic":"CSIVolume","Type":"CSIVolumeRegistered","Key":"db","Namespace":"default","Index":12,"Payload":{"CSIVolume":{"ID":"db"}}}]}`)
		fmt.Fprintln(w, `{"Index":15,"Events":[{"Topic":"Claim","Type":"ClaimTransition","Key":"db","Namespace":"default","Index":15,"Payload":{"Claim":{"VolumeID":"db","AllocID":"1a2b3c4d-0000","NodeID":"9f8e7d6c-0000","From":"taken","To":"node-detached","Error":"unpublish: unavailable","Attempts":2}}}]}`)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("BERTH_ADDR", srv.URL)
	t.Setenv("BERTH_TOKEN", "")
	t.Setenv("BERTH_NAMESPACE", "")

	var out, errOut bytes.Buffer
	code := Run([]string{"event", "stream", "-topic", "CSIVolume", "-topic", "Claim:db", "-index", "7"}, &out, &errOut)
	must.Eq(t, 0, code, must.Sprint(errOut.String()))
	must.Eq(t, "12 CSIVolume CSIVolumeRegistered db\n"+
		"15 Claim ClaimTransition db: alloc 1a2b3c4d on node 9f8e7d6c: taken -> node-detached (attempt 2: unpublish: unavailable)\n", out.String())
	must.StrContains(t, query, "topic=CSIVolume&topic=Claim%3Adb")
	must.StrContains(t, query, "index=7")

	out.Reset()
	code = Run([]string{"event", "stream", "-json"}, &out, &errOut)
	must.Eq(t, 0, code)
	must.StrContains(t, out.String(), `{"Index":12,"Events":[{"Topic":"CSIVolume"`)
	must.StrNotContains(t, out.String(), "{}\n")
}

func TestEventStream_ServerErrorIsShown(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `unknown event topic "Volumes": want one of Job, ...`, http.StatusBadRequest)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("BERTH_ADDR", srv.URL)
	t.Setenv("BERTH_TOKEN", "")
	var out, errOut bytes.Buffer
	must.Eq(t, 1, Run([]string{"event", "stream", "-topic", "Volumes"}, &out, &errOut))
	must.StrContains(t, errOut.String(), `unknown event topic "Volumes"`)
}
