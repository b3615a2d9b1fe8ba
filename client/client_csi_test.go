package client

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
	"golang.org/x/sys/unix"

	"github.com/berth-io/berth/client/dynamicplugins"
	"github.com/berth-io/berth/client/internal/testlog"
	"github.com/berth-io/berth/client/pluginmanager/csimanager"
	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi"
	"github.com/berth-io/berth/plugins/csi/fake"
	"github.com/berth-io/berth/plugins/csi/hostpath"
	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/plugins/drivers/exec"
	"github.com/berth-io/berth/plugins/drivers/mock"
	"github.com/berth-io/berth/testutil"
)

// csiFakeServer is the fake servers plus CSIVolume.Get, .Claim and
// .Unpublish over registered volumes.
type csiFakeServer struct {
	*fakeServer
	// lock guards the fields below.
	lock        sync.Mutex
	volumes     map[string]*structs.CSIVolume
	claims      []*structs.CSIVolumeClaimRequest
	unpublishes []*structs.CSIVolumeUnpublishRequest
}

func newCSIFakeServer(vols ...*structs.CSIVolume) *csiFakeServer {
	s := &csiFakeServer{fakeServer: newFakeServer(time.Hour), volumes: map[string]*structs.CSIVolume{}}
	for _, v := range vols {
		s.volumes[v.ID] = v
	}
	return s
}

func (s *csiFakeServer) RPC(method string, args, reply any) error {
	return s.RPCContext(context.Background(), method, args, reply)
}

func (s *csiFakeServer) RPCContext(ctx context.Context, method string, args, reply any) error {
	if !strings.HasPrefix(method, "CSIVolume.") {
		return s.fakeServer.RPCContext(ctx, method, args, reply)
	}
	s.lock.Lock()
	defer s.lock.Unlock()
	switch method {
	case "CSIVolume.Get":
		req, resp := args.(*structs.CSIVolumeGetRequest), reply.(*structs.CSIVolumeGetResponse)
		resp.Volume = s.volumes[req.ID].Copy()
		return nil
	case "CSIVolume.Claim":
		req, resp := args.(*structs.CSIVolumeClaimRequest), reply.(*structs.CSIVolumeClaimResponse)
		c := *req
		s.claims = append(s.claims, &c)
		v := s.volumes[req.VolumeID]
		if v == nil {
			return structs.NotFound("volume", req.VolumeID)
		}
		resp.Volume = v.Copy()
		return nil
	case "CSIVolume.Unpublish":
		c := *args.(*structs.CSIVolumeUnpublishRequest)
		s.unpublishes = append(s.unpublishes, &c)
		return nil
	}
	return fmt.Errorf("fake server: unknown method %s", method)
}

func (s *csiFakeServer) counts() (claims, unpublishes int) {
	s.lock.Lock()
	defer s.lock.Unlock()
	return len(s.claims), len(s.unpublishes)
}

// shortSocket returns a socket path that fits whatever the test's name.
func shortSocket(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "csic")
	must.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "csi.sock")
}

var fastCSIClient = []csi.Option{
	csi.WithMaxAttempts(2),
	csi.WithBackoff(csi.ExponentialBackoff(5*time.Millisecond, 20*time.Millisecond, nil)),
}

func fastCSIConfig() CSIConfig {
	return CSIConfig{
		RetryBackoff: helper.Backoff{Base: 10 * time.Millisecond, Max: 50 * time.Millisecond},
		PostrunWait:  50 * time.Millisecond, ClientOptions: fastCSIClient,
	}
}

func csiTestAlloc(nodeID, driver, source string, task *structs.Task) *structs.Allocation {
	task.Driver = driver
	task.VolumeMounts = []*structs.VolumeMount{{Volume: "data", Destination: "/srv/data"}}
	return &structs.Allocation{
		ID: helper.UUID(), Name: "db.g[0]", Namespace: "default", NodeID: nodeID, JobID: "db", TaskGroup: "g",
		DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusPending,
		Job: &structs.Job{ID: "db", Name: "db", Type: structs.JobTypeService, TaskGroups: []*structs.TaskGroup{{
			Name: "g", Tasks: []*structs.Task{task},
			Volumes: map[string]*structs.VolumeRequest{"data": {Name: "data", Type: structs.VolumeTypeCSI, Source: source,
				AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}},
			RestartPolicy: &structs.RestartPolicy{Attempts: 0, Interval: time.Hour, Delay: time.Second, Mode: structs.RestartPolicyModeFail},
		}}},
	}
}

