package agent

import (
	"slices"

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
		if buf, err = s.AppendJSON(buf); err != nil {
			return nil, err
		}
	}
	return append(buf, ']'), nil
}

// MarshalJSON is the list for encoding/json (?pretty indents it).
func (l volumeList) MarshalJSON() ([]byte, error) { return l.appendJSON(nil) }
