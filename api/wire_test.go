package api

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// decodeNumbers decodes JSON into generic values, keeping numbers exact
// (int64 nanoseconds do not survive float64).
func decodeNumbers(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	must.NoError(t, d.Decode(&v))
	return v
}

// mustContain fails unless every key and value of want is in got: the
// fixture is a subset of what our types encode (they may add fields).
func mustContain(t *testing.T, path string, want, got any) {
	t.Helper()
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			t.Errorf("%s: want an object, got %T (%v)", path, got, got)
			return
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				t.Errorf("%s.%s: missing from the encoded value", path, k)
				continue
			}
			mustContain(t, path+"."+k, wv, gv)
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			t.Errorf("%s: want %d elements, got %v", path, len(w), got)
			return
		}
		for i := range w {
			mustContain(t, path+"["+strconv.Itoa(i)+"]", w[i], g[i])
		}
	default:
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%s: want %v (%T), got %v (%T)", path, want, want, got, got)
		}
	}
}

// roundTrip decodes fixture name into a new T, re-encodes it, checks that
// nothing in the fixture was lost or changed, and returns the decoded T.
func roundTrip[T any](t *testing.T, name string) T {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", name))
	must.NoError(t, err)
	var v T
	d := json.NewDecoder(bytes.NewReader(src))
	d.DisallowUnknownFields()
	must.NoError(t, d.Decode(&v), must.Sprint("every fixture field must be a field of the type"))
	out, err := json.Marshal(v)
	must.NoError(t, err)
	mustContain(t, strings.TrimSuffix(name, ".json"), decodeNumbers(t, src), decodeNumbers(t, out))
	return v
}

func TestWire_Job(t *testing.T) {
	j := roundTrip[*Job](t, "job.json")
	must.Eq(t, "writer", *j.ID)
	must.Eq(t, 1717236000123456789, *j.SubmitTime)
	tg := j.TaskGroups[0]
	must.Eq(t, 24*time.Hour, *tg.RestartPolicy.Interval)
	must.Eq(t, 5*time.Second, *tg.ReschedulePolicy.Delay)
	must.Eq(t, CSIMountOptions{FSType: "ext4", MountFlags: []string{"noatime"}}, *tg.Volumes["data"].MountOptions)
	must.Eq(t, 5*time.Second, *tg.Tasks[0].KillTimeout)
	must.Eq(t, "/data", *tg.Tasks[0].VolumeMounts[0].Destination)
	must.Eq(t, []any{map[string]any{"target": "/x", "readonly": true}}, tg.Tasks[0].Config["mounts"].([]any))
	must.Eq(t, TaskCSIPluginConfig{
		ID: "hostpath", Type: CSIPluginTypeMonolith, MountDir: "/csi",
		StagePublishBaseDir: "/local/csi", HealthTimeout: 30 * time.Second,
	}, *tg.Tasks[1].CSIPluginConfig)
	must.Nil(t, tg.Tasks[0].CSIPluginConfig)
}

func TestWire_JobList(t *testing.T) {
	l := roundTrip[[]*JobListStub](t, "job_list.json")
	must.Eq(t, "dead", l[0].Status)
}

func TestWire_Allocation(t *testing.T) {
	a := roundTrip[*Allocation](t, "allocation.json")
	ts := a.TaskStates["write"]
	must.Eq(t, time.Date(2024, 6, 1, 10, 0, 6, 123456789, time.UTC), ts.StartedAt)
	must.Eq(t, time.Date(2024, 6, 1, 10, 0, 5, 500_000_000, time.UTC), ts.LastRestart)
	must.Eq(t, 5*time.Second, ts.Events[1].KillTimeout)
	must.Eq(t, int64(1717236007000000000), ts.Events[1].Time)
	must.Eq(t, 123456*time.Nanosecond, a.Metrics.AllocationTime)
	s := a.Stub() // copes with a nil Job
	must.Eq(t, a.ID, s.ID)
	must.Eq(t, "", s.JobType)
}

func TestWire_AllocationList(t *testing.T) {
	l := roundTrip[[]*AllocationListStub](t, "allocation_list.json")
	must.True(t, l[0].TaskStates["write"].FinishedAt.IsZero())
}

func TestWire_Evaluation(t *testing.T) {
	e := roundTrip[*Evaluation](t, "evaluation.json")
	must.Eq(t, 2, e.FailedTGAllocs["reader"].CoalescedFailures)
	must.Eq(t, 1, e.QueuedAllocations["reader"])
}

func TestWire_Node(t *testing.T) {
	n := roundTrip[*Node](t, "node.json")
	must.Eq(t, time.Hour, n.DrainStrategy.Deadline)
	must.True(t, n.DrainStrategy.IgnoreSystemJobs)
	must.Eq(t, time.Date(2024, 6, 1, 9, 59, 0, 250_000_000, time.UTC), n.Drivers["raw_exec"].UpdateTime)
	must.Eq(t, "node1", n.CSINodePlugins["hostpath"].NodeInfo.ID)
	must.True(t, n.CSIControllerPlugins["hostpath"].ControllerInfo.SupportsGet)
}

func TestWire_NodeList(t *testing.T) {
	l := roundTrip[[]*NodeListStub](t, "node_list.json")
	must.False(t, l[0].Drivers["exec"].Healthy)
}

