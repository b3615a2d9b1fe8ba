package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

// eventReader reads an event stream line by line.
type eventReader struct {
	t    *testing.T
	resp *http.Response
	sc   *bufio.Scanner
}

func openEvents(t *testing.T, a *Agent, query string) *eventReader {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a.HTTPAddr()+"/v1/event/stream?"+query, nil)
	must.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	must.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	must.Eq(t, http.StatusOK, resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	return &eventReader{t: t, resp: resp, sc: sc}
}

// next returns the next line, decoded; a heartbeat decodes to Index 0.
func (r *eventReader) next() apiEvents {
	r.t.Helper()
	must.True(r.t, r.sc.Scan(), must.Sprintf("stream ended: %v", r.sc.Err()))
	var out apiEvents
	must.NoError(r.t, json.Unmarshal(r.sc.Bytes(), &out), must.Sprint(r.sc.Text()))
	return out
}

// nextEvents skips heartbeats.
func (r *eventReader) nextEvents() apiEvents {
	r.t.Helper()
	for {
		if b := r.next(); b.Index != 0 {
			return b
		}
	}
}

func TestHTTP_EventStream_VolumeRegisterAndClaims(t *testing.T) {
	a := newDevAgent(t)
	node := registerPluginNode(t, a, 1, "hostpath", true)
	vols := openEvents(t, a, "topic=CSIVolume&topic=Claim")
	jobs := openEvents(t, a, "topic=Job:job-a1")

	idx := registerVolume(t, a, apiVolume("vol-1", "hostpath"))
	b := vols.nextEvents()
	must.Eq(t, idx, b.Index)
	must.Eq(t, "CSIVolume", b.Events[0].Topic)
	must.Eq(t, "CSIVolumeRegistered", b.Events[0].Type)
	must.Eq(t, "vol-1", b.Events[0].Key)
	must.MapContainsKey(t, b.Events[0].Payload, "CSIVolume")

	claimVolume(t, a, "vol-1", "a1", node.ID)
	b = vols.nextEvents()
	must.Len(t, 2, b.Events)
	must.Eq(t, "CSIVolumeClaim", b.Events[0].Type)
	must.Eq(t, "Claim", b.Events[1].Topic)
	claim := b.Events[1].Payload["Claim"].(map[string]any)
	must.Eq(t, "a1", claim["AllocID"])
	must.Eq(t, "", claim["From"])
	must.Eq(t, "taken", claim["To"])
	must.Eq[any](t, node.ID, claim["NodeID"])

	// The job filter saw only its job (the plugin node's registration and
	// the volume are not Job events).
	jb := jobs.nextEvents()
	must.Eq(t, "Job", jb.Events[0].Topic)
	must.Eq(t, "job-a1", jb.Events[0].Key)

	// Resume from an index: the same claim batch again.
	resumed := openEvents(t, a, "topic=Claim&index="+strconv.FormatUint(idx, 10))
	rb := resumed.nextEvents()
	must.Eq(t, b.Index, rb.Index)
	must.Eq(t, "Claim", rb.Events[0].Topic)
}

func TestHTTP_EventStream_HeartbeatAndBadInput(t *testing.T) {
	old := eventHeartbeat
	eventHeartbeat = 20 * time.Millisecond
	t.Cleanup(func() { eventHeartbeat = old })
	a := newDevAgent(t)

	r := openEvents(t, a, "topic=Deployment")
	must.Eq(t, "{}", func() string { must.True(t, r.sc.Scan()); return r.sc.Text() }())

	resp, body := do(t, a, http.MethodGet, "/v1/event/stream?topic=Volumes", nil)
	must.Eq(t, http.StatusBadRequest, resp.StatusCode)
	must.StrContains(t, body, `unknown event topic "Volumes"`)
	must.StrContains(t, body, "CSIVolume")
	resp, _ = do(t, a, http.MethodGet, "/v1/event/stream?index=x", nil)
	must.Eq(t, http.StatusBadRequest, resp.StatusCode)
}

func TestHTTP_EventStream_NodePayloadHasNoSecret(t *testing.T) {
	a := newDevAgent(t)
	r := openEvents(t, a, "topic=Node")
	node := registerPluginNode(t, a, 7, "hostpath", false)
	var b apiEvents
	for b.Index == 0 || b.Events[0].Key != node.ID { // the dev agent's own node may come first
		b = r.nextEvents()
	}
	must.Eq(t, "Node", b.Events[0].Topic)
	raw, err := json.Marshal(b)
	must.NoError(t, err)
	must.StrNotContains(t, string(raw), node.SecretID)
	must.StrContains(t, string(raw), node.ID)
}

func TestHTTP_EventStream_ACLs(t *testing.T) {
	a, _ := newACLAgent(t)
	boot, _, err := apiClient(t, a, "").ACLTokens().Bootstrap(nil)
	must.NoError(t, err)
	mgmt := apiClient(t, a, boot.SecretID)
	_, err = mgmt.ACLPolicies().Upsert(&api.ACLPolicy{Name: "vols",
		Rules: `namespace "default" { capabilities = ["csi-read-volume"] }`}, nil)
	must.NoError(t, err)
	tok, _, err := mgmt.ACLTokens().Create(&api.ACLToken{Name: "vols", Type: "client", Policies: []string{"vols"}}, nil)
	must.NoError(t, err)

	status := func(token, query string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, "http://"+a.HTTPAddr()+"/v1/event/stream?"+query, nil)
		must.NoError(t, err)
		req.Header.Set("X-Nomad-Token", token)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		must.NoError(t, err)
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		return resp.StatusCode, ""
	}
	code, _ := status(tok.SecretID, "topic=CSIVolume&topic=Claim")
	must.Eq(t, http.StatusOK, code)
	code, body := status(tok.SecretID, "topic=Job")
	must.Eq(t, http.StatusForbidden, code)
	must.StrContains(t, body, "read-job")
	code, _ = status(tok.SecretID, "topic=Node")
	must.Eq(t, http.StatusForbidden, code)
	code, _ = status(tok.SecretID, "topic=CSIVolume&namespace=prod")
	must.Eq(t, http.StatusForbidden, code)
	// Every namespace at once: management only.
	code, _ = status(tok.SecretID, "topic=CSIVolume&namespace=*")
	must.Eq(t, http.StatusForbidden, code)
	code, _ = status(boot.SecretID, "namespace=*")
	must.Eq(t, http.StatusOK, code)
	code, _ = status("", "topic=CSIVolume")
	must.Eq(t, http.StatusForbidden, code)
}
