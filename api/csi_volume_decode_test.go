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

// volumesLikeEncodingJSON decodes body as a register request and as its
// answer, both ways, and checks that the fast decoder gives
// encoding/json's result or error.
func volumesLikeEncodingJSON(t *testing.T, body []byte) {
	t.Helper()
	var wantReq CSIVolumeRegisterRequest
	wantErr := json.Unmarshal(body, &wantReq)
	var gotReq CSIVolumeRegisterRequest
	gotErr := DecodeCSIVolumeRegisterRequest(body, &gotReq)
	sameResult(t, body, wantReq, gotReq, wantErr, gotErr)

	var wantResp, gotResp CSIVolumeRegisterResponse
	wantErr = json.Unmarshal(body, &wantResp)
	gotErr = volumesResponse{&gotResp}.decodeJSON(body)
	sameResult(t, body, wantResp, gotResp, wantErr, gotErr)
}

func sameResult[T any](t *testing.T, body []byte, want, got T, wantErr, gotErr error) {
	t.Helper()
	if wantErr != nil {
		must.Error(t, gotErr, must.Sprintf("encoding/json refuses %q", body))
		must.Eq(t, wantErr.Error(), gotErr.Error())
		return
	}
	must.NoError(t, gotErr, must.Sprintf("body %q", body))
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("body %s:\nencoding/json: %s\nfast decoder:  %s", body, dump(want), dump(got))
	}
}

// sampleVolumes are volumes with every field set (the golden volume of
// wire_test.go, with escapes and extremes) and bare ones as berth-bench
// registers them.
func sampleVolumes(t testing.TB, n int) []*CSIVolume {
	golden, err := os.ReadFile(filepath.Join("testdata", "csi_volume.json"))
	must.NoError(t, err)
	exhausted := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	out := make([]*CSIVolume, 0, n)
	for i := range n {
		var v CSIVolume
		must.NoError(t, json.Unmarshal(golden, &v))
		switch i % 3 {
		case 0:
			v.Name = "Volume «x»\t\"quoted\" <b>"
			v.Secrets = CSISecrets{"token": "s3cr\u00e9t", "": ""}
			v.MutableParameters = map[string]string{"iops": "300"}
			v.ResourceExhausted = &exhausted
			v.Created, v.Capacity, v.RequestedCapacityMax = true, -1<<63, 1<<62
			v.Stats = map[string]*CSIVolumeStats{"n1": nil}
			v.RequestedCapabilities = append(v.RequestedCapabilities, nil)
		case 1:
			v = CSIVolume{ID: "bench-reg-0001", Name: "bench-reg-0001", PluginID: "hostpath",
				RequestedCapabilities: []*CSIVolumeCapability{{AccessMode: CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: CSIVolumeAttachmentModeFilesystem}},
				ReadAllocs:            map[string]*Allocation{}, WriteAllocs: map[string]*Allocation{}, Allocations: []*AllocationListStub{},
				Topologies: []*CSITopology{}, CreateIndex: 18446744073709551615}
		}
		out = append(out, &v)
	}
	return out
}

// Every field of CSIVolume has its name in volumeFields: a field the
// decoder did not know would be skipped as unknown, silently.
func TestDecodeVolumes_KnowsEveryField(t *testing.T) {
	var names []string
	for f := range reflect.TypeFor[CSIVolume]().Fields() {
		names = append(names, f.Name)
	}
	must.Eq(t, names, volumeFields)
	must.MapLen(t, len(volumeFields), volumeFieldBit) // distinct names
	must.LessEq(t, 64, len(volumeFields))
}

// The fast decoder reads register requests and answers exactly as
// encoding/json does, and takes them itself.
func TestDecodeVolumes_DecodesAsEncodingJSON(t *testing.T) {
	vols := sampleVolumes(t, 9)
	req, err := json.Marshal(CSIVolumeRegisterRequest{Volumes: vols})
	must.NoError(t, err)
	resp, err := json.Marshal(CSIVolumeRegisterResponse{Volumes: vols, Warnings: "volume \"x\": no controller\nsecond"})
	must.NoError(t, err)
	indented, err := json.MarshalIndent(CSIVolumeRegisterResponse{Volumes: vols[:3]}, " ", "\t")
	must.NoError(t, err)
	for _, b := range [][]byte{req, resp, indented} {
		volumesLikeEncodingJSON(t, b)
	}
	for _, b := range [][]byte{req, resp, indented} {
		var out []*CSIVolume
		var w string
		must.True(t, decodeVolumes(b, &out, &w, false), must.Sprintf("fell back to encoding/json on %.200s", b))
		must.Eq(t, vols[:len(out)], out)
	}
}

