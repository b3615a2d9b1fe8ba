package agent

import (
	"net/http"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

func TestHTTP_AgentSelf(t *testing.T) {
	a := newDevAgent(t)
	self, _ := decode[api.AgentSelf](t, a, http.MethodGet, "/v1/agent/self", nil)
	must.Eq(t, "global", self.Config["Region"])
	must.Eq(t, true, self.Config["DevMode"])
	must.Eq(t, "alive", self.Member.Status)
	must.Eq(t, "nomad", self.Member.Tags["role"])
	must.Eq(t, "127.0.0.1", self.Member.Addr)
	must.Positive(t, self.Member.Port)
	must.Eq(t, "true", self.Stats["nomad"]["leader"])
	must.Eq(t, "Leader", self.Stats["raft"]["state"])

	_, body := do(t, a, http.MethodGet, "/v1/agent/self", nil)
	must.StrContains(t, body, `"config":{`)
	must.StrContains(t, body, `"member":{`)
	resp, _ := do(t, a, http.MethodPut, "/v1/agent/self", nil)
	must.Eq(t, http.StatusMethodNotAllowed, resp.StatusCode)
}
