package api

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// fullVolumes are volumes with every field set (api's golden volume),
// strings that need escaping, nil and empty maps and slices, the
// omitempty fields set and not, and nil entries.
func fullVolumes(t testing.TB, n int) []*CSIVolume {
	golden, err := os.ReadFile(filepath.Join("testdata", "csi_volume.json"))
	must.NoError(t, err)
	exhausted := time.Date(2026, 11, 25, 12, 0, 0, 500, time.FixedZone("x", 3600))
	out := make([]*CSIVolume, n)
	for i := range out {
		if i%5 == 4 {
			continue // nil
		}
		var v CSIVolume
		must.NoError(t, json.Unmarshal(golden, &v))
		switch i % 5 {
		case 0:
			v.Name = "Vol «x»\t\"q\" <b>&\x01\u2028 bad \xff"
			v.Secrets = CSISecrets{"token": "s3cr\u00e9t", "": "", "<k>": "v"}
			v.Parameters = map[string]string{"b": "2", "a": "1", "é": "\n"}
			v.MutableParameters = map[string]string{"iops": "300"}
			v.ResourceExhausted = &exhausted
			v.Created, v.Capacity, v.RequestedCapacityMax = true, -1<<63, 1<<62
			v.CreateIndex, v.ModifyIndex, v.CreateTime = 1<<64-1, 0, -5
			v.Stats = map[string]*CSIVolumeStats{"n1": nil}
			v.RequestedCapabilities = append(v.RequestedCapabilities, nil)
			v.MountOptions.MountFlags = nil
			v.Expansion = &CSIVolumeExpansion{RequestedBytes: 1 << 30, Nodes: map[string]string{"n1": "pending"}}
			v.Modification = &CSIVolumeModification{Parameters: map[string]string{"iops": "300"}, Error: "refused"}
		case 1:
			v = CSIVolume{ID: "bare", PluginID: "hostpath", RequestedCapabilities: []*CSIVolumeCapability{},
				ReadAllocs: map[string]*Allocation{}, WriteAllocs: map[string]*Allocation{}, Allocations: []*AllocationListStub{},
				Parameters: map[string]string{}, MountOptions: &CSIMountOptions{MountFlags: []string{}},
				Claims: []*CSIVolumeClaim{}, PastClaims: []*CSIVolumeClaim{}, Stats: map[string]*CSIVolumeStats{}, MutableParameters: map[string]string{}}
		case 2:
			v = CSIVolume{}
		}
		out[i] = &v
	}
	return out
}

// A register's answer, and its request, write the very bytes
// encoding/json writes: a field added to the volume, or one written
// differently, fails here.
func TestCSIVolumeRegister_AppendJSONIsEncodingJSON(t *testing.T) {
	vols := fullVolumes(t, 20)
	for _, r := range []*CSIVolumeRegisterResponse{
		{}, {Volumes: []*CSIVolume{}}, {Volumes: []*CSIVolume{nil}},
		{Volumes: vols, Warnings: "volume \"x\": no controller\n<second>"},
		{Volumes: vols[:3], Outcomes: []string{"created", "expanded"}},
		{Volumes: vols[:1], Outcomes: []string{}},
	} {
		want, err := json.Marshal(r)
		must.NoError(t, err)
		got, err := r.AppendJSON(nil)
		must.NoError(t, err)
		must.Eq(t, string(want), string(got))

	}
}

// A register request's body leaves out zero fields, and reads back, by
// encoding/json and by the agent's decoder, as the volumes encoding/json's
// full body reads back as: a field written wrongly or left out when set
// fails here.
func TestCSIVolumeRegister_RequestJSONDecodesAsEncodingJSON(t *testing.T) {
	vols := fullVolumes(t, 20)
	for _, req := range []*CSIVolumeRegisterRequest{
		{}, {Volumes: []*CSIVolume{}}, {Volumes: []*CSIVolume{nil}}, {Volumes: vols}, {Volumes: vols[1:3]},
	} {
		full, err := json.Marshal(req)
		must.NoError(t, err)
		var want CSIVolumeRegisterRequest
		must.NoError(t, json.Unmarshal(full, &want))

		body, err := req.requestJSON()
		must.NoError(t, err)
		must.True(t, json.Valid(body), must.Sprint(string(body)))
		var got CSIVolumeRegisterRequest
		must.NoError(t, json.Unmarshal(body, &got))
		must.Eq(t, want, got)
		var fast CSIVolumeRegisterRequest
		must.NoError(t, DecodeCSIVolumeRegisterRequest(body, &fast))
		must.Eq(t, want, fast)
		if len(req.Volumes) > 2 {
			must.Less(t, len(full), len(body)) // smaller, or it is not worth it
		}
	}
	// A volume with only a few fields set sends only those.
	body, err := (&CSIVolumeRegisterRequest{Volumes: []*CSIVolume{{ID: "v", PluginID: "p",
		RequestedCapabilities: []*CSIVolumeCapability{{AccessMode: CSIVolumeAccessModeSingleNodeWriter}}}}}).requestJSON()
	must.NoError(t, err)
	must.Eq(t, `{"Volumes":[{"ID":"v","RequestedCapabilities":[{"AccessMode":"single-node-writer","AttachmentMode":""}],"PluginID":"p"}]}`, string(body))
}

// go test -run '^$' -bench RegisterAnswerJSON ./api/
func BenchmarkRegisterAnswerJSON1000(b *testing.B) {
	vols := make([]*CSIVolume, 1000)
	for i := range vols {
		vols[i] = &CSIVolume{ID: "bench-batch-0-0001", Name: "bench-batch-0-0001", PluginID: "hostpath", Namespace: "default",
			Provider: "hostpath.csi.berth.io", State: "ready", ReadAllocs: map[string]*Allocation{}, WriteAllocs: map[string]*Allocation{},
			Allocations: []*AllocationListStub{}, Schedulable: true, NodesHealthy: 1, NodesExpected: 1, CreateIndex: 20, ModifyIndex: 20,
			RequestedCapabilities: []*CSIVolumeCapability{{AccessMode: CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: CSIVolumeAttachmentModeFilesystem}},
			MountOptions:          &CSIMountOptions{FSType: "ext4", MountFlags: []string{"[REDACTED]"}}, Parameters: map[string]string{"tier": "gold"}}
	}
	r := &CSIVolumeRegisterResponse{Volumes: vols}
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		for b.Loop() {
			if _, err := r.AppendJSON(nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The client sends a register's compact body, which reads back as the
// volumes sent (so Nomad's agents, and any JSON reader, take it as
// before).
func TestCSIVolumes_RegisterSendsTheCompactBody(t *testing.T) {
	c, f := newFake(t, `{"Volumes":[],"Warnings":""}`)
	req := &CSIVolumeRegisterRequest{Volumes: fullVolumes(t, 10)}
	_, _, err := c.CSIVolumes().RegisterOpts(req, nil)
	must.NoError(t, err)
	want, err := req.requestJSON()
	must.NoError(t, err)
	must.Eq(t, string(want), string(f.last(t).body))
}

// Every byte alone in a plain string is written as encoding/json writes it:
// the escape table misses none (a string with one other special byte
// would hide a miss).
func TestAppendJSONString_EveryByte(t *testing.T) {
	for c := range 256 {
		s := "plain " + string([]byte{byte(c)}) + " text"
		want, err := json.Marshal(s)
		must.NoError(t, err)
		must.Eq(t, string(want), string(appendJSONString(nil, s)), must.Sprintf("byte %#x", c))
	}
}
