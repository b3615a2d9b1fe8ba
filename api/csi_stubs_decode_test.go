package api

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/shoenig/test/must"
)

// stubsLikeEncodingJSON decodes body both ways and checks that the fast
// decoder gives encoding/json's result or error.
func stubsLikeEncodingJSON(t *testing.T, body []byte) {
	t.Helper()
	var want []*CSIVolumeListStub
	wantErr := json.Unmarshal(body, &want)
	var got volumeStubList
	gotErr := got.decodeJSON(body)
	if wantErr != nil {
		must.Error(t, gotErr, must.Sprintf("encoding/json refuses %q", body))
		must.Eq(t, wantErr.Error(), gotErr.Error())
		return
	}
	must.NoError(t, gotErr, must.Sprintf("body %q", body))
	if !reflect.DeepEqual([]*CSIVolumeListStub(want), []*CSIVolumeListStub(got)) {
		t.Fatalf("body %s:\nencoding/json: %s\nfast decoder:  %s", body, dump(want), dump(got))
	}
}

func dump(v any) string { b, _ := json.Marshal(v); return string(b) }

func sampleStubs(n int) []*CSIVolumeListStub {
	exhausted := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	out := make([]*CSIVolumeListStub, n)
	for i := range out {
		out[i] = &CSIVolumeListStub{
			ID: fmt.Sprintf("vol-%04d", i), Namespace: "default", Name: fmt.Sprintf("Volume «%d»\t\"quoted\" <b>", i),
			ExternalID: "ext/" + fmt.Sprint(i), AccessMode: CSIVolumeAccessModeSingleNodeWriter,
			AttachmentMode: CSIVolumeAttachmentModeFilesystem, CurrentReaders: i % 3, CurrentWriters: -i,
			Schedulable: i%2 == 0, PluginID: "hostpath", Provider: "berth.hostpath", ControllerRequired: i%3 == 0,
			ControllersHealthy: 1, ControllersExpected: 2, NodesHealthy: 3, NodesExpected: 4,
			CreateIndex: uint64(i) + 1<<40, ModifyIndex: 18446744073709551615, State: CSIVolumeStateReady, Claims: i,
		}
		if i%2 == 1 {
			out[i].Topologies = []*CSITopology{{Segments: map[string]string{"zone": "a", "rack": "r1"}}, nil}
			out[i].ResourceExhausted = &exhausted
		}
	}
	return out
}

// The fast decoder reads what the agent sends (the golden list of
// wire_test.go and generated stubs with escapes, nested fields and
// extremes) exactly as encoding/json does.
func TestVolumeStubList_DecodesAsEncodingJSON(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "csi_volume_list.json"))
	must.NoError(t, err)
	stubsLikeEncodingJSON(t, golden)
	body, err := json.Marshal(sampleStubs(50))
	must.NoError(t, err)
	stubsLikeEncodingJSON(t, body)
	indented, err := json.MarshalIndent(sampleStubs(3), " ", "\t")
	must.NoError(t, err)
	stubsLikeEncodingJSON(t, indented)
	// And the fast path took them: no fallback hides a broken decoder.
	for _, b := range [][]byte{golden, body, indented} {
		_, ok := decodeVolumeStubs(b)
		must.True(t, ok, must.Sprintf("fell back to encoding/json on %.200s", b))
	}
}

// The stubs come in blocks: lists longer than a block, and stubs far
// smaller than the size the blocks are estimated from (so that the
// estimate runs short), still decode each stub into its own memory.
func TestVolumeStubList_BlocksHoldEachStubOnce(t *testing.T) {
	body, err := json.Marshal(sampleStubs(2*stubBlock + 7))
	must.NoError(t, err)
	stubsLikeEncodingJSON(t, body)
	small := []byte("[")
	for i := range 3*stubBlock + 1 {
		if i > 0 {
			small = append(small, ',')
		}
		if i%5 == 4 {
			small = append(small, "null"...)
			continue
		}
		small = fmt.Appendf(small, `{"ID":"v%d","Claims":%d}`, i, i)
	}
	small = append(small, ']')
	stubsLikeEncodingJSON(t, small)
	out, ok := decodeVolumeStubs(small)
	must.True(t, ok)
	must.Eq(t, 3*stubBlock+1, len(out))
	seen := map[*CSIVolumeListStub]bool{}
	for _, s := range out {
		if s != nil {
			must.False(t, seen[s], must.Sprintf("stub %s shares its memory", s.ID))
			seen[s] = true
		}
	}
}