func registerNodePlugin(t *testing.T, c *Client, name, sock string) {
	t.Helper()
	must.NoError(t, c.plugins.Register(&dynamicplugins.PluginInfo{
		Name: name, Type: dynamicplugins.PluginTypeCSINode, SocketPath: sock, AllocID: "in-process-plugin",
	}))
}

// TestClient_CSIFingerprintsReachTheServers: a plugin's fingerprint is sent
// with Node.Register when it changes, and a last unhealthy one on shutdown.
func TestClient_CSIFingerprintsReachTheServers(t *testing.T) {
	srv := newCSIFakeServer()
	cfg := realConfig(t, srv, t.TempDir(), func(string) map[string]drivers.Driver { return nil })
	cfg.CSI = fastCSIConfig()
	c := newTestClient(t, cfg)
	defer c.Shutdown()
	testutil.WaitForResult(t, func() (bool, error) { return srv.lastRegistered() != nil, nil })

	sock := shortSocket(t)
	p := fake.Start(t, sock)
	p.Configure(func(s *fake.Settings) { s.NodeID = "ext-node-7" })
	registerNodePlugin(t, c, "fakeplug", sock)
	testutil.WaitForResult(t, func() (bool, error) {
		info := srv.lastRegistered().CSINodePlugins["fakeplug"]
		return info != nil && info.Healthy, fmt.Errorf("registered CSI node plugins: %v", srv.lastRegistered().CSINodePlugins)
	})
	info := srv.lastRegistered().CSINodePlugins["fakeplug"]
	must.Eq(t, "ext-node-7", info.NodeInfo.ID)
	must.Eq(t, "in-process-plugin", info.AllocID)
	must.Eq(t, "fake.csi.berth.io", info.Provider)
	must.True(t, c.Node().CSINodePlugins["fakeplug"].Healthy)

	must.NoError(t, c.Shutdown())
	last := srv.lastRegistered().CSINodePlugins["fakeplug"]
	must.NotNil(t, last)
	must.False(t, last.Healthy)
	must.Eq(t, "client is shutting down", last.HealthDescription)
}

// TestClient_ShutdownIsPromptWhileAPluginHangs: neither a normal nor a -dev
// shutdown waits on a plugin that hangs in NodeUnpublish.
func TestClient_ShutdownIsPromptWhileAPluginHangs(t *testing.T) {
	for _, dev := range []bool{false, true} {
		t.Run(fmt.Sprintf("dev=%v", dev), func(t *testing.T) {
			srv := newCSIFakeServer(&structs.CSIVolume{ID: "vol1", Namespace: "default", PluginID: "fakeplug"})
			cfg := &Config{
				DevMode: dev, Node: &structs.Node{Name: "n"}, RPC: srv, Logger: testlog.Logger(t),
				Drivers:           map[string]drivers.Driver{mock.Name: mock.New(hclog.NewNullLogger(), mock.Config{MountConfig: structs.MountConfigSupportAll})},
				UpdateBatchWindow: 5 * time.Millisecond, ShutdownTimeout: 500 * time.Millisecond, CSI: fastCSIConfig(),
			}
			if !dev {
				cfg.DataDir = t.TempDir()
			}
			c := newTestClient(t, cfg)
			defer c.Shutdown()
			sock := shortSocket(t)
			p := fake.Start(t, sock)
			registerNodePlugin(t, c, "fakeplug", sock)
			testutil.WaitForResult(t, func() (bool, error) { return srv.lastRegistered() != nil, nil })
			a := csiTestAlloc(c.NodeID(), mock.Name, "vol1", &structs.Task{Name: "db", KillTimeout: 100 * time.Millisecond})
			srv.placeAlloc(a)
			waitStatus(t, srv.fakeServer, a.ID, structs.AllocClientStatusRunning)

			p.SetHang("NodeUnpublishVolume", true)
			if !dev {
				srv.stopAlloc(a.ID)
				ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
				defer cancel()
				must.NoError(t, p.WaitForCalls(ctx, "NodeUnpublishVolume", 1))
			}
			// NodeUnpublish hangs until the test ends: a Shutdown that waited
			// on it would never return. (In dev mode it is bounded by the
			// tasks' kill timeouts plus ShutdownTimeout, whatever the plugin
			// does.)
			var err error
			testutil.Returns(t, "client shutdown while NodeUnpublish hangs", func() { err = c.Shutdown() })
			if !dev {
				must.NoError(t, err)
			}
		})
	}
}

// startHostpath serves Berth's hostpath plugin in node mode, staging
// volumes, in-process, so it sees the host's mount namespace and host
// paths, until the test ends.
func startHostpath(t *testing.T, sock, root string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p, err := hostpath.New(ctx, hostpath.Config{NodeID: "node-1", Root: root, Mode: hostpath.ModeNode, Stage: true, Logger: testlog.Logger(t)})
	must.NoError(t, err)
	lis, err := net.Listen("unix", sock)
	must.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- p.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		must.NoError(t, <-served)
		must.NoError(t, p.Close())
	})
}

