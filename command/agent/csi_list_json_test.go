package agent

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

// fullStubs are list stubs with every field set, strings that need
// escaping, nested fields and extremes, and zero entries.
func fullStubs(n int) volumeStubs {
	exhausted := time.Date(2026, 11, 25, 12, 0, 0, 500, time.FixedZone("x", 3600))
	out := make(volumeStubs, n)
	for i := range out {
		if i%7 == 6 {
			continue // the zero stub
		}
		out[i] = api.CSIVolumeListStub{
			ID: fmt.Sprintf("vol-%04d", i), Namespace: "default", Name: fmt.Sprintf("Vol «%d» \"q\" <b>&\t\x01\u2028", i),
			ExternalID: "ext/" + fmt.Sprint(i), AccessMode: api.CSIVolumeAccessModeSingleNodeWriter,
			AttachmentMode: api.CSIVolumeAttachmentModeFilesystem, CurrentReaders: i % 3, CurrentWriters: -i,
			Schedulable: i%2 == 0, PluginID: "hostpath", Provider: "berth.hostpath", ControllerRequired: i%3 == 0,
			ControllersHealthy: 1, ControllersExpected: 2, NodesHealthy: 3, NodesExpected: 4,
			CreateIndex: uint64(i) + 1<<40, ModifyIndex: 1<<64 - 1, State: api.CSIVolumeStateReady, Claims: i,
		}
		if i%2 == 1 {
			out[i].Topologies = []*api.CSITopology{{Segments: map[string]string{"zone": "a", "rack": "r1"}}, nil}
			out[i].ResourceExhausted = &exhausted
			out[i].State, out[i].Claims = "", 0 // omitempty
			out[i].Name = "bad utf8 \xff"
		}
	}
	return out
}

// The list writes the very bytes encoding/json writes: a field added to
// the stub, or one written differently, fails here.
func TestVolumeStubs_AppendJSONIsEncodingJSON(t *testing.T) {
	for _, l := range []volumeStubs{nil, {}, {{}}, fullStubs(30)} {
		want, err := json.Marshal([]api.CSIVolumeListStub(l))
		must.NoError(t, err)
		got, err := l.appendJSON(nil)
		must.NoError(t, err)
		must.Eq(t, string(want), string(got))
	}
}

// go test -run '^$' -bench VolumeStubsJSON ./command/agent/
func BenchmarkVolumeStubsJSON1000(b *testing.B) {
	l := fullStubs(1000)
	for i := range l {
		s := &l[i]
		s.Name, s.Topologies, s.ResourceExhausted = s.ID, nil, nil
	}
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal([]api.CSIVolumeListStub(l)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("append", func(b *testing.B) {
		for b.Loop() {
			if _, err := l.appendJSON(nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