// Bodies the fast path must not take as it reads them: each either goes
// to encoding/json, or decodes to the same thing.
// volumeEdgeBodies are bodies at the edges of what the fast decoder takes; the
// edge-case test and the fuzz target start from them.
var volumeEdgeBodies = []string{
	`null`, `{}`, `[]`, `{"Volumes":null}`, `{"Volumes":[]}`, `{"Volumes":[null]}`, `{"Volumes":[{}]}`,
	`{"volumes":[{"ID":"lower-case key"}]}`, `{"Volumes":[{"id":"x"}]}`, `{"Volumes":[{"ID":"x","ID":"y"}]}`,
	`{"Volumes":[],"Volumes":[{"ID":"x"}]}`, `{"Warnings":"w","Volumes":[]}`, `{"warnings":"w"}`, `{"Warnings":"a","Warnings":"b"}`,
	`{"Region":"global","Namespace":"default","SecretID":"","Volumes":[{"ID":"x"}]}`, // Nomad's client's WriteRequest
	`{"Volumes":[{"ID":"a\u0041\n","Name":"\ud83d\ude00"}]}`,
	`{"Volumes":[{"ID":"bad utf8 ` + "\xff" + `"}]}`,
	`{"Volumes":[{"Parameters":{"a":"1","a":"2"}}]}`, `{"Volumes":[{"Parameters":{"a":null}}]}`, `{"Volumes":[{"Parameters":{"a":1}}]}`,
	`{"Volumes":[{"Parameters":{}}]}`, `{"Volumes":[{"Parameters":[]}]}`, `{"Volumes":[{"Secrets":{"k":"v"},"Context":{"k":"\\u00e9"}}]}`,
	`{"Volumes":[{"RequestedCapabilities":[{"accessmode":"x"}]}]}`, `{"Volumes":[{"RequestedCapabilities":[{"AccessMode":"a","AccessMode":"b"}]}]}`,
	`{"Volumes":[{"RequestedCapabilities":[{"AccessMode":null,"Other":[1,{}],"AttachmentMode":"f"},null]}]}`,
	`{"Volumes":[{"RequestedCapabilities":[{"accessMode":null}]}]}`, `{"Volumes":[{"RequestedCapabilities":{}}]}`,
	`{"Volumes":[{"ReadAllocs":{},"WriteAllocs":{"a":null},"Allocations":[],"Claims":[],"PastClaims":[ ],"Stats":{ }}]}`,
	`{"Volumes":[{"ReadAllocs":[],"Allocations":{}}]}`, `{"Volumes":[{"Topologies":[],"Topologies":[]}]}`,
	`{"Volumes":[{"Capacity":1.0}]}`, `{"Volumes":[{"Capacity":1e3}]}`, `{"Volumes":[{"Capacity":-9223372036854775809}]}`,
	`{"Volumes":[{"CreateIndex":-1}]}`, `{"Volumes":[{"Created":1}]}`, `{"Volumes":[{"Created":true}]}`,
	`{"Volumes":[{"MountOptions":{"FSType":"ext4","MountFlags":["ro"]}}]}`, `{"Volumes":[{"MountOptions":"x"}]}`,
	`{"Volumes":[{"MountOptions":{}}]}`, `{"Volumes":[{"MountOptions":{"FSType":null,"MountFlags":null}}]}`,
	`{"Volumes":[{"MountOptions":{"MountFlags":[],"Other":{"a":[1]}}}]}`, `{"Volumes":[{"MountOptions":{"MountFlags":["a",null]}}]}`,
	`{"Volumes":[{"MountOptions":{"fstype":"xfs"}}]}`, `{"Volumes":[{"MountOptions":{"FSType":"a","FSType":"b"}}]}`,
	`{"Volumes":[{"MountOptions":{"MountFlags":["a"],"MountFlags":["b","c"]}}]}`, `{"Volumes":[{"MountOptions":{"MountFlags":"ro"}}]}`,
	`{"Volumes":[{"MountOptions":{"MountFlags":[1]}}]}`, `{"Volumes":[{"MountOptions":{"MountFlags":["a",]}}]}`,
	`{"Volumes":[{"MountOptions":{"FSType":"\u0065xt4","MountFlags":["\t"]}}]}`, `{"Volumes":[{"MountOptions":[]}]}`,
	`{"Volumes":[{"ResourceExhausted":"2026-11-25T12:00:00Z"}]}`, `{"Volumes":[{"ResourceExhausted":"yesterday"}]}`,
	`{"Volumes":[{"Unknown":{"a":[1,"]}",{}]},"ID":"x"}]}`,
	`{"Volumes":[{"ID":"x",}]}`, `{"Volumes":[{"ID":"x"},]}`, `{"Volumes":[{"ID":"x"}]} x`, `{"Volumes":[{"ID":"x"}]`,
	`{"Volumes":[{"ID":"x}]}`, `{"Volumes":{"ID":"x"}}`, `{"Volumes":[{"ID" "x"}]}`, ``, `{`, `"\`,
}

func TestDecodeVolumes_EdgeCasesMatchEncodingJSON(t *testing.T) {
	for _, body := range volumeEdgeBodies {
		t.Run(body, func(t *testing.T) { volumesLikeEncodingJSON(t, []byte(body)) })
	}
}

// go test -run '^$' -bench DecodeVolumes ./api/
func BenchmarkDecodeVolumes1000(b *testing.B) {
	vols := make([]*CSIVolume, 1000)
	for i := range vols {
		vols[i] = &CSIVolume{ID: "bench-batch-0-" + string(rune('a'+i%26)), Name: "x", PluginID: "hostpath", Namespace: "default",
			Provider: "hostpath.csi.berth.io", State: "ready", ReadAllocs: map[string]*Allocation{}, WriteAllocs: map[string]*Allocation{},
			Allocations: []*AllocationListStub{}, Schedulable: true, NodesHealthy: 1, NodesExpected: 1, CreateIndex: 20, ModifyIndex: 20,
			RequestedCapabilities: []*CSIVolumeCapability{{AccessMode: CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: CSIVolumeAttachmentModeFilesystem}}}
	}
	body, err := json.Marshal(CSIVolumeRegisterResponse{Volumes: vols})
	must.NoError(b, err)
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			var out CSIVolumeRegisterResponse
			if err := json.Unmarshal(body, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			var out CSIVolumeRegisterResponse
			if err := (volumesResponse{&out}).decodeJSON(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The agent's side: a register request of berth-bench's volumes as
	// encoding/json writes it (Nomad's client) and as this client does.
	reqVols := make([]*CSIVolume, 1000)
	for i := range reqVols {
		reqVols[i] = &CSIVolume{ID: fmt.Sprintf("bench-batch-0-%04d", i), Name: fmt.Sprintf("bench-batch-0-%04d", i), PluginID: "hostpath",
			RequestedCapabilities: []*CSIVolumeCapability{{AccessMode: CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: CSIVolumeAttachmentModeFilesystem}}}
	}
	req := &CSIVolumeRegisterRequest{Volumes: reqVols}
	full, err := json.Marshal(req)
	must.NoError(b, err)
	compact, err := req.requestJSON()
	must.NoError(b, err)
	for _, c := range []struct {
		name string
		body []byte
	}{{"request-full", full}, {"request-compact", compact}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			for b.Loop() {
				var out CSIVolumeRegisterRequest
				if err := DecodeCSIVolumeRegisterRequest(c.body, &out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// stringsInside lists the strings reachable from v whose bytes lie in
// mem (a string that is a slice of it).
func stringsInside(v reflect.Value, mem string, path string, out *[]string) {
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		if len(s) == 0 || len(mem) == 0 {
			return
		}
		p, lo := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(mem)))
		if p >= lo && p < lo+uintptr(len(mem)) {
			*out = append(*out, path+"="+s)
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			stringsInside(v.Elem(), mem, path, out)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				stringsInside(v.Field(i), mem, path+"."+v.Type().Field(i).Name, out)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			stringsInside(v.Index(i), mem, path, out)
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			stringsInside(it.Key(), mem, path+"[key]", out)
			stringsInside(it.Value(), mem, path+"[value]", out)
		}
	}
}

// TestDecodeCSIVolumeRegisterRequest_KeepsNoSliceOfTheBody: the agent's
// servers store a register's volumes as decoded, so none of their strings
// may be a slice of the body (which would keep all of it alive); the
// answer's decoder, whose result is short-lived, may and does share.
func TestDecodeCSIVolumeRegisterRequest_KeepsNoSliceOfTheBody(t *testing.T) {
	vol := &CSIVolume{ID: "vol-1", Name: "name", ExternalID: "ext", Namespace: "ns", PluginID: "hostpath",
		CloneID: "c", SnapshotID: "s", Provider: "p", ProviderVersion: "1",
		AccessMode: CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: CSIVolumeAttachmentModeFilesystem,
		RequestedCapabilities: []*CSIVolumeCapability{{AccessMode: CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: CSIVolumeAttachmentModeFilesystem}},
		MountOptions:          &CSIMountOptions{FSType: "ext4", MountFlags: []string{"ro", "noatime"}},
		Secrets:               CSISecrets{"token": "secret"}, Parameters: map[string]string{"tier": "gold"},
		Context: map[string]string{"zone": "a"}, MutableParameters: map[string]string{"iops": "100"},
		Topologies: []*CSITopology{{Segments: map[string]string{"rack": "r1"}}},
	}
	body, err := json.Marshal(CSIVolumeRegisterRequest{Volumes: []*CSIVolume{vol}})
	must.NoError(t, err)

	var req CSIVolumeRegisterRequest
	must.NoError(t, DecodeCSIVolumeRegisterRequest(body, &req))
	must.Eq(t, []*CSIVolume{vol}, req.Volumes)

	for _, own := range []bool{true, false} {
		d := &stubDecoder{b: body, s: string(body), own: own}
		var vols []*CSIVolume
		must.True(t, d.volumesBody(&vols, nil))
		must.Eq(t, []*CSIVolume{vol}, vols)
		var shared []string
		stringsInside(reflect.ValueOf(vols), d.s, "volume", &shared)
		if own {
			must.SliceEmpty(t, shared)
		} else {
			must.SliceNotEmpty(t, shared) // the check sees a slice of the body
		}
	}
}
