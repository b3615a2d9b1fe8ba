package hostpath

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// requireRoot skips tests that make real mounts.
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for bind mounts")
	}
}

// testPlugin is a Plugin served in-process on a unix socket, with clients.
type testPlugin struct {
	p    *Plugin
	id   csi.IdentityClient
	ctrl csi.ControllerClient
	node csi.NodeClient
	// stop stops serving and closes the plugin; it runs at cleanup too.
	stop func()
}

// startPlugin serves a plugin over a unix socket until the test ends.
func startPlugin(t testing.TB, cfg Config) *testPlugin {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "hostpath." + cfg.NodeID, Level: hclog.Warn, Output: testWriter{t}})
	}
	ctx, cancel := context.WithCancel(context.Background())
	p, err := New(ctx, cfg)
	must.NoError(t, err)

	// t.TempDir paths grow with the test name; a socket path must stay
	// under 108 bytes.
	sockDir, err := os.MkdirTemp("", "hp")
	must.NoError(t, err)
	sock := filepath.Join(sockDir, "csi.sock")
	lis, err := net.Listen("unix", sock)
	must.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- p.Serve(ctx, lis) }()

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	must.NoError(t, err)
	tp := &testPlugin{
		p:    p,
		id:   csi.NewIdentityClient(conn),
		ctrl: csi.NewControllerClient(conn),
		node: csi.NewNodeClient(conn),
	}
	tp.stop = sync.OnceFunc(func() {
		conn.Close()
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serving plugin %q: %v", cfg.NodeID, err)
		}
		if err := p.Close(); err != nil {
			t.Errorf("closing plugin %q: %v", cfg.NodeID, err)
		}
		os.RemoveAll(sockDir)
	})
	t.Cleanup(tp.stop)
	return tp
}

// testWriter sends plugin logs to the test log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(string(b))
	return len(b), nil
}

// mountRoot returns a temporary root directory and makes sure that whatever
// a test mounts under it is unmounted at cleanup, even when the test fails
// half-way.
func mountRoot(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	t.Cleanup(func() {
		for _, m := range mountsUnder(t, root) {
			if err := unix.Unmount(m, unix.MNT_DETACH); err != nil {
				t.Errorf("cleaning up mount %s: %v", m, err)
			}
		}
	})
	return root
}

// mountsUnder lists this process's mount points under dir, deepest first.
func mountsUnder(t testing.TB, dir string) []string {
	t.Helper()
	return mountsUnderIn(t, selfMountInfo, dir)
}

// mountsUnderIn lists the mount points under dir in a mountinfo file.
func mountsUnderIn(t testing.TB, mountinfo, dir string) []string {
	t.Helper()
	real, err := filepath.EvalSymlinks(dir)
	must.NoError(t, err)
	ms, err := readMountInfo(mountinfo)
	must.NoError(t, err)
	var out []string
	for _, m := range ms {
		if pathWithin(m.MountPoint, real) && m.MountPoint != real {
			out = append(out, m.MountPoint)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(out)))
	return out
}

// mountCount counts the mounts stacked at path.
func mountCount(t testing.TB, path string) int {
	t.Helper()
	ms, err := readMountInfo(selfMountInfo)
	must.NoError(t, err)
	n := 0
	for _, m := range ms {
		if m.MountPoint == path {
			n++
		}
	}
	return n
}

// mustCode asserts the gRPC code of err and that its message names want.
func mustCode(t testing.TB, err error, code codes.Code, names ...string) {
	t.Helper()
	must.Error(t, err)
	must.EqOp(t, code, status.Code(err), must.Sprintf("error: %v", err))
	for _, n := range names {
		must.StrContains(t, status.Convert(err).Message(), n)
	}
}

func mountCap(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

func blockCap() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

var snw = csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER

// createVolume creates a volume through the controller.
func createVolume(t testing.TB, tp *testPlugin, name string, mode csi.VolumeCapability_AccessMode_Mode) *csi.Volume {
	t.Helper()
	resp, err := tp.ctrl.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
		Name:               name,
		VolumeCapabilities: []*csi.VolumeCapability{mountCap(mode)},
	})
	must.NoError(t, err)
	return resp.GetVolume()
}
