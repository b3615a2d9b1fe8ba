package agent

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/testutil"
)

// TestHTTP_AllocACLs: alloc stop, restart and signal need alloc-lifecycle,
// alloc fs read-fs, exec alloc-exec (alloc-node-exec for a raw_exec task,
// which runs on the host) and monitor agent read; each refusal names what
// is missing.
func TestHTTP_AllocACLs(t *testing.T) {
	a, _ := newACLAgent(t)
	boot, _, err := apiClient(t, a, "").ACLTokens().Bootstrap(nil)
	must.NoError(t, err)
	mgmt := apiClient(t, a, boot.SecretID)
	token := func(name string, caps ...string) string {
		rules := fmt.Sprintf("namespace \"default\" {\n  capabilities = [\"%s\"]\n}\n", strings.Join(caps, `", "`))
		_, err := mgmt.ACLPolicies().Upsert(&api.ACLPolicy{Name: name, Rules: rules}, nil)
		must.NoError(t, err)
		tok, _, err := mgmt.ACLTokens().Create(&api.ACLToken{Name: name, Type: "client", Policies: []string{name}}, nil)
		must.NoError(t, err)
		return tok.SecretID
	}
	reader := token("reader", "read-job")
	ops := token("ops", "read-job", "alloc-lifecycle", "read-fs", "alloc-node-exec")
	execer := token("execer", "read-job", "alloc-exec")

	id, typ, name := "guarded", "service", "g"
	job := &api.Job{ID: &id, Type: &typ, TaskGroups: []*api.TaskGroup{{Name: &name, Tasks: []*api.Task{{
		Name: "t", Driver: "raw_exec", Config: map[string]any{"command": "/bin/sleep", "args": []string{"300"}},
	}}}}}
	_, _, err = mgmt.Jobs().Register(job, nil)
	must.NoError(t, err)
	var allocID string
	testutil.WaitForResult(t, func() (bool, error) {
		allocs, _, err := mgmt.Jobs().Allocations(id, false, nil)
		if err != nil {
			return false, err
		}
		for _, s := range allocs {
			if s.ClientStatus == api.AllocClientStatusRunning {
				allocID = s.ID
				return true, nil
			}
		}
		return false, errors.New("no running alloc yet")
	})

	forbidden := func(err error, missing string) {
		t.Helper()
		var se *api.StatusError
		must.True(t, errors.As(err, &se), must.Sprintf("want 403, got %v", err))
		must.Eq(t, http.StatusForbidden, se.Code)
		must.StrContains(t, se.Body, missing)
	}
	forbidden(apiClient(t, a, reader).Allocations().Signal(allocID, "t", "SIGWINCH", nil), "alloc-lifecycle")
	forbidden(apiClient(t, a, reader).Allocations().Restart(allocID, "t", nil), "alloc-lifecycle")
	_, err = apiClient(t, a, reader).Allocations().Stop(allocID, nil)
	forbidden(err, "alloc-lifecycle")
	must.NoError(t, apiClient(t, a, ops).Allocations().Signal(allocID, "t", "SIGWINCH", nil))

	fs := func(tok string) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+a.HTTPAddr()+"/v1/client/fs/ls/"+allocID+"?path=/", nil)
		req.Header.Set("X-Nomad-Token", tok)
		resp, err := http.DefaultClient.Do(req)
		must.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	must.Eq(t, http.StatusForbidden, fs(reader))
	must.Eq(t, http.StatusOK, fs(ops))

	exec := func(tok string) (int, error) {
		u := url.URL{Scheme: "ws", Host: a.HTTPAddr(), Path: "/v1/client/allocation/" + allocID + "/exec",
			RawQuery: url.Values{"task": {"t"}, "command": {`["/bin/true"]`}}.Encode()}
		conn, resp, err := websocket.DefaultDialer.Dial(u.String(), http.Header{"X-Nomad-Token": {tok}})
		if conn != nil {
			conn.Close()
		}
		if resp == nil {
			return 0, err
		}
		return resp.StatusCode, nil
	}
	code, err := exec(execer)
	must.NoError(t, err)
	must.Eq(t, http.StatusForbidden, code, must.Sprint("alloc-exec is not enough for a raw_exec task"))
	code, err = exec(ops)
	must.NoError(t, err)
	must.Eq(t, http.StatusSwitchingProtocols, code)

	resp, _ := get(t, a, "/v1/agent/monitor?log_level=info")
	must.Eq(t, http.StatusForbidden, resp.StatusCode)
}
