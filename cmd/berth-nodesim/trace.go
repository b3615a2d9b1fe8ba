package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	metrics "github.com/hashicorp/go-metrics"

	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/nomad/structs"
)

// entryKinds are the Raft entry types a claim phase is made of, as the
// table names them; every other type counts as "other".
var entryKinds = []struct {
	name  string
	types []structs.MessageType
}{
	{"plans", []structs.MessageType{structs.ApplyPlanResultsRequestType}},
	{"alloc updates", []structs.MessageType{structs.AllocClientUpdateRequestType}},
	{"claims", []structs.MessageType{structs.CSIVolumeClaimRequestType, structs.CSIVolumeClaimGroupsRequestType}},
	{"node writes", []structs.MessageType{structs.NodeRegisterRequestType, structs.NodeUpdateStatusRequestType, structs.NodeBatchUpdateStatusRequestType}},
	{"evals", []structs.MessageType{structs.EvalUpdateRequestType}},
}

// entryCounts are the in-process server's applied entries by kind (the
// index of entryKinds), and in total, at one moment.
type entryCounts struct {
	kinds []uint64
	total uint64
}

func countEntries(s *nomad.Server) entryCounts {
	c := entryCounts{kinds: make([]uint64, len(entryKinds))}
	for t := structs.MessageType(0); t < 128; t++ {
		n := s.Applied(t)
		c.total += n
		for i, k := range entryKinds {
			if slices.Contains(k.types, t) {
				c.kinds[i] += n
			}
		}
	}
	return c
}

// since is what was applied between start and c, as "plans 5, claims
// 120, …" (kinds with none left out).
func (c entryCounts) since(start entryCounts) (total uint64, detail string) {
	var parts []string
	rest := c.total - start.total
	for i, k := range entryKinds {
		if n := c.kinds[i] - start.kinds[i]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k.name, n))
			rest -= n
		}
	}
	if rest > 0 {
		parts = append(parts, fmt.Sprintf("other %d", rest))
	}
	return c.total - start.total, strings.Join(parts, ", ")
}

// sampleSink keeps, per timing metric (and method label), the count, sum
// and maximum of what the in-process server measured since the last
// reset: where a claim's time went on the server. Other metrics are
// dropped.
type sampleSink struct {
	mu  sync.Mutex
	agg map[string]*sampleAgg
}

type sampleAgg struct {
	n        int
	sum, max float64
}

func newSampleSink() *sampleSink { return &sampleSink{agg: map[string]*sampleAgg{}} }

func (s *sampleSink) reset() {
	s.mu.Lock()
	s.agg = map[string]*sampleAgg{}
	s.mu.Unlock()
}

func (s *sampleSink) AddSampleWithLabels(key []string, val float32, labels []metrics.Label) {
	name := strings.Join(key, ".")
	for _, l := range labels {
		if l.Name == "method" {
			name += " " + l.Value
		}
	}
	s.mu.Lock()
	a := s.agg[name]
	if a == nil {
		a = &sampleAgg{}
		s.agg[name] = a
	}
	a.n++
	a.sum += float64(val)
	a.max = max(a.max, float64(val))
	s.mu.Unlock()
}

func (s *sampleSink) AddSample(key []string, val float32) { s.AddSampleWithLabels(key, val, nil) }

func (*sampleSink) SetGauge([]string, float32)                               {}
func (*sampleSink) SetGaugeWithLabels([]string, float32, []metrics.Label)    {}
func (*sampleSink) EmitKey([]string, float32)                                {}
func (*sampleSink) IncrCounter([]string, float32)                            {}
func (*sampleSink) IncrCounterWithLabels([]string, float32, []metrics.Label) {}

// sampleRow is one traced figure of the table.
type sampleRow struct {
	name     string
	n        int
	mean     float64
	max      float64
	duration bool // milliseconds, else a count
}

// tracedSamples are the metrics the table shows, in its order.
var tracedSamples = []struct{ key, name string }{
	{"eval.wait", "eval created → dequeued by a worker"},
	{"plan.compute", "scheduler pass (reconcile, place) per plan"},
	{"plan.queue_wait", "plan waits for the applier"},
	{"plan.evaluate", "plan applier's checks per plan"},
	{"plan.apply", "plan's Raft entry (encode, commit, FSM)"},
	{"plan.submit", "plan submitted → result"},
	{"rpc.request CSIVolume.Claim", "Claim RPC on the server"},
	{"csi.claim.write", "claim write (queued + committed)"},
	{"csi.claim.commit", "claim commit (one Raft entry)"},
	{"csi.claim.commit_groups", "claim writes per commit"},
	{"rpc.request Node.UpdateAlloc", "Node.UpdateAlloc on the server"},
	{"rpc.request Node.GetClientAllocs", "Node.GetClientAllocs (blocking) on the server"},
	{"rpc.request Alloc.GetAllocs", "Alloc.GetAllocs on the server"},
}

func (s *sampleSink) rows() []sampleRow {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sampleRow
	for _, t := range tracedSamples {
		a := s.agg[t.key]
		if a == nil || a.n == 0 {
			continue
		}
		out = append(out, sampleRow{name: t.name, n: a.n, mean: a.sum / float64(a.n), max: a.max,
			duration: !strings.HasSuffix(t.key, "_groups")})
	}
	return out
}

func (r sampleRow) String() string {
	if !r.duration {
		return fmt.Sprintf("%d commits, mean %.1f, max %.0f", r.n, r.mean, r.max)
	}
	ms := func(v float64) time.Duration { return round(time.Duration(v * float64(time.Millisecond))) }
	return fmt.Sprintf("%d, mean %s, max %s", r.n, ms(r.mean), ms(r.max))
}
