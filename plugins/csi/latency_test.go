package csi

import (
	"testing"

	"github.com/shoenig/test/must"
)

func TestClient_RecordsLatencyPerAttemptByMethodAndPlugin(t *testing.T) {
	h := newHarness(t, WithPluginID("ebs"))
	samples := &counterRecorder{}
	h.client.addSample = samples.incr // counts samples by key and labels

	_, err := h.client.Probe(testCtx(t))
	must.NoError(t, err)
	_, _, err = h.client.PluginInfo(testCtx(t))
	must.NoError(t, err)

	samples.mu.Lock()
	defer samples.mu.Unlock()
	must.Eq(t, map[string]float32{
		"csi.rpc.latency_seconds;method=Probe;plugin=ebs":         1,
		"csi.rpc.latency_seconds;method=GetPluginInfo;plugin=ebs": 1,
	}, func() map[string]float32 {
		// Each sample adds its latency, not 1: count the keys instead.
		out := map[string]float32{}
		for k := range samples.counts {
			out[k] = 1
		}
		return out
	}())
}