// stubFields are in the order encoding/json (and so the agent) writes the
// stub's fields: the decoder expects its keys in that order, and reads
// each one only when that fails.
func TestVolumeStubList_KeysInTheWritersOrder(t *testing.T) {
	typ := reflect.TypeFor[CSIVolumeListStub]()
	var names []string
	for i := range typ.NumField() {
		names = append(names, typ.Field(i).Name)
	}
	must.Eq(t, names, stubFields)
}

// The plain strings are the body's own memory, not a copy of it (the
// copy was ~450 KB a list of 1,000 volumes); an escaped one is its own.
func TestVolumeStubList_StringsShareTheBody(t *testing.T) {
	body := []byte(`[{"ID":"vol-1","PluginID":"hostpath","Name":"a\u0041"}]`)
	out, ok := decodeVolumeStubs(body)
	must.True(t, ok)
	inBody := func(s string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		start := uintptr(unsafe.Pointer(unsafe.SliceData(body)))
		return p >= start && p+uintptr(len(s)) <= start+uintptr(len(body))
	}
	must.True(t, inBody(out[0].ID))
	must.True(t, inBody(out[0].PluginID))
	must.Eq(t, "aA", out[0].Name)
	must.False(t, inBody(out[0].Name))
}

// Bodies the fast path must not take as it reads them: each either goes
// to encoding/json, or decodes to the same thing.
// stubEdgeBodies are bodies at the edges of what the fast decoder takes; the
// edge-case test and the fuzz target start from them.
var stubEdgeBodies = []string{
	`null`, `[]`, ` [ ] `, `[null]`, `[{}]`, `[{"ID":null,"Claims":null}]`,
	`[{"ID":"a\u0041\n","Name":"\ud83d\ude00"}]`, // escapes
	`[{"ID":"bad utf8 ` + "\xff" + `"}]`,
	`[{"id":"lower-case key"}]`,                // encoding/json matches without case
	`[{"Unknown":{"a":[1,"]}",{}]},"ID":"x"}]`, // a field the stub lacks
	`[{"Claims":1.0}]`, `[{"Claims":1e3}]`, `[{"Claims":01}]`, `[{"Claims":-0}]`, `[{"Claims":"1"}]`,
	`[{"CreateIndex":-1}]`, `[{"CreateIndex":18446744073709551616}]`,
	`[{"Claims":0,"CreateIndex":0}]`, `[{"Claims":123456789012345678,"CreateIndex":999999999999999999}]`,
	`[{"Claims":1234567890123456789,"CreateIndex":18446744073709551615}]`, `[{"Claims":9223372036854775808}]`,
	`[{"Claims":12a}]`, `[{"CreateIndex":00}]`, `[{"Claims":7 }]`,
	// keys out of the agent's order, given twice, spaced, or in another case
	`[{"ID":"a","ID":"b"}]`, `[{"Namespace":"n","ID":"a","Name":"x"}]`, `[{"ID":"a","Namespace" :"n","Name":"x"}]`,
	`[{"ID":"a","namespace":"n"}]`, `[{"ID":"a","Namespace":"n","Namespace":"m"}]`, `[{"ID":"a","Names":"n"}]`,
	`[{"Schedulable":tru}]`, `[{"Schedulable":truex}]`, `[{"Schedulable":1}]`,
	`[{"Topologies":[{"Segments":{"z":"a"}}]}]`, `[{"Topologies":{}}]`,
	`[{"ResourceExhausted":"2026-11-25T12:00:00Z"}]`, `[{"ResourceExhausted":"yesterday"}]`,
	`[{"ID":"x",}]`, `[{"ID":"x"},]`, `[{"ID":"x"}] x`, `[{"ID":"x"}`, `[{"ID":"x}]`, `[{"ID" "x"}]`,
	`{"ID":"x"}`, `[{"Unknown":[1,2}]`, `[{"Unknown":}]`, `[{"ID":"x"}]]`, ``, `[`, `"\`,
}

func TestVolumeStubList_EdgeCasesMatchEncodingJSON(t *testing.T) {
	for _, body := range stubEdgeBodies {
		t.Run(body, func(t *testing.T) { stubsLikeEncodingJSON(t, []byte(body)) })
	}
}

// go test -run '^$' -bench VolumeStubs ./api/
func BenchmarkVolumeStubs1000(b *testing.B) {
	// As the agent lists the volumes berth-bench registers: plain
	// strings, no topologies.
	stubs := sampleStubs(1000)
	for _, s := range stubs {
		s.Name, s.Topologies, s.ResourceExhausted = s.ID, nil, nil
	}
	body, err := json.Marshal(stubs)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			var out []*CSIVolumeListStub
			if err := json.Unmarshal(body, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			var out volumeStubList
			if err := out.decodeJSON(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
