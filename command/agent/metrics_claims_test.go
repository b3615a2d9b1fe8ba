package agent

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	metrics "github.com/hashicorp/go-metrics"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/stream"
	"github.com/berth-io/berth/nomad/structs"
)

func TestHTTP_MetricsAfterAClaimCycle(t *testing.T) {
	a := newDevAgent(t)
	node := registerPluginNode(t, a, 1, "hostpath", true)
	registerVolume(t, a, apiVolume("cyc", "hostpath"))
	claimVolume(t, a, "cyc", "alloc-c", node.ID)
	// The release stops on a plugin error: a step the leader's watcher
	// leaves alone until an operator acts, so the numbers hold still.
	raftApply(t, a, structs.CSIVolumeClaimRequestType, &structs.CSIVolumeClaimBatchRequest{
		Claims: []*structs.CSIVolumeClaimUpdate{{Namespace: "default", VolumeID: "cyc",
			Claim: &structs.CSIVolumeClaim{AllocID: "alloc-c", Step: structs.CSIClaimNeedsOperator,
				BlockedStep: structs.CSIClaimTaken, LastError: "node unpublish: invalid argument"}}},
		Timestamp: time.Now().Add(-time.Minute).UnixNano()})
	sub := a.Server().Events().Subscribe(streamAll())
	defer sub.Close()

	_, body := do(t, a, http.MethodGet, "/v1/metrics?format=prometheus", nil)
	for _, want := range []string{
		`berth_csi_claims_by_mode{access_mode="single-node-writer",step="needs-operator"} 1` + "\n",
		`berth_csi_claim_unfinished_oldest_seconds{namespace="default",volume="cyc"} `,
		// registerPluginNode's controller is unhealthy and the plugin attaches.
		`berth_csi_volumes_schedulable{schedulable="false"} 1` + "\n",
		`berth_csi_volumes_schedulable{schedulable="true"} 0` + "\n",
		"berth_event_stream_subscribers 1\n",
		"# TYPE berth_event_stream_drops counter\n",
	} {
		must.StrContains(t, body, want)
	}
	// The claim has been unfinished for about the minute since its step.
	line := body[strings.Index(body, `berth_csi_claim_unfinished_oldest_seconds{namespace="default",volume="cyc"} `):]
	line = line[:strings.IndexByte(line, '\n')]
	age, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
	must.NoError(t, err)
	must.Between(t, 55, age, 3600)

	// Nomad's JSON is the default format.
	js, resp := decode[metricsSummary](t, a, http.MethodGet, "/v1/metrics", nil)
	must.StrHasPrefix(t, "application/json", resp.Header.Get("Content-Type"))
	found := false
	for _, g := range js.Gauges {
		if g.Name == "berth_csi_claims_by_mode" && g.Labels["step"] == "needs-operator" {
			found = true
			must.Eq(t, "single-node-writer", g.Labels["access_mode"])
			must.Eq(t, 1, g.Value)
		}
	}
	must.True(t, found, must.Sprintf("gauges: %+v", js.Gauges))
}

func TestMetricsRegistry_LatencyIsAHistogram(t *testing.T) {
	r := &metricsRegistry{series: map[string]*metricSeries{}}
	labels := []metrics.Label{{Name: "method", Value: "NodePublishVolume"}, {Name: "plugin", Value: "ebs"}}
	for _, v := range []float32{0.002, 0.003, 0.2, 45} {
		r.AddSampleWithLabels([]string{"berth", "csi", "rpc", "latency_seconds"}, v, labels)
	}
	var buf bytes.Buffer
	writeSeries(&buf, r.snapshot())
	out := buf.String()
	for _, want := range []string{
		"# TYPE berth_csi_rpc_latency_seconds histogram\n",
		`berth_csi_rpc_latency_seconds_bucket{method="NodePublishVolume",plugin="ebs",le="0.001"} 0` + "\n",
		`berth_csi_rpc_latency_seconds_bucket{method="NodePublishVolume",plugin="ebs",le="0.005"} 2` + "\n",
		`berth_csi_rpc_latency_seconds_bucket{method="NodePublishVolume",plugin="ebs",le="0.25"} 3` + "\n",
		`berth_csi_rpc_latency_seconds_bucket{method="NodePublishVolume",plugin="ebs",le="30"} 3` + "\n",
		`berth_csi_rpc_latency_seconds_bucket{method="NodePublishVolume",plugin="ebs",le="60"} 4` + "\n",
		`berth_csi_rpc_latency_seconds_bucket{method="NodePublishVolume",plugin="ebs",le="+Inf"} 4` + "\n",
		`berth_csi_rpc_latency_seconds_count{method="NodePublishVolume",plugin="ebs"} 4` + "\n",
	} {
		must.StrContains(t, out, want)
	}
}

func streamAll() stream.Request { return stream.Request{} }

// The leader's volume usage samples are gauges per volume and node; a
// figure the plugin did not report (-1) and a condition from a plugin
// without VOLUME_CONDITION have no series.
func TestHTTP_MetricsVolumeUsage(t *testing.T) {
	a := newDevAgent(t)
	n1 := registerPluginNode(t, a, 1, "hostpath", false)
	n2 := registerPluginNode(t, a, 2, "hostpath", false)
	registerVolume(t, a, apiVolume("db", "hostpath"))
	report := func(n *structs.Node, st *structs.CSIVolumeStats) {
		req := &structs.CSIVolumeStatsReportRequest{NodeID: n.ID, Samples: []*structs.CSIVolumeStatsSample{
			{Namespace: structs.DefaultNamespace, VolumeID: "db", Stats: st}}}
		req.AuthToken = n.SecretID
		must.NoError(t, a.Server().RPC(structs.MethodCSIVolumeReportStats, req, &structs.GenericResponse{}))
	}
	report(n1, &structs.CSIVolumeStats{UsedBytes: 300, AvailableBytes: 700, TotalBytes: 1000, UsedInodes: 3, AvailableInodes: 97,
		Condition: &structs.CSIVolumeCondition{Abnormal: true, Message: "I/O errors"}, SampledAt: 1})
	report(n2, &structs.CSIVolumeStats{UsedBytes: 5, AvailableBytes: -1, TotalBytes: -1, UsedInodes: -1, AvailableInodes: -1, SampledAt: 1})

	_, body := do(t, a, http.MethodGet, "/v1/metrics?format=prometheus", nil)
	l1 := `{namespace="default",node="` + n1.ID + `",volume="db"} `
	l2 := `{namespace="default",node="` + n2.ID + `",volume="db"} `
	for _, want := range []string{
		"berth_csi_volume_used_bytes" + l1 + "300\n",
		"berth_csi_volume_used_bytes" + l2 + "5\n",
		"berth_csi_volume_available_bytes" + l1 + "700\n",
		"berth_csi_volume_capacity_bytes" + l1 + "1000\n",
		"berth_csi_volume_inodes_used" + l1 + "3\n",
		"berth_csi_volume_inodes_available" + l1 + "97\n",
		"berth_csi_volume_condition_abnormal" + l1 + "1\n",
	} {
		must.StrContains(t, body, want)
	}
	for _, absent := range []string{"berth_csi_volume_capacity_bytes" + l2, "berth_csi_volume_inodes_used" + l2, "berth_csi_volume_condition_abnormal" + l2} {
		must.StrNotContains(t, body, absent)
	}
}
