package agent

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	metrics "github.com/hashicorp/go-metrics"

	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/nomad/structs"
)

// /v1/metrics serves Prometheus text format (version 0.0.4). It has two
// sources:
//
//   - everything emitted through go-metrics' global sink, which
//     installMetrics points at a small cumulative registry: Raft's own
//     metrics (berth_raft_*), the latency summary of every server
//     endpoint (berth_rpc_request{method=...}, milliseconds), CSI client
//     retries;
//   - gauges computed from the local state store at scrape time: CSI
//     volumes by state, live claims by step, plugin health, Raft indexes,
//     and a few Go runtime numbers.

// metricsRegistry is a go-metrics sink that keeps counters and samples
// cumulatively, as Prometheus expects (go-metrics' inmem sink keeps
// intervals). Samples become summaries without quantiles: _sum and _count.
type metricsRegistry struct {
	// mu guards series and byKey.
	mu     sync.Mutex
	series map[string]*metricSeries
	// byKey finds a series from go-metrics' key and labels as given (see
	// seriesKey) in one map lookup that does not allocate. Rendering the
	// Prometheus name and labels that series is keyed by cost microseconds
	// and a dozen allocations per sample, and every RPC and Raft apply
	// emits several samples: ~8% of the CPU of a volume register.
	byKey map[string]*metricSeries
}

type metricKind int

const (
	kindGauge metricKind = iota
	kindCounter
	kindSummary
	kindHistogram
)

func (k metricKind) String() string {
	return [...]string{"gauge", "counter", "summary", "histogram"}[k]
}

