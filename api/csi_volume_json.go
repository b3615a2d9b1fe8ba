package api

import (
	"encoding/json"
	"slices"
	"strconv"
)

// The JSON of a volume register request and of its answer, written
// without reflection and byte for byte what encoding/json writes
// (csi_volume_json_test.go holds both to it on volumes with every field
// set): encoding/json's reflection over 1,000 volumes was ~5 ms of the
// agent's CPU for the answer, and ~3 ms of the client's for the request,
// on a 1,000-volume register. The flat fields, the string maps and the
// capabilities are written directly; the rarely set nested fields
// (allocations, claims, topologies, stats, expansion) through
// encoding/json.

// volumeJSONSize is about the bytes of one volume's JSON.
const volumeJSONSize = 1024

// AppendJSON appends the request's JSON to buf, as encoding/json's
// Marshal would write it. The client sends a register or create with it.
func (r *CSIVolumeRegisterRequest) AppendJSON(buf []byte) ([]byte, error) {
	buf = slices.Grow(buf, volumeJSONSize*len(r.Volumes)+16)
	buf, err := appendArray(append(buf, `{"Volumes":`...), r.Volumes, appendVolumeJSON)
	if err != nil {
		return nil, err
	}
	return append(buf, '}'), nil
}

// AppendJSON appends the answer's JSON to buf, as encoding/json's Marshal
// would write it. The agent answers a register or create with it.
func (r *CSIVolumeRegisterResponse) AppendJSON(buf []byte) ([]byte, error) {
	buf = slices.Grow(buf, volumeJSONSize*len(r.Volumes)+64)
	buf = append(buf, `{"Volumes":`...)
	buf, err := appendArray(buf, r.Volumes, appendVolumeJSON)
	if err != nil {
		return nil, err
	}
	buf = appendJSONString(append(buf, `,"Warnings":`...), r.Warnings)
	if len(r.Outcomes) > 0 {
		buf = appendStrings(append(buf, `,"Outcomes":`...), r.Outcomes)
	}
	return append(buf, '}'), nil
}

func appendVolumeJSON(buf []byte, v *CSIVolume) ([]byte, error) {
	if v == nil {
		return append(buf, "null"...), nil
	}
	var err error
	buf = appendJSONString(append(buf, `{"ID":`...), v.ID)
	buf = appendJSONString(append(buf, `,"Name":`...), v.Name)
	buf = appendJSONString(append(buf, `,"ExternalID":`...), v.ExternalID)
	buf = appendJSONString(append(buf, `,"Namespace":`...), v.Namespace)
	if buf, err = appendNested(append(buf, `,"Topologies":`...), v.Topologies == nil, len(v.Topologies) == 0, "[]", v.Topologies); err != nil {
		return nil, err
	}
	if buf, err = appendMarshalled(append(buf, `,"RequestedTopologies":`...), v.RequestedTopologies == nil, v.RequestedTopologies); err != nil {
		return nil, err
	}
	buf = appendJSONString(append(buf, `,"AccessMode":`...), string(v.AccessMode))
	buf = appendJSONString(append(buf, `,"AttachmentMode":`...), string(v.AttachmentMode))
	buf = append(buf, `,"MountOptions":`...)
	if o := v.MountOptions; o == nil {
		buf = append(buf, "null"...)
	} else {
		buf = appendJSONString(append(buf, `{"FSType":`...), o.FSType)
		buf = append(appendStrings(append(buf, `,"MountFlags":`...), o.MountFlags), '}')
	}
	buf = appendStringMap(append(buf, `,"Secrets":`...), v.Secrets)
	buf = appendStringMap(append(buf, `,"Parameters":`...), v.Parameters)
	buf = appendStringMap(append(buf, `,"Context":`...), v.Context)
	buf = strconv.AppendInt(append(buf, `,"Capacity":`...), v.Capacity, 10)
	buf = strconv.AppendInt(append(buf, `,"RequestedCapacityMin":`...), v.RequestedCapacityMin, 10)
	buf = strconv.AppendInt(append(buf, `,"RequestedCapacityMax":`...), v.RequestedCapacityMax, 10)
	buf = append(buf, `,"RequestedCapabilities":`...)
	buf, _ = appendArray(buf, v.RequestedCapabilities, func(buf []byte, c *CSIVolumeCapability) ([]byte, error) {
		if c == nil {
			return append(buf, "null"...), nil
		}
		buf = appendJSONString(append(buf, `{"AccessMode":`...), string(c.AccessMode))
		return append(appendJSONString(append(buf, `,"AttachmentMode":`...), string(c.AttachmentMode)), '}'), nil
	})
	buf = appendJSONString(append(buf, `,"CloneID":`...), v.CloneID)
	buf = appendJSONString(append(buf, `,"SnapshotID":`...), v.SnapshotID)
	if buf, err = appendNested(append(buf, `,"ReadAllocs":`...), v.ReadAllocs == nil, len(v.ReadAllocs) == 0, "{}", v.ReadAllocs); err != nil {
		return nil, err
	}
	if buf, err = appendNested(append(buf, `,"WriteAllocs":`...), v.WriteAllocs == nil, len(v.WriteAllocs) == 0, "{}", v.WriteAllocs); err != nil {
		return nil, err
	}
	if buf, err = appendNested(append(buf, `,"Allocations":`...), v.Allocations == nil, len(v.Allocations) == 0, "[]", v.Allocations); err != nil {
		return nil, err
	}
	if v.Created {
		buf = append(buf, `,"Created":true`...)
	}
	buf = strconv.AppendInt(append(buf, `,"CurrentReaders":`...), int64(v.CurrentReaders), 10)
	buf = strconv.AppendInt(append(buf, `,"CurrentWriters":`...), int64(v.CurrentWriters), 10)
	buf = strconv.AppendBool(append(buf, `,"Schedulable":`...), v.Schedulable)
	buf = appendJSONString(append(buf, `,"PluginID":`...), v.PluginID)
	buf = appendJSONString(append(buf, `,"Provider":`...), v.Provider)
	buf = appendJSONString(append(buf, `,"ProviderVersion":`...), v.ProviderVersion)
	buf = strconv.AppendBool(append(buf, `,"ControllerRequired":`...), v.ControllerRequired)
	buf = strconv.AppendInt(append(buf, `,"ControllersHealthy":`...), int64(v.ControllersHealthy), 10)
	buf = strconv.AppendInt(append(buf, `,"ControllersExpected":`...), int64(v.ControllersExpected), 10)
	buf = strconv.AppendInt(append(buf, `,"NodesHealthy":`...), int64(v.NodesHealthy), 10)
	buf = strconv.AppendInt(append(buf, `,"NodesExpected":`...), int64(v.NodesExpected), 10)
	if buf, err = appendMarshalled(append(buf, `,"ResourceExhausted":`...), v.ResourceExhausted == nil, v.ResourceExhausted); err != nil {
		return nil, err
	}
	buf = strconv.AppendUint(append(buf, `,"CreateIndex":`...), v.CreateIndex, 10)
	buf = strconv.AppendUint(append(buf, `,"ModifyIndex":`...), v.ModifyIndex, 10)
	buf = strconv.AppendInt(append(buf, `,"CreateTime":`...), v.CreateTime, 10)
	buf = strconv.AppendInt(append(buf, `,"ModifyTime":`...), v.ModifyTime, 10)
	if v.State != "" {
		buf = appendJSONString(append(buf, `,"State":`...), string(v.State))
	}
	// The omitempty fields below: encoding/json leaves out an empty
	// slice or map and a nil pointer.
	if len(v.Claims) > 0 {
		if buf, err = appendMarshalled(append(buf, `,"Claims":`...), false, v.Claims); err != nil {
			return nil, err
		}
	}
	if len(v.PastClaims) > 0 {
		if buf, err = appendMarshalled(append(buf, `,"PastClaims":`...), false, v.PastClaims); err != nil {
			return nil, err
		}
	}
	if len(v.Stats) > 0 {
		if buf, err = appendMarshalled(append(buf, `,"Stats":`...), false, v.Stats); err != nil {
			return nil, err
		}
	}
	if v.Expansion != nil {
		if buf, err = appendMarshalled(append(buf, `,"Expansion":`...), false, v.Expansion); err != nil {
			return nil, err
		}
	}
	if len(v.MutableParameters) > 0 {
		buf = appendStringMap(append(buf, `,"MutableParameters":`...), v.MutableParameters)
	}
	if v.Modification != nil {
		if buf, err = appendMarshalled(append(buf, `,"Modification":`...), false, v.Modification); err != nil {
			return nil, err
		}
	}
	return append(buf, '}'), nil
}