// mountsUnder lists the mount points under dir in the test's namespace.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	must.NoError(t, err)
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			out = append(out, fields[4])
		}
	}
	must.NoError(t, sc.Err())
	return out
}

// TestClient_CSIVolumeReallyMountedIntoAnExecTask runs Berth's hostpath
// plugin and a real exec task whose volume is bind-mounted into its
// chroot: what the task writes lands in the volume's directory; a client
// restart re-uses the mounts; stopping the alloc removes every mount.
func TestClient_CSIVolumeReallyMountedIntoAnExecTask(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the hostpath plugin bind-mounts and the exec driver chroots")
	}
	dataDir, hpRoot, sock := t.TempDir(), t.TempDir(), shortSocket(t)
	csiRoot := filepath.Join(dataDir, "client", "csi")
	t.Cleanup(func() {
		for _, m := range mountsUnder(t, csiRoot) { // only if the test failed midway
			_ = unix.Unmount(m, unix.MNT_DETACH)
		}
	})
	startHostpath(t, sock, hpRoot)
	factory := func(stateDir string) map[string]drivers.Driver {
		return map[string]drivers.Driver{exec.Name: exec.New(hclog.NewNullLogger(), exec.Config{StateDir: stateDir})}
	}
	srv := newCSIFakeServer(&structs.CSIVolume{ID: "vol1", Namespace: "default", PluginID: "hostpath"})
	newClient := func() *Client {
		cfg := realConfig(t, srv, dataDir, factory)
		cfg.CSI = fastCSIConfig()
		return newTestClient(t, cfg)
	}
	c1 := newClient()
	defer c1.Shutdown()
	if !c1.Node().Drivers[exec.Name].Healthy {
		t.Skipf("exec driver unhealthy here: %s", c1.Node().Drivers[exec.Name].HealthDescription)
	}
	registerNodePlugin(t, c1, "hostpath", sock)
	testutil.WaitForResult(t, func() (bool, error) { return srv.lastRegistered() != nil, nil })

	a := csiTestAlloc(c1.NodeID(), exec.Name, "vol1", &structs.Task{Name: "db", KillTimeout: time.Second,
		Config: map[string]any{"command": "/bin/sh", "args": []any{"-c", `echo "written by $NOMAD_ALLOC_ID" > /srv/data/hello && exec sleep 600`}}})
	srv.placeAlloc(a)
	waitStatus(t, srv.fakeServer, a.ID, structs.AllocClientStatusRunning)
	volFile := filepath.Join(hpRoot, "volumes", "vol1", "hello")
	testutil.WaitForResult(t, func() (bool, error) {
		b, err := os.ReadFile(volFile)
		return err == nil && string(b) == "written by "+a.ID+"\n", fmt.Errorf("volume file: %q, %v", b, err)
	})
	publish := filepath.Join(csiRoot, "hostpath", "per-alloc", a.ID, "vol1", "rw-file-system-single-node-writer")
	mounted, err := csimanager.IsMountpoint(publish)
	must.NoError(t, err)
	must.True(t, mounted)
	must.SliceContains(t, mountsUnder(t, csiRoot), filepath.Join(csiRoot, "hostpath/staging/default/vol1/rw-file-system-single-node-writer"))

	// The client restarts; the task and its mounts stay, nothing is
	// claimed or mounted again.
	must.NoError(t, c1.Shutdown())
	c2 := newClient()
	defer c2.Shutdown()
	testutil.WaitForResult(t, func() (bool, error) {
		al, err := c2.Alloc(a.ID)
		if err != nil {
			return false, err
		}
		for _, e := range al.TaskStates["db"].Events {
			if strings.Contains(e.Message, "Re-using volume") {
				return true, nil
			}
		}
		return false, fmt.Errorf("no re-use event yet")
	})
	claims, _ := srv.counts()
	must.Eq(t, 1, claims)

	srv.stopAlloc(a.ID)
	testutil.WaitForResult(t, func() (bool, error) { return srv.alloc(a.ID).TasksExited, nil })
	must.SliceEmpty(t, mountsUnder(t, csiRoot))
	_, unpublishes := srv.counts()
	must.Eq(t, 1, unpublishes)
	b, err := os.ReadFile(volFile)
	must.NoError(t, err)
	must.Eq(t, "written by "+a.ID+"\n", string(b), must.Sprint("the data outlives the alloc"))
	must.NoError(t, c2.Shutdown())
}