// histogramBuckets are the upper bounds (le) of the samples served as
// Prometheus histograms instead of summaries, by metric name.
var histogramBuckets = map[string][]float64{
	// One CSI call attempt, in seconds: a bind mount is sub-millisecond,
	// a cloud attach takes seconds to a minute.
	"berth_csi_rpc_latency_seconds": {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
}

type metricSeries struct {
	kind   metricKind
	name   string
	labels string // rendered, e.g. {method="Job.Register"}, or ""
	// labelMap is the same labels, for the JSON format.
	labelMap map[string]string
	value    float64
	sum      float64
	count    uint64
	// buckets counts samples <= histogramBuckets[name][i] (not cumulative).
	buckets []uint64
}

var _ metrics.MetricSink = (*metricsRegistry)(nil)

var (
	metricsOnce sync.Once
	registry    = &metricsRegistry{series: map[string]*metricSeries{}}
)

// installMetrics points go-metrics' process-wide sink at the registry,
// once per process. Keys get the "berth" prefix; there is no hostname
// label and no background runtime poller (runtime numbers are read at
// scrape time instead).
func installMetrics() {
	metricsOnce.Do(func() {
		conf := metrics.DefaultConfig("berth")
		conf.EnableHostname = false
		conf.EnableHostnameLabel = false
		conf.EnableRuntimeMetrics = false
		_, _ = metrics.NewGlobal(conf, registry)
	})
}

func (m *metricsRegistry) update(kind metricKind, key []string, labels []metrics.Label, f func(s *metricSeries)) {
	var stack [256]byte
	ck := seriesKey(stack[:0], kind, key, labels)
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.byKey[string(ck)]
	if s == nil {
		s = m.seriesLocked(kind, key, labels)
		if m.byKey == nil {
			m.byKey = map[string]*metricSeries{}
		}
		m.byKey[string(ck)] = s
	}
	f(s)
}

// seriesLocked finds or makes the series of kind, key and labels by its
// Prometheus name and labels. A sample (kindSummary) of a name with
// histogramBuckets is a histogram.
func (m *metricsRegistry) seriesLocked(kind metricKind, key []string, labels []metrics.Label) *metricSeries {
	name := promName(strings.Join(key, "_"))
	if _, hist := histogramBuckets[name]; hist && kind == kindSummary {
		kind = kindHistogram
	}
	ls := promLabels(labels)
	id := name + ls
	s := m.series[id]
	if s == nil || s.kind != kind {
		s = &metricSeries{kind: kind, name: name, labels: ls, labelMap: labelMap(labels)}
		m.series[id] = s
	}
	return s
}

// seriesKey appends the kind, key and labels, as given, to buf: the key of
// byKey. The separators are bytes a key or label never holds.
func seriesKey(buf []byte, kind metricKind, key []string, labels []metrics.Label) []byte {
	buf = append(buf, byte(kind))
	for _, k := range key {
		buf = append(append(buf, k...), 0)
	}
	for _, l := range labels {
		buf = append(append(append(append(buf, 1), l.Name...), 2), l.Value...)
	}
	return buf
}

func (m *metricsRegistry) SetGauge(key []string, val float32) { m.SetGaugeWithLabels(key, val, nil) }
func (m *metricsRegistry) SetGaugeWithLabels(key []string, val float32, labels []metrics.Label) {
	m.update(kindGauge, key, labels, func(s *metricSeries) { s.value = float64(val) })
}
func (m *metricsRegistry) SetPrecisionGauge(key []string, val float64) {
	m.SetPrecisionGaugeWithLabels(key, val, nil)
}
func (m *metricsRegistry) SetPrecisionGaugeWithLabels(key []string, val float64, labels []metrics.Label) {
	m.update(kindGauge, key, labels, func(s *metricSeries) { s.value = val })
}
func (m *metricsRegistry) EmitKey(key []string, val float32) { m.SetGauge(key, val) }
func (m *metricsRegistry) IncrCounter(key []string, val float32) {
	m.IncrCounterWithLabels(key, val, nil)
}
func (m *metricsRegistry) IncrCounterWithLabels(key []string, val float32, labels []metrics.Label) {
	m.update(kindCounter, key, labels, func(s *metricSeries) { s.value += float64(val) })
}
func (m *metricsRegistry) AddSample(key []string, val float32) { m.AddSampleWithLabels(key, val, nil) }
func (m *metricsRegistry) AddSampleWithLabels(key []string, val float32, labels []metrics.Label) {
	m.update(kindSummary, key, labels, func(s *metricSeries) {
		bounds, hist := histogramBuckets[s.name]
		s.sum += float64(val)
		s.count++
		if hist {
			if s.buckets == nil {
				s.buckets = make([]uint64, len(bounds))
			}
			for i, b := range bounds {
				if float64(val) <= b {
					s.buckets[i]++
					break
				}
			}
		}
	})
}

// snapshot copies the series, so rendering does not hold the lock.
func (m *metricsRegistry) snapshot() []metricSeries {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]metricSeries, 0, len(m.series))
	for _, id := range slices.Sorted(maps.Keys(m.series)) {
		s := *m.series[id]
		s.buckets = slices.Clone(s.buckets)
		out = append(out, s)
	}
	return out
}

// promName maps a metric key to a Prometheus name: [a-zA-Z0-9_:], not
// starting with a digit.
func promName(s string) string {
	b := []byte(s)
	for i, c := range b {
		ok := c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9' && i > 0)
		if !ok {
			b[i] = '_'
		}
	}
	return string(b)
}

