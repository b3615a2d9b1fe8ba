package command

import (
	"net"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"
)

func TestNodeStatus(t *testing.T) {
	f := newFakeAPI(t)
	seedCluster(f)
	cases := []struct {
		name   string
		args   []string
		code   int
		out    []string
		errOut []string
		json   bool
	}{
		{name: "list", args: []string{"node", "status"},
			out: []string{"ID        DC   Name    Class   Drain  Eligibility  Status", "9a0b1c2d  dc1  node-a  <none>  false  eligible     ready", "9a0b7777"}},
		{name: "one node: drivers with MountConfig, CSI plugin health, allocations", args: []string{"node", "status", "9a0b1"},
			out: []string{"ID              = 9a0b1c2d", "Name            = node-a", "CSI Drivers     = hostpath", "Driver Status   = exec,raw_exec",
				"Drivers", "Driver    Detected  Healthy  MountConfig", "exec      true      true     all", "raw_exec  true      true     none",
				"CSI Plugins", "Plugin ID  Type  Alloc ID  Healthy  Description", "hostpath   node", "false    plugins unavailable: not root",
				"Allocations", "ID        Job ID  Task Group", "5e6f7a8b  web     g"}},
		{name: "ambiguous prefix lists the matches", args: []string{"node", "status", "9a0b"}, code: 1,
			errOut: []string{`Prefix "9a0b" matched multiple nodes`, "node-a", "node-b"}},
		{name: "not found", args: []string{"node", "status", "ffff"}, code: 1, errOut: []string{`No node with prefix "ffff" found`}},
		{name: "verbose full IDs", args: []string{"node", "status", "-verbose"}, out: []string{nodeA, nodeB}},
		{name: "json list", args: []string{"node", "status", "-json"}, json: true},
		{name: "json one", args: []string{"node", "status", "-json", nodeA}, json: true, out: []string{`"MountConfig": "all"`}},
		{name: "template", args: []string{"node", "status", "-t", "{{.Name}}/{{.Status}}", "9a0b7"}, out: []string{"node-b/ready"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := f.run(tc.args...)
			must.Eq(t, tc.code, code, must.Sprintf("stdout:\n%s\nstderr:\n%s", out, errOut))
			mustOrder(t, out, tc.out...)
			mustOrder(t, errOut, tc.errOut...)
			if tc.json {
				mustJSON(t, out, nil)
			}
		})
	}
}

// TestNodeStatus_UnixSocket reaches the API over BERTH_ADDR=unix://, both
// through the api client and the CLI's own raw reads.
func TestNodeStatus_UnixSocket(t *testing.T) {
	f := newFakeAPI(t)
	seedCluster(f)
	sock := filepath.Join(t.TempDir(), "api.sock")
	ln, err := net.Listen("unix", sock)
	must.NoError(t, err)
	srv := &http.Server{Handler: f.srv.Config.Handler}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-done })
	t.Setenv("BERTH_ADDR", "unix://"+sock)

	code, out, errOut := f.run("node", "status", "9a0b1")
	must.Eq(t, 0, code, must.Sprintf("stderr: %s", errOut))
	must.StrContains(t, out, "exec      true      true     all")
}
