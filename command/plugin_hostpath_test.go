package command

import (
	"bytes"
	"os"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/plugins/csi/hostpath"
)

func TestPluginHostpathFlags(t *testing.T) {
	host, err := os.Hostname()
	must.NoError(t, err)
	cases := []struct {
		name    string
		env     string
		args    []string
		want    hostpath.Config
		level   hclog.Level
		wantErr string
	}{
		{
			name:  "defaults",
			args:  []string{"-endpoint", "unix:///tmp/x.sock", "-root", "/tmp/r"},
			want:  hostpath.Config{Endpoint: "unix:///tmp/x.sock", Root: "/tmp/r", NodeID: host, Mode: hostpath.ModeMonolith},
			level: hclog.Info,
		},
		{
			name: "everything",
			args: []string{"-endpoint", "/tmp/x.sock", "-root", "/tmp/r", "-node-id", "n1", "-mode", "node",
				"-capacity", "1048576", "-max-volumes", "4", "-topology", "-static-volumes", "-stage", "-log-level", "debug"},
			want: hostpath.Config{Endpoint: "/tmp/x.sock", Root: "/tmp/r", NodeID: "n1", Mode: hostpath.ModeNode,
				CapacityBytes: 1 << 20, MaxVolumesPerNode: 4, Topology: true, StaticVolumes: true, Stage: true},
			level: hclog.Debug,
		},
		{
			name:  "endpoint from CSI_ENDPOINT",
			env:   "unix:///csi/csi.sock",
			args:  []string{"-root", "/tmp/r", "-node-id", "n1"},
			want:  hostpath.Config{Endpoint: "unix:///csi/csi.sock", Root: "/tmp/r", NodeID: "n1", Mode: hostpath.ModeMonolith},
			level: hclog.Info,
		},
		{name: "no endpoint", args: []string{"-root", "/tmp/r"}, wantErr: "-endpoint is required"},
		{name: "tcp endpoint", args: []string{"-endpoint", "tcp://127.0.0.1:1", "-root", "/tmp/r"}, wantErr: "-endpoint"},
		{name: "no root", args: []string{"-endpoint", "/tmp/x.sock"}, wantErr: "-root is required"},
		{name: "bad mode", args: []string{"-endpoint", "/tmp/x.sock", "-root", "/r", "-mode", "both"}, wantErr: "-mode"},
		{name: "bad capacity", args: []string{"-endpoint", "/tmp/x.sock", "-root", "/r", "-capacity", "10G"}, wantErr: "-capacity"},
		{name: "negative capacity", args: []string{"-endpoint", "/tmp/x.sock", "-root", "/r", "-capacity", "-1"}, wantErr: "-capacity"},
		{name: "negative max volumes", args: []string{"-endpoint", "/tmp/x.sock", "-root", "/r", "-max-volumes", "-1"}, wantErr: "-max-volumes"},
		{name: "bad log level", args: []string{"-endpoint", "/tmp/x.sock", "-root", "/r", "-log-level", "loud"}, wantErr: "-log-level"},
		{name: "unknown flag", args: []string{"-endpoint", "/tmp/x.sock", "-root", "/r", "-bogus"}, wantErr: "-bogus"},
		{name: "stray argument", args: []string{"-endpoint", "/tmp/x.sock", "-root", "/r", "extra"}, wantErr: "unexpected arguments"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CSI_ENDPOINT", tc.env)
			c := &pluginHostpathCommand{ui: &UI{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}}
			cfg, level, err := c.parse(tc.args)
			if tc.wantErr != "" {
				must.ErrorContains(t, err, tc.wantErr)
				return
			}
			must.NoError(t, err)
			must.Eq(t, tc.want, cfg)
			must.EqOp(t, tc.level, level)
		})
	}
}

func TestPluginHostpathBadFlagsExitOne(t *testing.T) {
	t.Setenv("CSI_ENDPOINT", "")
	var out, errOut bytes.Buffer
	code := Run([]string{"plugin", "hostpath", "-root", "/tmp/r"}, &out, &errOut)
	must.EqOp(t, 1, code)
	must.StrContains(t, errOut.String(), "-endpoint is required")

	out.Reset()
	code = Run([]string{"plugin", "hostpath", "-help"}, &out, &errOut)
	must.EqOp(t, 0, code)
	must.StrContains(t, out.String(), "-max-volumes")
}