func promLabels(labels []metrics.Label) string {
	if len(labels) == 0 {
		return ""
	}
	sorted := slices.Clone(labels)
	slices.SortFunc(sorted, func(a, b metrics.Label) int { return strings.Compare(a.Name, b.Name) })
	parts := make([]string, 0, len(sorted))
	for _, l := range sorted {
		v := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(l.Value)
		parts = append(parts, fmt.Sprintf(`%s="%s"`, promName(l.Name), v))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func formatFloat(v float64) string {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// writeSeries renders series in Prometheus text format, one TYPE line per
// metric name. Series with one name must be adjacent.
func writeSeries(buf *bytes.Buffer, series []metricSeries) {
	typed := map[string]bool{}
	for _, s := range series {
		if !typed[s.name] {
			typed[s.name] = true
			fmt.Fprintf(buf, "# TYPE %s %s\n", s.name, s.kind)
		}
		switch s.kind {
		case kindHistogram:
			var cum uint64
			for i, b := range histogramBuckets[s.name] {
				if i < len(s.buckets) {
					cum += s.buckets[i]
				}
				fmt.Fprintf(buf, "%s_bucket%s %d\n", s.name, withLabel(s.labels, "le", formatFloat(b)), cum)
			}
			fmt.Fprintf(buf, "%s_bucket%s %d\n", s.name, withLabel(s.labels, "le", "+Inf"), s.count)
			fmt.Fprintf(buf, "%s_sum%s %s\n", s.name, s.labels, formatFloat(s.sum))
			fmt.Fprintf(buf, "%s_count%s %d\n", s.name, s.labels, s.count)
		case kindSummary:
			fmt.Fprintf(buf, "%s_sum%s %s\n", s.name, s.labels, formatFloat(s.sum))
			fmt.Fprintf(buf, "%s_count%s %d\n", s.name, s.labels, s.count)
		default:
			fmt.Fprintf(buf, "%s%s %s\n", s.name, s.labels, formatFloat(s.value))
		}
	}
}

// withLabel adds name="value" to rendered labels.
func withLabel(labels, name, value string) string {
	l := fmt.Sprintf(`%s="%s"`, name, value)
	if labels == "" {
		return "{" + l + "}"
	}
	return strings.TrimSuffix(labels, "}") + "," + l + "}"
}

func (s *HTTPServer) metricsRequest(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	f := r.URL.Query().Get("format")
	if f != "" && f != "prometheus" && f != "json" {
		return nil, CodedError(http.StatusBadRequest, fmt.Sprintf("unsupported metrics format %q: want prometheus, or none for JSON", f))
	}
	scraped, err := s.scrapeGauges()
	if err != nil {
		return nil, err
	}
	if f != "prometheus" {
		return metricsJSON(append(registry.snapshot(), scraped...)), nil
	}
	var buf bytes.Buffer
	writeSeries(&buf, registry.snapshot())
	writeSeries(&buf, scraped)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write(buf.Bytes())
	return nil, nil
}

// scrapeGauges computes the gauges read at scrape time. The CSI numbers
// come from this server's own state, which a follower may hold slightly
// behind the leader.
func (s *HTTPServer) scrapeGauges() ([]metricSeries, error) {
	gauge := func(name string, v float64, labels ...metrics.Label) metricSeries {
		return metricSeries{kind: kindGauge, name: name, labels: promLabels(labels), labelMap: labelMap(labels), value: v}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	out := []metricSeries{
		gauge("berth_runtime_goroutines", float64(runtime.NumGoroutine())),
		gauge("berth_runtime_heap_alloc_bytes", float64(ms.HeapAlloc)),
	}
	srv := s.agent.Server()
	if srv == nil {
		return out, nil
	}
	stats := srv.Raft().Stats()
	for _, k := range []string{"commit_index", "applied_index", "last_log_index", "num_peers"} {
		if v, err := strconv.ParseFloat(stats[k], 64); err == nil {
			out = append(out, gauge("berth_raft_"+k, v))
		}
	}
	leader := 0.0
	if srv.IsLeader() {
		leader = 1
	}
	out = append(out, gauge("berth_server_is_leader", leader))

	out = append(out, gauge("berth_event_stream_subscribers", float64(srv.Events().Subscribers())),
		metricSeries{kind: kindCounter, name: "berth_event_stream_drops", value: float64(srv.Events().Drops())})

	store := srv.State()
	health := map[string]pluginHealth{}
	hiter, err := store.CSIPlugins(nil)
	if err != nil {
		return nil, err
	}
	for raw := hiter.Next(); raw != nil; raw = hiter.Next() {
		p := raw.(*structs.CSIPlugin)
		health[p.ID] = healthOfPlugin(p.Stub())
	}
	now := time.Now()
	schedulable := map[string]float64{"true": 0, "false": 0}
	byMode := map[[2]string]float64{}
	var oldest []metricSeries
	iter, err := store.CSIVolumes(nil, structs.AllNamespaces)
	if err != nil {
		return nil, err
	}
	volumes := map[string]float64{}
	claims := map[string]float64{}
	for _, step := range []structs.CSIClaimStep{structs.CSIClaimReserved, structs.CSIClaimTaken, structs.CSIClaimNodeDetached, structs.CSIClaimControllerDetached} {
		claims[string(step)] = 0
	}
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		v := raw.(*structs.CSIVolume)
		st := string(v.State)
		if st == "" {
			st = string(structs.CSIVolumeStateReady)
		}
		volumes[st]++
		schedulable[strconv.FormatBool(health[v.PluginID].schedulable(v.State))]++
		var since int64
		for _, c := range v.Claims {
			claims[string(c.Step)]++
			byMode[[2]string{string(c.Step), string(c.AccessMode)}]++
			if c.Step != structs.CSIClaimTaken {
				if t := stepSince(c); since == 0 || t < since {
					since = t
				}
			}
		}
		if since != 0 {
			oldest = append(oldest, gauge("berth_csi_claim_unfinished_oldest_seconds", max(0, now.Sub(time.Unix(0, since)).Seconds()),
				metrics.Label{Name: "namespace", Value: v.Namespace}, metrics.Label{Name: "volume", Value: v.ID}))
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(byMode), func(a, b [2]string) int { return strings.Compare(a[0]+a[1], b[0]+b[1]) }) {
		out = append(out, gauge("berth_csi_claims_by_mode", byMode[k],
			metrics.Label{Name: "step", Value: k[0]}, metrics.Label{Name: "access_mode", Value: k[1]}))
	}
	out = append(out, oldest...)
	for _, b := range []string{"false", "true"} {
		out = append(out, gauge("berth_csi_volumes_schedulable", schedulable[b], metrics.Label{Name: "schedulable", Value: b}))
	}
	for _, st := range slices.Sorted(maps.Keys(volumes)) {
		out = append(out, gauge("berth_csi_volumes", volumes[st], metrics.Label{Name: "state", Value: st}))
	}
	for _, step := range slices.Sorted(maps.Keys(claims)) {
		out = append(out, gauge("berth_csi_claims", claims[step], metrics.Label{Name: "step", Value: step}))
	}

	piter, err := store.CSIPlugins(nil)
	if err != nil {
		return nil, err
	}
	// Series of one name must be adjacent: all healthy, then all expected.
	var healthySeries, expectedSeries []metricSeries
	for raw := piter.Next(); raw != nil; raw = piter.Next() {
		p := raw.(*structs.CSIPlugin)
		for _, t := range []struct {
			typ               string
			healthy, expected int
		}{{"controller", p.ControllersHealthy, p.ControllersExpected}, {"node", p.NodesHealthy, p.NodesExpected}} {
			ls := []metrics.Label{{Name: "plugin_id", Value: p.ID}, {Name: "type", Value: t.typ}}
			healthySeries = append(healthySeries, gauge("berth_csi_plugin_healthy", float64(t.healthy), ls...))
			expectedSeries = append(expectedSeries, gauge("berth_csi_plugin_expected", float64(t.expected), ls...))
		}
	}
	out = append(append(out, healthySeries...), expectedSeries...)
	return append(out, volumeUsageSeries(srv, now)...), nil
}

// volumeUsageGauges are the per-volume usage gauges, from the samples the
// leader holds (CSIVolume.ReportStats), in the order they are written.
var volumeUsageGauges = []struct {
	name  string
	value func(*structs.CSIVolumeStats) (float64, bool)
}{
	{"berth_csi_volume_used_bytes", func(st *structs.CSIVolumeStats) (float64, bool) { return float64(st.UsedBytes), st.UsedBytes >= 0 }},
	{"berth_csi_volume_available_bytes", func(st *structs.CSIVolumeStats) (float64, bool) {
		return float64(st.AvailableBytes), st.AvailableBytes >= 0
	}},
	{"berth_csi_volume_capacity_bytes", func(st *structs.CSIVolumeStats) (float64, bool) { return float64(st.TotalBytes), st.TotalBytes >= 0 }},
	{"berth_csi_volume_inodes_used", func(st *structs.CSIVolumeStats) (float64, bool) { return float64(st.UsedInodes), st.UsedInodes >= 0 }},
	{"berth_csi_volume_inodes_available", func(st *structs.CSIVolumeStats) (float64, bool) {
		return float64(st.AvailableInodes), st.AvailableInodes >= 0
	}},
	{"berth_csi_volume_condition_abnormal", func(st *structs.CSIVolumeStats) (float64, bool) {
		if st.Condition == nil {
			return 0, false
		}
		if st.Condition.Abnormal {
			return 1, true
		}
		return 0, true
	}},
}

// volumeUsageSeries writes each volume's usage on each node as gauges
// labelled namespace, volume and node. A figure the plugin did not report
// (-1) has no series; neither has a condition from a plugin without
// VOLUME_CONDITION. Only the leader holds samples, so only its scrape
// has these series.
func volumeUsageSeries(srv *nomad.Server, now time.Time) []metricSeries {
	byName := make([][]metricSeries, len(volumeUsageGauges))
	srv.EachVolumeStats(now, func(ns, volumeID, nodeID string, st *structs.CSIVolumeStats) {
		labels := []metrics.Label{{Name: "namespace", Value: ns}, {Name: "volume", Value: volumeID}, {Name: "node", Value: nodeID}}
		for i, g := range volumeUsageGauges {
			if v, ok := g.value(st); ok {
				byName[i] = append(byName[i], metricSeries{kind: kindGauge, name: g.name, labels: promLabels(labels), labelMap: labelMap(labels), value: v})
			}
		}
	})
	var out []metricSeries
	for _, s := range byName {
		out = append(out, s...)
	}
	return out
}

// stepSince is when claim entered its current step (unix ns): the time of
// the last transition of its timeline that changed the step, else its
// last write.
func stepSince(c *structs.CSIVolumeClaim) int64 {
	for i := len(c.History) - 1; i >= 0; i-- {
		if h := c.History[i]; h.From != h.To && h.To == c.Step {
			return h.Time
		}
	}
	if c.ModifyTime != 0 {
		return c.ModifyTime
	}
	return c.CreateTime
}

func labelMap(labels []metrics.Label) map[string]string {
	m := make(map[string]string, len(labels))
	for _, l := range labels {
		m[l.Name] = l.Value
	}
	return m
}

// The JSON format is Nomad's (go-metrics' in-memory summary): gauges with
// their value, counters and samples with their count and sum. Counters
// and samples are cumulative since the agent started, so Rate is not
// computed (0); Mean is Sum/Count.
type metricsSummary struct {
	Timestamp string
	Gauges    []gaugeValue
	Points    []struct{}
	Counters  []sampledValue
	Samples   []sampledValue
}

type gaugeValue struct {
	Name   string
	Value  float64
	Labels map[string]string
}

type sampledValue struct {
	Name   string
	Count  uint64
	Rate   float64
	Sum    float64
	Mean   float64
	Labels map[string]string
}

func metricsJSON(series []metricSeries) metricsSummary {
	out := metricsSummary{Timestamp: time.Now().UTC().Format("2006-01-02 15:04:05 -0700 MST"),
		Gauges: []gaugeValue{}, Points: []struct{}{}, Counters: []sampledValue{}, Samples: []sampledValue{}}
	for _, s := range series {
		switch s.kind {
		case kindGauge:
			out.Gauges = append(out.Gauges, gaugeValue{Name: s.name, Value: s.value, Labels: s.labelMap})
		case kindCounter:
			out.Counters = append(out.Counters, sampledValue{Name: s.name, Count: uint64(s.value), Sum: s.value, Labels: s.labelMap})
		default:
			v := sampledValue{Name: s.name, Count: s.count, Sum: s.sum, Labels: s.labelMap}
			if s.count > 0 {
				v.Mean = s.sum / float64(s.count)
			}
			out.Samples = append(out.Samples, v)
		}
	}
	return out
}
