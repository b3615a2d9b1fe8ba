package agent

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/nomad/structs"
)

// jsonAppender is an answer that writes its own JSON, byte for byte what
// encoding/json would write for it (wrap uses it unless ?pretty).
type jsonAppender interface {
	appendJSON(buf []byte) ([]byte, error)
}

// volumeList is the answer of GET /v1/volumes?type=csi: the servers'
// stubs and their plugins' health, written as the []*api.CSIVolumeListStub
// they convert to without building that list. encoding/json's reflection
// was about half of the agent's time on a list of 1,000 volumes, and the
// converted list another 260 KB of pointers for the GC a request. Each
// stub is converted into one reused api stub and written from it: the
// flat fields directly; a nested one (Topologies, ResourceExhausted) or a
// string that needs escaping goes through encoding/json.
// csi_list_json_test.go compares the bytes with encoding/json's on stubs
// with every field set.
type volumeList struct {
	vols   []*structs.CSIVolumeListStub
	health map[string]*structs.CSIPluginListStub
}

// stubJSONSize is about the bytes of one stub's JSON.
const stubJSONSize = 480

func (l volumeList) appendJSON(buf []byte) ([]byte, error) {
	// A stub is ~450 bytes: one allocation instead of a dozen of growth.
	buf = slices.Grow(buf, stubJSONSize*len(l.vols)+2)
	if l.vols == nil {
		return append(buf, "null"...), nil
	}
	buf = append(buf, '[')
	var s api.CSIVolumeListStub
	for i, v := range l.vols {
		if i > 0 {
			buf = append(buf, ',')
		}
		volumeStubToAPI(&s, v, healthOfPlugin(l.health[v.PluginID]))
		var err error
		if buf, err = appendStub(buf, &s); err != nil {
			return nil, err
		}
	}
	return append(buf, ']'), nil
}

// MarshalJSON is the list for encoding/json (?pretty indents it).
func (l volumeList) MarshalJSON() ([]byte, error) { return l.appendJSON(nil) }

// appendStub writes s as encoding/json does.
func appendStub(buf []byte, s *api.CSIVolumeListStub) ([]byte, error) {
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
