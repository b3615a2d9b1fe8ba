package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// TestHTTP_AgentMonitor: a monitor streams the agent's log lines at its
// own level (debug on an agent that logs nothing), framed or plain, and
// leaves out lines below its level.
func TestHTTP_AgentMonitor(t *testing.T) {
	cfg := DevConfig()
	cfg.Ports = &Ports{HTTP: intPtr(0), RPC: intPtr(0)}
	cfg.LogLevel = "OFF"
	cfg.Client = nil
	a, err := NewAgent(cfg, io.Discard)
	must.NoError(t, err)
	t.Cleanup(func() { a.Shutdown() })

	open := func(query string) (*http.Response, context.CancelFunc) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a.HTTPAddr()+"/v1/agent/monitor?"+query, nil)
		must.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		must.NoError(t, err)
		t.Cleanup(func() { cancel(); resp.Body.Close() })
		return resp, cancel
	}

	t.Run("plain at warn leaves out debug", func(t *testing.T) {
		resp, _ := open("log_level=warn&plain=true")
		must.Eq(t, http.StatusOK, resp.StatusCode)
		a.logger.Named("test").Debug("debug marker")
		a.logger.Named("test").Warn("warn marker", "n", 1)
		// Lines come in order: the debug one would be before the warn one.
		sc := bufio.NewScanner(resp.Body)
		for {
			must.True(t, sc.Scan(), must.Sprintf("the stream ended without the warn marker: %v", sc.Err()))
			line := sc.Text()
			must.StrNotContains(t, line, "debug marker")
			if strings.Contains(line, "warn marker") {
				must.StrContains(t, line, "agent.test")
				break
			}
		}
	})

	t.Run("framed at debug", func(t *testing.T) {
		resp, _ := open("log_level=debug")
		must.Eq(t, http.StatusOK, resp.StatusCode)
		a.logger.Named("test").Debug("framed marker")
		dec := json.NewDecoder(resp.Body)
		for {
			var f struct{ Data []byte }
			must.NoError(t, dec.Decode(&f))
			if strings.Contains(string(f.Data), "framed marker") {
				break
			}
		}
	})

	t.Run("bad level", func(t *testing.T) {
		resp, body := get(t, a, "/v1/agent/monitor?log_level=loud")
		must.Eq(t, http.StatusBadRequest, resp.StatusCode)
		must.StrContains(t, body, `invalid log_level "loud"`)
	})
}
