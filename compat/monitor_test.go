package compat

import (
	"strings"
	"testing"
	"time"

	nomad "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"
)

// TestCompat_AgentMonitor: the upstream client's Agent().Monitor decodes
// Berth's monitor frames; registering a job makes the agent log.
func TestCompat_AgentMonitor(t *testing.T) {
	_, client := testAgent(t)
	stop := make(chan struct{})
	defer close(stop)
	frames, errCh := client.Agent().Monitor(stop, &nomad.QueryOptions{Params: map[string]string{"log_level": "debug"}})
	select {
	case err := <-errCh:
		t.Fatalf("monitor: %v", err)
	default:
	}
	_, _, err := client.Jobs().Register(sleepJob("zqxj", 1), nil)
	must.NoError(t, err)
	timeout := time.After(time.Minute)
	var seen strings.Builder
	for {
		select {
		case f := <-frames:
			if f == nil {
				t.Fatalf("the stream ended; it held:\n%s", seen.String())
			}
			seen.Write(f.Data)
			if strings.Contains(seen.String(), "zqxj") {
				return
			}
		case err := <-errCh:
			t.Fatalf("monitor: %v", err)
		case <-timeout:
			t.Fatalf("no log line naming the job within a minute; saw:\n%s", seen.String())
		}
	}
}