// appendStrings writes a string slice as encoding/json does (nil: null).
func appendStrings(buf []byte, l []string) []byte {
	buf, _ = appendArray(buf, l, func(buf []byte, s string) ([]byte, error) { return appendJSONString(buf, s), nil })
	return buf
}

// appendArray writes a slice as encoding/json does: null when nil, else
// each element by appendElem between brackets. The first error ends it.
func appendArray[T any](buf []byte, l []T, appendElem func([]byte, T) ([]byte, error)) ([]byte, error) {
	if l == nil {
		return append(buf, "null"...), nil
	}
	buf = append(buf, '[')
	for i, e := range l {
		if i > 0 {
			buf = append(buf, ',')
		}
		var err error
		if buf, err = appendElem(buf, e); err != nil {
			return nil, err
		}
	}
	return append(buf, ']'), nil
}

// appendStringMap writes a string map as encoding/json does: null when
// nil, else its keys sorted.
func appendStringMap[M ~map[string]string](buf []byte, m M) []byte {
	if m == nil {
		return append(buf, "null"...)
	}
	buf = append(buf, '{')
	var small [8]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(appendJSONString(buf, k), ':')
		buf = appendJSONString(buf, m[k])
	}
	return append(buf, '}')
}

// appendNested is appendMarshalled with the empty value (an empty map or
// slice, written as empty) written directly: most volumes have empty
// alloc maps and lists, and encoding/json took a few µs for each.
func appendNested(buf []byte, isNil, isEmpty bool, empty string, v any) ([]byte, error) {
	if !isNil && isEmpty {
		return append(buf, empty...), nil
	}
	return appendMarshalled(buf, isNil, v)
}

// appendMarshalled writes null for a nil value, else encoding/json's
// encoding of v.
func appendMarshalled(buf []byte, isNil bool, v any) ([]byte, error) {
	if isNil {
		return append(buf, "null"...), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(buf, b...), nil
}

// appendJSONString writes s quoted as encoding/json does: a string of
// printable ASCII without '"', '\\' or the HTML characters it escapes
// (<, >, &) as it is, any other through encoding/json.
func appendJSONString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s) // a string always encodes
			return append(buf, b...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}
