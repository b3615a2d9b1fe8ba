package agent

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/nomad/structs"
)

// fullStubs are list stubs with every field set, strings that need
// escaping, nested fields and extremes, and zero entries.
func fullStubs(n int) []api.CSIVolumeListStub {
	exhausted := time.Date(2026, 11, 25, 12, 0, 0, 500, time.FixedZone("x", 3600))
	out := make([]api.CSIVolumeListStub, n)
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

// appendStubs writes l as a JSON array with the stubs' AppendJSON.
func appendStubs(l []api.CSIVolumeListStub) ([]byte, error) {
	buf := []byte{'['}
	for i := range l {
		if i > 0 {
			buf = append(buf, ',')
		}
		var err error
		if buf, err = l[i].AppendJSON(buf); err != nil {
			return nil, err
		}
	}
	return append(buf, ']'), nil
}

// A stub is written as the very bytes encoding/json writes: a field added
// to the stub, or one written differently, fails here.
func TestAppendStub_IsEncodingJSON(t *testing.T) {
	for _, l := range [][]api.CSIVolumeListStub{{}, {{}}, fullStubs(30)} {
		want, err := json.Marshal(l)
		must.NoError(t, err)
		got, err := appendStubs(l)
		must.NoError(t, err)
		must.Eq(t, string(want), string(got))
	}
}

// serverStubs are the servers' stubs of a list, and the plugins' health
// they are shown with: plugins healthy, unhealthy and unknown, every
// state, claims and none, topologies and none.
func serverStubs(n int) volumeList {
	health := map[string]*structs.CSIPluginListStub{
		"hostpath": {ID: "hostpath", ControllerRequired: true, PublishUnpublish: true, ControllersHealthy: 1,
			ControllersExpected: 2, NodesHealthy: 3, NodesExpected: 4},
		"sick": {ID: "sick", NodesExpected: 2},
	}
	plugins := []string{"hostpath", "sick", "gone"}
	states := []structs.CSIVolumeState{"", structs.CSIVolumeStateReady, structs.CSIVolumeStateCreating, structs.CSIVolumeStateDeleting}
	vols := make([]*structs.CSIVolumeListStub, n)
	for i := range vols {
		vols[i] = &structs.CSIVolumeListStub{
			ID: fmt.Sprintf("vol-%04d", i), Namespace: "default", Name: fmt.Sprintf("Vol «%d» <b>", i),
			ExternalID: "ext/" + fmt.Sprint(i), PluginID: plugins[i%3], Provider: "berth.hostpath",
			State: states[i%4], AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter,
			AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem, Claims: i % 2, CurrentReaders: i % 3,
			CurrentWriters: i % 2, CreateIndex: uint64(i) + 1, ModifyIndex: 1<<64 - 1,
		}
		if i%5 == 1 {
			vols[i].Topologies = []*structs.CSITopology{{Segments: map[string]string{"zone": "a"}}}
		}
	}
	return volumeList{vols: vols, health: health}
}

// The list writes what encoding/json writes for the api stubs the
// servers' stubs convert to, compact and (?pretty) indented.
func TestVolumeList_IsEncodingJSONOfTheAPIStubs(t *testing.T) {
	full := serverStubs(40)
	for _, l := range []volumeList{{}, {vols: []*structs.CSIVolumeListStub{}}, full} {
		var conv []*api.CSIVolumeListStub
		if l.vols != nil {
			conv = []*api.CSIVolumeListStub{}
		}
		for _, v := range l.vols {
			s := new(api.CSIVolumeListStub)
			volumeStubToAPI(s, v, healthOfPlugin(l.health[v.PluginID]))
			conv = append(conv, s)
		}
		want, err := json.Marshal(conv)
		must.NoError(t, err)
		got, err := l.appendJSON(nil)
		must.NoError(t, err)
		must.Eq(t, string(want), string(got))
		want, err = json.MarshalIndent(conv, "", "    ")
		must.NoError(t, err)
		got, err = json.MarshalIndent(l, "", "    ")
		must.NoError(t, err)
		must.Eq(t, string(want), string(got))
	}
	// And the stubs do differ in what the conversion fills in.
	got, err := full.appendJSON(nil)
	must.NoError(t, err)
	for _, part := range []string{`"Schedulable":true`, `"Schedulable":false`, `"NodesExpected":2`,
		`"Topologies":[{"Segments":{"zone":"a"}}]`, `"State":"creating"`, `\u003cb\u003e`} {
		must.StrContains(t, string(got), part)
	}
}

// go test -run '^$' -bench VolumeListJSON ./command/agent/
func BenchmarkVolumeListJSON1000(b *testing.B) {
	l := serverStubs(1000)
	for _, v := range l.vols {
		v.Name, v.Topologies, v.PluginID = v.ID, nil, "hostpath"
	}
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			conv := make([]*api.CSIVolumeListStub, 0, len(l.vols))
			for _, v := range l.vols {
				s := new(api.CSIVolumeListStub)
				volumeStubToAPI(s, v, healthOfPlugin(l.health[v.PluginID]))
				conv = append(conv, s)
			}
			if _, err := json.Marshal(conv); err != nil {
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
