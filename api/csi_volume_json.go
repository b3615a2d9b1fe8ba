package api

import (
	"encoding/json"
	"slices"
	"strconv"
)

// The JSON of a volume register request and of its answer, written
// without reflection: the answer byte for byte what encoding/json writes,
// the request what encoding/json writes less its zero fields, which any
// JSON decoder reads back as the same volumes (csi_volume_json_test.go
// holds both to that on volumes with every field set). encoding/json's
// reflection over 1,000 volumes was ~5 ms of the agent's CPU for the
// answer, and ~3 ms of the client's for the request. The flat fields, the string maps and the
// capabilities are written directly; the rarely set nested fields
// (allocations, claims, topologies, stats, expansion) through
// encoding/json.

// volumeJSONSize is about the bytes of one volume's JSON.
const volumeJSONSize = 1024

// requestJSON is the body the client sends for a register or create of
// r (newRequest): each volume's set fields (appendVolumeRequestJSON), so
// a 1,000-volume body is ~170 KB instead of the ~800 KB of every field,
// which the agent had to read, scan and decode key by key.
func (r *CSIVolumeRegisterRequest) requestJSON() ([]byte, error) {
	buf := make([]byte, 0, 256*len(r.Volumes)+16)
	buf, err := appendArray(append(buf, `{"Volumes":`...), r.Volumes, appendVolumeRequestJSON)
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

// appendVolumeRequestJSON writes v as encoding/json would, in its field
// order, but without the fields at their zero value (an empty string, 0,
// false, a nil map, slice or pointer, and the omitempty fields when
// empty): decoded into a new volume, by encoding/json or by Nomad's agent,
// an absent field is that same zero. A non-nil empty map or slice is
// written ({} or []), as it decodes as empty, not nil.
func appendVolumeRequestJSON(buf []byte, v *CSIVolume) ([]byte, error) {
	if v == nil {
		return append(buf, "null"...), nil
	}
	w := objectWriter{buf: append(buf, '{')}
	w.str("ID", v.ID)
	w.str("Name", v.Name)
	w.str("ExternalID", v.ExternalID)
	w.str("Namespace", v.Namespace)
	w.marshalled("Topologies", v.Topologies == nil, v.Topologies)
	w.marshalled("RequestedTopologies", v.RequestedTopologies == nil, v.RequestedTopologies)
	w.str("AccessMode", string(v.AccessMode))
	w.str("AttachmentMode", string(v.AttachmentMode))
	if o := v.MountOptions; o != nil {
		w.key("MountOptions")
		w.buf = appendJSONString(append(w.buf, `{"FSType":`...), o.FSType)
		w.buf = append(appendStrings(append(w.buf, `,"MountFlags":`...), o.MountFlags), '}')
	}
	w.stringMap("Secrets", v.Secrets)
	w.stringMap("Parameters", v.Parameters)
	w.stringMap("Context", v.Context)
	w.int("Capacity", v.Capacity)
	w.int("RequestedCapacityMin", v.RequestedCapacityMin)
	w.int("RequestedCapacityMax", v.RequestedCapacityMax)
	if v.RequestedCapabilities != nil {
		w.key("RequestedCapabilities")
		w.buf, _ = appendArray(w.buf, v.RequestedCapabilities, appendCapability)
	}
	w.str("CloneID", v.CloneID)
	w.str("SnapshotID", v.SnapshotID)
	w.marshalled("ReadAllocs", v.ReadAllocs == nil, v.ReadAllocs)
	w.marshalled("WriteAllocs", v.WriteAllocs == nil, v.WriteAllocs)
	w.marshalled("Allocations", v.Allocations == nil, v.Allocations)
	w.bool("Created", v.Created)
	w.int("CurrentReaders", int64(v.CurrentReaders))
	w.int("CurrentWriters", int64(v.CurrentWriters))
	w.bool("Schedulable", v.Schedulable)
	w.str("PluginID", v.PluginID)
	w.str("Provider", v.Provider)
	w.str("ProviderVersion", v.ProviderVersion)
	w.bool("ControllerRequired", v.ControllerRequired)
	w.int("ControllersHealthy", int64(v.ControllersHealthy))
	w.int("ControllersExpected", int64(v.ControllersExpected))
	w.int("NodesHealthy", int64(v.NodesHealthy))
	w.int("NodesExpected", int64(v.NodesExpected))
	w.marshalled("ResourceExhausted", v.ResourceExhausted == nil, v.ResourceExhausted)
	w.uint("CreateIndex", v.CreateIndex)
	w.uint("ModifyIndex", v.ModifyIndex)
	w.int("CreateTime", v.CreateTime)
	w.int("ModifyTime", v.ModifyTime)
	w.str("State", string(v.State))
	w.marshalled("Claims", len(v.Claims) == 0, v.Claims)
	w.marshalled("PastClaims", len(v.PastClaims) == 0, v.PastClaims)
	w.marshalled("Stats", len(v.Stats) == 0, v.Stats)
	w.marshalled("Expansion", v.Expansion == nil, v.Expansion)
	if len(v.MutableParameters) > 0 {
		w.stringMap("MutableParameters", v.MutableParameters)
	}
	w.marshalled("Modification", v.Modification == nil, v.Modification)
	if w.err != nil {
		return nil, w.err
	}
	return append(w.buf, '}'), nil
}

// objectWriter writes an object's members, each left out at its zero
// value (appendVolumeRequestJSON); the first error stops it.
type objectWriter struct {
	buf []byte
	n   int
	err error
}

func (w *objectWriter) key(k string) {
	if w.n > 0 {
		w.buf = append(w.buf, ',')
	}
	w.n++
	w.buf = append(append(append(w.buf, '"'), k...), '"', ':')
}

func (w *objectWriter) str(k, s string) {
	if s != "" {
		w.key(k)
		w.buf = appendJSONString(w.buf, s)
	}
}

func (w *objectWriter) int(k string, n int64) {
	if n != 0 {
		w.key(k)
		w.buf = strconv.AppendInt(w.buf, n, 10)
	}
}

func (w *objectWriter) uint(k string, n uint64) {
	if n != 0 {
		w.key(k)
		w.buf = strconv.AppendUint(w.buf, n, 10)
	}
}

func (w *objectWriter) bool(k string, b bool) {
	if b {
		w.key(k)
		w.buf = append(w.buf, "true"...)
	}
}

func (w *objectWriter) stringMap(k string, m map[string]string) {
	if m != nil {
		w.key(k)
		w.buf = appendStringMap(w.buf, m)
	}
}

// marshalled writes v through encoding/json unless empty.
func (w *objectWriter) marshalled(k string, empty bool, v any) {
	if empty || w.err != nil {
		return
	}
	w.key(k)
	w.buf, w.err = appendMarshalled(w.buf, false, v)
}

func appendCapability(buf []byte, c *CSIVolumeCapability) ([]byte, error) {
	if c == nil {
		return append(buf, "null"...), nil
	}
	buf = appendJSONString(append(buf, `{"AccessMode":`...), string(c.AccessMode))
	return append(appendJSONString(append(buf, `,"AttachmentMode":`...), string(c.AttachmentMode)), '}'), nil
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
	buf, _ = appendArray(buf, v.RequestedCapabilities, appendCapability)
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
		if jsonNeedsEscape[s[i]] {
			b, _ := json.Marshal(s) // a string always encodes
			return append(buf, b...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}

// jsonNeedsEscape marks the bytes appendJSONString leaves to encoding/json:
// one lookup a byte instead of seven comparisons.
var jsonNeedsEscape = func() (t [256]bool) {
	for c := range t {
		t[c] = c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&'
	}
	return t
}()

// AppendJSON appends the stub's JSON, byte for byte what encoding/json
// writes for it: the agent writes a volume list with it (a list of 1,000
// through encoding/json's reflection was half of the agent's time).
func (s *CSIVolumeListStub) AppendJSON(buf []byte) ([]byte, error) {
	var err error
	buf = appendJSONString(append(buf, `{"ID":`...), s.ID)
	buf = appendJSONString(append(buf, `,"Namespace":`...), s.Namespace)
	buf = appendJSONString(append(buf, `,"Name":`...), s.Name)
	buf = appendJSONString(append(buf, `,"ExternalID":`...), s.ExternalID)
	if buf, err = appendMarshalled(append(buf, `,"Topologies":`...), s.Topologies == nil, s.Topologies); err != nil {
		return nil, err
	}
	buf = appendJSONString(append(buf, `,"AccessMode":`...), string(s.AccessMode))
	buf = appendJSONString(append(buf, `,"AttachmentMode":`...), string(s.AttachmentMode))
	buf = strconv.AppendInt(append(buf, `,"CurrentReaders":`...), int64(s.CurrentReaders), 10)
	buf = strconv.AppendInt(append(buf, `,"CurrentWriters":`...), int64(s.CurrentWriters), 10)
	buf = strconv.AppendBool(append(buf, `,"Schedulable":`...), s.Schedulable)
	buf = appendJSONString(append(buf, `,"PluginID":`...), s.PluginID)
	buf = appendJSONString(append(buf, `,"Provider":`...), s.Provider)
	buf = strconv.AppendBool(append(buf, `,"ControllerRequired":`...), s.ControllerRequired)
	buf = strconv.AppendInt(append(buf, `,"ControllersHealthy":`...), int64(s.ControllersHealthy), 10)
	buf = strconv.AppendInt(append(buf, `,"ControllersExpected":`...), int64(s.ControllersExpected), 10)
	buf = strconv.AppendInt(append(buf, `,"NodesHealthy":`...), int64(s.NodesHealthy), 10)
	buf = strconv.AppendInt(append(buf, `,"NodesExpected":`...), int64(s.NodesExpected), 10)
	if buf, err = appendMarshalled(append(buf, `,"ResourceExhausted":`...), s.ResourceExhausted == nil, s.ResourceExhausted); err != nil {
		return nil, err
	}
	buf = strconv.AppendUint(append(buf, `,"CreateIndex":`...), s.CreateIndex, 10)
	buf = strconv.AppendUint(append(buf, `,"ModifyIndex":`...), s.ModifyIndex, 10)
	if s.State != "" {
		buf = appendJSONString(append(buf, `,"State":`...), string(s.State))
	}
	if s.Claims != 0 {
		buf = strconv.AppendInt(append(buf, `,"Claims":`...), int64(s.Claims), 10)
	}
	return append(buf, '}'), nil
}