func TestWire_CSIVolume(t *testing.T) {
	v := roundTrip[*CSIVolume](t, "csi_volume.json")
	must.Nil(t, v.ResourceExhausted)
	alloc, ok := v.WriteAllocs["5a1e6f2c-0d5b-4a5c-8f0e-3c1b2a4d5e6f"]
	must.True(t, ok)
	must.Nil(t, alloc)
	must.Eq(t, CSIVolumeStateReady, v.State)
	must.Eq(t, CSIClaimTaken, v.Claims[0].Step)
	must.Eq(t, "detach -force", v.PastClaims[0].ReleaseReason)
	must.Eq(t, int64(10485760), v.RequestedCapacityMin)
}

func TestWire_CSIVolumeList(t *testing.T) {
	l := roundTrip[[]*CSIVolumeListStub](t, "csi_volume_list.json")
	must.NotNil(t, l[0].ResourceExhausted)
	must.Eq(t, time.Date(2024, 6, 1, 10, 0, 0, 500_000_000, time.UTC), *l[0].ResourceExhausted)
	must.Eq(t, 1, l[0].Claims)
}

func TestWire_CSIPlugin(t *testing.T) {
	p := roundTrip[*CSIPlugin](t, "csi_plugin.json")
	c := p.Controllers["f7e1c2d3-4b5a-6978-8a9b-0c1d2e3f4a5b"]
	must.Eq(t, time.Date(2024, 6, 1, 9, 59, 30, 1, time.UTC), c.UpdateTime)
	must.Nil(t, c.NodeInfo)
	must.Eq(t, int64(16), p.Nodes["f7e1c2d3-4b5a-6978-8a9b-0c1d2e3f4a5b"].NodeInfo.MaxVolumes)
}

func TestWire_CSIPluginList(t *testing.T) {
	l := roundTrip[[]*CSIPluginListStub](t, "csi_plugin_list.json")
	must.Eq(t, 0, l[0].NodesHealthy)
}

// TestWire_Encoding pins the shapes Nomad's client needs: durations and
// CreateTime as integers, ResourceExhausted as null or a string, and
// Berth's extra fields absent when empty.
func TestWire_Encoding(t *testing.T) {
	cases := []struct {
		name string
		v    any
		want []string
		not  []string
	}{
		{
			name: "empty volume",
			v:    &CSIVolume{ID: "data"},
			want: []string{`"ResourceExhausted":null`, `"CreateTime":0`, `"Secrets":null`},
			not:  []string{`"State"`, `"Claims"`, `"PastClaims"`},
		},
		{
			name: "exhausted volume stub",
			v:    &CSIVolumeListStub{ResourceExhausted: pointerOf(time.Date(2024, 6, 1, 10, 0, 0, 0, time.UTC))},
			want: []string{`"ResourceExhausted":"2024-06-01T10:00:00Z"`},
			not:  []string{`"Claims"`},
		},
		{
			name: "plugin config",
			v:    &TaskCSIPluginConfig{HealthTimeout: 30 * time.Second},
			want: []string{`"HealthTimeout":30000000000`},
		},
		{
			name: "task without csi_plugin",
			v:    &Task{KillTimeout: durationPtr(5 * time.Second)},
			want: []string{`"KillTimeout":5000000000`},
			not:  []string{`"CSIPluginConfig"`},
		},
		{
			name: "drain strategy is flat",
			v:    &DrainStrategy{DrainSpec: DrainSpec{Deadline: time.Minute}},
			want: []string{`"Deadline":60000000000`, `"IgnoreSystemJobs":false`, `"ForceDeadline":"0001-01-01T00:00:00Z"`},
			not:  []string{`"DrainSpec"`},
		},
		{
			name: "drain response hides WriteMeta",
			v:    &NodeDrainUpdateResponse{WriteMeta: WriteMeta{LastIndex: 4}},
			not:  []string{`WriteMeta`, `LastIndex`},
		},
		{
			name: "agent health uses lower case",
			v:    &AgentHealthResponse{Server: &AgentHealth{Ok: true, Message: "ok"}},
			want: []string{`{"server":{"ok":true,"message":"ok"}}`},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.v)
			must.NoError(t, err)
			for _, w := range tc.want {
				must.StrContains(t, string(b), w)
			}
			for _, n := range tc.not {
				must.StrNotContains(t, string(b), n)
			}
		})
	}
}

// TestWire_Rejects documents the shapes that do not decode, so a server
// that sent them would break Nomad's client too.
func TestWire_Rejects(t *testing.T) {
	cases := []struct {
		name string
		json string
		into any
	}{
		{"duration as a string", `{"HealthTimeout":"30s"}`, &TaskCSIPluginConfig{}},
		{"create time as a string", `{"CreateTime":"2024-06-01T10:00:00Z"}`, &CSIVolume{}},
		{"resource exhausted as a number", `{"ResourceExhausted":0}`, &CSIVolume{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Error(t, json.Unmarshal([]byte(tc.json), tc.into))
		})
	}
}

func TestCSISecretsHeader(t *testing.T) {
	s := CSISecrets{"b": "2", "a": "x=1"}
	h := EncodeCSISecrets(s)
	must.Eq(t, "a=x=1,b=2", h)
	must.Eq(t, s, DecodeCSISecrets(h))
	must.Nil(t, DecodeCSISecrets(""))
	must.Eq(t, CSISecrets{"k": ""}, DecodeCSISecrets("k=,junk,=v"))
}
