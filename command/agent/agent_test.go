package agent

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/testutil"
)

// newDevAgent starts a -dev agent on free ports.
func newDevAgent(t testing.TB) *Agent {
	t.Helper()
	cfg := DevConfig()
	cfg.Ports = &Ports{HTTP: intPtr(0), RPC: intPtr(0)}
	cfg.LogLevel = "OFF"
	a, err := NewAgent(cfg, io.Discard)
	must.NoError(t, err)
	t.Cleanup(func() { a.Shutdown() })
	testutil.WaitForResult(t, func() (bool, error) {
		return a.Server().Leader() != "", nil
	})
	return a
}

func get(t *testing.T, a *Agent, path string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get("http://" + a.HTTPAddr() + path)
	must.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must.NoError(t, err)
	return resp, string(b)
}

func TestHTTP_StatusEndpoints(t *testing.T) {
	a := newDevAgent(t)

	resp, body := get(t, a, "/v1/status/leader")
	must.Eq(t, http.StatusOK, resp.StatusCode)
	var leader string
	must.NoError(t, json.Unmarshal([]byte(body), &leader))
	must.Eq(t, a.Server().RPCAddr(), leader)

	resp, body = get(t, a, "/v1/status/peers")
	must.Eq(t, http.StatusOK, resp.StatusCode)
	var peers []string
	must.NoError(t, json.Unmarshal([]byte(body), &peers))
	must.Eq(t, []string{a.Server().RPCAddr()}, peers)

	resp, body = get(t, a, "/v1/agent/health")
	must.Eq(t, http.StatusOK, resp.StatusCode)
	must.StrContains(t, body, `"server":{"ok":true,"message":"ok"}`)

	resp, body = get(t, a, "/v1/operator/raft/configuration?pretty")
	must.Eq(t, http.StatusOK, resp.StatusCode)
	must.StrContains(t, body, "\n    \"Servers\"")
	must.StrContains(t, body, `"Leader": true`)
}

func TestHTTP_Errors(t *testing.T) {
	a := newDevAgent(t)
	resp, body := get(t, a, "/v1/no/such/thing")
	must.Eq(t, http.StatusNotFound, resp.StatusCode)
	must.Eq(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
	must.StrContains(t, body, "/v1/no/such/thing")

	req, _ := http.NewRequest(http.MethodPost, "http://"+a.HTTPAddr()+"/v1/status/leader", strings.NewReader(""))
	r, err := http.DefaultClient.Do(req)
	must.NoError(t, err)
	r.Body.Close()
	must.Eq(t, http.StatusMethodNotAllowed, r.StatusCode)

	req, _ = http.NewRequest(http.MethodDelete, "http://"+a.HTTPAddr()+"/v1/operator/raft/peer?id=nope", nil)
	r, err = http.DefaultClient.Do(req)
	must.NoError(t, err)
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	must.Eq(t, http.StatusNotFound, r.StatusCode)
	must.StrContains(t, string(b), `no raft peer with id "nope"`)
}

// TestAgent_ShutdownCutsBlockingQueries: an open blocking query (a CLI
// monitor, a UI) must not hold an agent's shutdown for its whole wait.
func TestAgent_ShutdownCutsBlockingQueries(t *testing.T) {
	a := newDevAgent(t)
	started := make(chan struct{})
	go func() {
		close(started)
		resp, err := http.Get("http://" + a.HTTPAddr() + "/v1/jobs?index=1000000&wait=5m")
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-started
	testutil.WaitForResult(t, func() (bool, error) {
		// The query is in flight once the server has been asked for it;
		// give it a moment by probing the API until it answers.
		resp, err := http.Get("http://" + a.HTTPAddr() + "/v1/status/leader")
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return true, nil
	})
	done := make(chan error, 1)
	go func() { done <- a.Shutdown() }()
	// Well under the 5m wait and the 10s overall shutdown bound.
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("agent shutdown is waiting on an open blocking query")
	}
}
