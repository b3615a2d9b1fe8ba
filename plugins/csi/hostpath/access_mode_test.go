package hostpath

import (
	"encoding/json"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/shoenig/test/must"
)

func TestParseCapability(t *testing.T) {
	cases := []struct {
		name    string
		cap     *csi.VolumeCapability
		want    AccessMode
		wantErr string
	}{
		{name: "mount", cap: mountCap(snw), want: modeSingleNodeWriter},
		{name: "missing", cap: nil, wantErr: "volume_capability is required"},
		{name: "block", cap: blockCap(), want: modeSingleNodeWriter},
		{name: "no access type", cap: &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: snw}}, wantErr: "access type is required"},
		{name: "no access mode", cap: &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}}}, wantErr: "access_mode is required"},
		{name: "unknown access mode", cap: mountCap(99), wantErr: "unknown access mode 99"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseCapability(tc.cap)
			if tc.wantErr != "" {
				must.ErrorContains(t, err, tc.wantErr)
				return
			}
			must.NoError(t, err)
			must.EqOp(t, tc.want, got)
		})
	}
}

func TestAccessModeJSON(t *testing.T) {
	b, err := json.Marshal(Stage{NodeID: "a", Path: "/s", Mode: modeMultiNodeSingleWriter})
	must.NoError(t, err)
	must.StrContains(t, string(b), `"mode":"MULTI_NODE_SINGLE_WRITER"`)
	var s Stage
	must.NoError(t, json.Unmarshal(b, &s))
	must.EqOp(t, modeMultiNodeSingleWriter, s.Mode)
	must.ErrorContains(t, json.Unmarshal([]byte(`{"mode":"BOGUS"}`), &s), `unknown access mode "BOGUS"`)
}
