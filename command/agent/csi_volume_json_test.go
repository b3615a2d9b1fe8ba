package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

// fullVolumes are volumes with every field set (api's golden volume),
// strings that need escaping, nil and empty maps and slices, the
// omitempty fields set and not, and nil entries.
func fullVolumes(t testing.TB, n int) []*api.CSIVolume {
	golden, err := os.ReadFile(filepath.Join("..", "..", "api", "testdata", "csi_volume.json"))
	must.NoError(t, err)
	exhausted := time.Date(2026, 11, 25, 12, 0, 0, 500, time.FixedZone("x", 3600))
	out := make([]*api.CSIVolume, n)
	for i := range out {
		if i%5 == 4 {
			continue // nil
		}
		var v api.CSIVolume
		must.NoError(t, json.Unmarshal(golden, &v))
		switch i % 5 {
		case 0:
			v.Name = "Vol «x»\t\"q\" <b>&\x01\u2028 bad \xff"
			v.Secrets = api.CSISecrets{"token": "s3cr\u00e9t", "": "", "<k>": "v"}
			v.Parameters = map[string]string{"b": "2", "a": "1", "é": "\n"}
			v.MutableParameters = map[string]string{"iops": "300"}
			v.ResourceExhausted = &exhausted
			v.Created, v.Capacity, v.RequestedCapacityMax = true, -1<<63, 1<<62
			v.CreateIndex, v.ModifyIndex, v.CreateTime = 1<<64-1, 0, -5
			v.Stats = map[string]*api.CSIVolumeStats{"n1": nil}
			v.RequestedCapabilities = append(v.RequestedCapabilities, nil)
			v.MountOptions.MountFlags = nil
			v.Expansion = &api.CSIVolumeExpansion{RequestedBytes: 1 << 30, Nodes: map[string]string{"n1": "pending"}}
			v.Modification = &api.CSIVolumeModification{Parameters: map[string]string{"iops": "300"}, Error: "refused"}
		case 1:
			v = api.CSIVolume{ID: "bare", PluginID: "hostpath", RequestedCapabilities: []*api.CSIVolumeCapability{},
				ReadAllocs: map[string]*api.Allocation{}, WriteAllocs: map[string]*api.Allocation{}, Allocations: []*api.AllocationListStub{},
				Parameters: map[string]string{}, MountOptions: &api.CSIMountOptions{MountFlags: []string{}},
				Claims: []*api.CSIVolumeClaim{}, PastClaims: []*api.CSIVolumeClaim{}, Stats: map[string]*api.CSIVolumeStats{}, MutableParameters: map[string]string{}}
		case 2:
			v = api.CSIVolume{}
		}
		out[i] = &v
	}
	return out
}

// A register's answer writes the very bytes encoding/json writes: a field
// added to the volume, or one written differently, fails here.
func TestRegisterAnswer_AppendJSONIsEncodingJSON(t *testing.T) {
	vols := fullVolumes(t, 20)
	for _, r := range []*registerAnswer{
		{}, {Volumes: []*api.CSIVolume{}}, {Volumes: []*api.CSIVolume{nil}},
		{Volumes: vols, Warnings: "volume \"x\": no controller\n<second>"},
		{Volumes: vols[:3], Outcomes: []string{"created", "expanded"}},
		{Volumes: vols[:1], Outcomes: []string{}},
	} {
		want, err := json.Marshal((*api.CSIVolumeRegisterResponse)(r))
		must.NoError(t, err)
		got, err := r.appendJSON(nil)
		must.NoError(t, err)
		must.Eq(t, string(want), string(got))
	}
}

// go test -run '^$' -bench RegisterAnswerJSON ./command/agent/
func BenchmarkRegisterAnswerJSON1000(b *testing.B) {
	vols := make([]*api.CSIVolume, 1000)
	for i := range vols {
		vols[i] = &api.CSIVolume{ID: "bench-batch-0-0001", Name: "bench-batch-0-0001", PluginID: "hostpath", Namespace: "default",
			Provider: "hostpath.csi.berth.io", State: "ready", ReadAllocs: map[string]*api.Allocation{}, WriteAllocs: map[string]*api.Allocation{},
			Allocations: []*api.AllocationListStub{}, Schedulable: true, NodesHealthy: 1, NodesExpected: 1, CreateIndex: 20, ModifyIndex: 20,
			RequestedCapabilities: []*api.CSIVolumeCapability{{AccessMode: api.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: api.CSIVolumeAttachmentModeFilesystem}},
			MountOptions:          &api.CSIMountOptions{FSType: "ext4", MountFlags: []string{"[REDACTED]"}}, Parameters: map[string]string{"tier": "gold"}}
	}
	r := &registerAnswer{Volumes: vols}
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal((*api.CSIVolumeRegisterResponse)(r)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		for b.Loop() {
			if _, err := r.appendJSON(nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
