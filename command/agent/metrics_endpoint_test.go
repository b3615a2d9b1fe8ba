package agent

import (
	"bytes"
	"net/http"
	"regexp"
	"strings"
	"testing"

	metrics "github.com/hashicorp/go-metrics"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

func TestHTTP_Metrics(t *testing.T) {
	a := newDevAgent(t)
	node := registerPluginNode(t, a, 1, "hostpath", true)
	registerVolume(t, a, apiVolume("v", "hostpath"))
	claimVolume(t, a, "v", "alloc-1", node.ID)
	decode[[]*api.CSIVolumeListStub](t, a, http.MethodGet, "/v1/volumes?type=csi", nil)

	resp, body := do(t, a, http.MethodGet, "/v1/metrics?format=prometheus", nil)
	must.Eq(t, http.StatusOK, resp.StatusCode)
	must.StrHasPrefix(t, "text/plain; version=0.0.4", resp.Header.Get("Content-Type"))
	for _, want := range []string{
		"# TYPE berth_rpc_request summary\n",
		`berth_rpc_request_count{method="CSIVolume.List"} `,
		// The registry is per process: other tests' agents count too.
		`berth_rpc_request_count{method="CSIVolume.Register"} `,
		"# TYPE berth_raft_apply counter\n", // Raft's own metrics, through the global sink
		"berth_raft_commit_index ",
		"berth_server_is_leader 1\n",
		`berth_csi_volumes{state="ready"} 1` + "\n",
		`berth_csi_claims{step="taken"} 1` + "\n",
		`berth_csi_claims{step="node-detached"} 0` + "\n",
		`berth_csi_plugin_healthy{plugin_id="hostpath",type="controller"} 0` + "\n",
		`berth_csi_plugin_expected{plugin_id="hostpath",type="node"} 1` + "\n",
		"berth_runtime_goroutines ",
	} {
		must.StrContains(t, body, want)
	}
	// Every line is a comment or "name{labels} value".
	line := regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? [-+0-9.eEInfNa]+$`)
	for _, l := range strings.Split(strings.TrimSpace(body), "\n") {
		if !strings.HasPrefix(l, "#") {
			must.True(t, line.MatchString(l), must.Sprintf("bad line %q", l))
		}
	}

	resp, _ = do(t, a, http.MethodGet, "/v1/metrics?format=json", nil)
	must.Eq(t, http.StatusOK, resp.StatusCode)
	resp, _ = do(t, a, http.MethodGet, "/v1/metrics?format=xml", nil)
	must.Eq(t, http.StatusBadRequest, resp.StatusCode)
	resp, _ = do(t, a, http.MethodPost, "/v1/metrics", nil)
	must.Eq(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// A sample of a series already seen costs one map lookup: no allocation
// (rendering its Prometheus name and labels made a dozen), and it still
// lands in the series of its rendered name and labels, histogram included.
func TestMetricsRegistry_SeenSeriesDoesNotAllocate(t *testing.T) {
	r := &metricsRegistry{series: map[string]*metricSeries{}}
	key := []string{"berth", "csi", "rpc_latency_seconds"}
	labels := []metrics.Label{{Name: "method", Value: "NodePublishVolume"}, {Name: "plugin", Value: "hostpath"}}
	r.AddSampleWithLabels(key, 0.002, labels)
	allocs := testing.AllocsPerRun(100, func() {
		r.AddSampleWithLabels(key, 0.002, labels)
		r.IncrCounterWithLabels([]string{"berth", "rpc", "request"}, 1, labels)
	})
	must.Eq(t, 0, allocs)
	snap := r.snapshot()
	must.SliceLen(t, 2, snap)
	var hist metricSeries
	for _, s := range snap {
		if s.kind == kindHistogram {
			hist = s
		}
	}
	must.Eq(t, "berth_csi_rpc_latency_seconds", hist.name)
	must.Eq(t, 102, hist.count)
	must.Eq(t, 102, hist.buckets[1]) // le 0.005
}

func TestMetricsRegistry(t *testing.T) {
	r := &metricsRegistry{series: map[string]*metricSeries{}}
	r.IncrCounter([]string{"berth", "x.y"}, 1)
	r.IncrCounter([]string{"berth", "x.y"}, 2)
	r.AddSampleWithLabels([]string{"berth", "lat"}, 1.5, []metrics.Label{{Name: "b", Value: `q"uote`}, {Name: "a", Value: "1"}})
	r.AddSampleWithLabels([]string{"berth", "lat"}, 2.5, []metrics.Label{{Name: "a", Value: "1"}, {Name: "b", Value: `q"uote`}})
	r.SetGauge([]string{"berth", "g"}, 7)
	r.SetGauge([]string{"berth", "g"}, 3)
	var buf bytes.Buffer
	writeSeries(&buf, r.snapshot())
	must.Eq(t, strings.Join([]string{
		"# TYPE berth_g gauge",
		"berth_g 3",
		"# TYPE berth_lat summary",
		`berth_lat_sum{a="1",b="q\"uote"} 4`,
		`berth_lat_count{a="1",b="q\"uote"} 2`,
		"# TYPE berth_x_y counter",
		"berth_x_y 3",
		"",
	}, "\n"), buf.String())
}
