package nomad

import (
	"reflect"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/msgpack"
	"github.com/berth-io/berth/nomad/structs"
)

// fill sets every field reachable from v to a non-zero value (empty
// selects empty non-nil maps and slices instead of one element), so a
// round trip that drops or changes any field fails the comparison.
func fill(v reflect.Value, empty bool, depth int) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("s-" + v.Type().Name())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Pointer:
		if depth > 6 {
			return
		}
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), empty, depth+1)
		v.Set(p)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), empty, depth+1)
			}
		}
	case reflect.Slice:
		n := 1
		if empty {
			n = 0
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			fill(s.Index(i), empty, depth+1)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		if !empty && depth <= 6 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(k, empty, depth+1)
			fill(e, empty, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	}
}

// TestHandOff_RegisterRoundTripsEqual: the leader stores the register
// message it proposed as it is (handOff) while followers decode the
// entry; the two must be equal, every field set, empty and nil.
func TestHandOff_RegisterRoundTripsEqual(t *testing.T) {
	for _, empty := range []bool{false, true} {
		var req structs.CSIVolumeRegisterRequest
		fill(reflect.ValueOf(&req).Elem(), empty, 0)
		req.Volumes = append(req.Volumes, nil, &structs.CSIVolume{ID: "zero"})
		buf, err := encodeEntry(structs.CSIVolumeRegisterRequestType, &req)
		must.NoError(t, err)
		var got structs.CSIVolumeRegisterRequest
		must.NoError(t, msgpack.Decode(buf[1:], &got))
		must.True(t, reflect.DeepEqual(&req, &got), must.Sprintf("empty=%v:\n%#v\n%#v", empty, req.Volumes[0], got.Volumes[0]))
	}
}

// TestHandOff_PlanRoundTripsEqual: the leader's FSM stores a plan without
// allocs' jobs (joblessPlan) as the applier built it; followers decode it.
func TestHandOff_PlanRoundTripsEqual(t *testing.T) {
	for _, empty := range []bool{false, true} {
		var req structs.ApplyPlanResultsRequest
		fill(reflect.ValueOf(&req).Elem(), empty, 0)
		req.AllocsUpdated = append(req.AllocsUpdated, nil, &structs.Allocation{ID: "zero"})
		for _, a := range req.AllocsUpdated {
			if a != nil {
				a.Job = nil
			}
		}
		must.True(t, joblessPlan(&req))
		buf, err := encodeEntry(structs.ApplyPlanResultsRequestType, &req)
		must.NoError(t, err)
		var got structs.ApplyPlanResultsRequest
		must.NoError(t, msgpack.Decode(buf[1:], &got))
		must.True(t, reflect.DeepEqual(&req, &got), must.Sprintf("empty=%v:\n%#v\n%#v", empty, req, got))
	}
}

// TestHandOff_ClaimWritesRoundTripEqual: the leader's FSM applies the
// claim writes it proposed as the group commit built them; followers
// decode the entry. Both kinds of claim entry round-trip equal.
func TestHandOff_ClaimWritesRoundTripEqual(t *testing.T) {
	for _, empty := range []bool{false, true} {
		var one structs.CSIVolumeClaimBatchRequest
		fill(reflect.ValueOf(&one).Elem(), empty, 0)
		buf, err := encodeEntry(structs.CSIVolumeClaimRequestType, &one)
		must.NoError(t, err)
		var gotOne structs.CSIVolumeClaimBatchRequest
		must.NoError(t, msgpack.Decode(buf[1:], &gotOne))
		must.True(t, reflect.DeepEqual(&one, &gotOne), must.Sprintf("empty=%v:\n%#v\n%#v", empty, one, gotOne))

		var groups structs.CSIVolumeClaimGroupsRequest
		fill(reflect.ValueOf(&groups).Elem(), empty, 0)
		buf, err = encodeEntry(structs.CSIVolumeClaimGroupsRequestType, &groups)
		must.NoError(t, err)
		var gotGroups structs.CSIVolumeClaimGroupsRequest
		must.NoError(t, msgpack.Decode(buf[1:], &gotGroups))
		must.True(t, reflect.DeepEqual(&groups, &gotGroups), must.Sprintf("empty=%v:\n%#v\n%#v", empty, groups, gotGroups))
	}
}
