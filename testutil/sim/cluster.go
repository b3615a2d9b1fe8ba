package sim

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/hashicorp/raft"

	"github.com/berth-io/berth/client"
	"github.com/berth-io/berth/client/dynamicplugins"
	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi"
	"github.com/berth-io/berth/plugins/csi/fake"
	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/plugins/drivers/mock"
	"github.com/berth-io/berth/testutil/cluster"
)

// PluginID is the CSI plugin every simulated node runs.
const PluginID = "simplug"

// node is one simulated client node: its state dir, its plugin (which
// outlives client restarts, as a plugin task does) and the running client.
type node struct {
	name    string
	dataDir string
	sock    string
	plugin  *fake.Plugin

	mu     sync.Mutex
	client *client.Client // nil while killed
	id     string
	// cut: the node is partitioned from the servers; sessions are its
	// open node sessions, closed when it is cut.
	cut      bool
	cutGen   int // counts cuts, so a cut's timer mends only its own
	sessions []net.Conn
}

// setCut partitions the node from the servers (true) or heals it.
func (n *node) setCut(cut bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut = cut
	if cut {
		for _, c := range n.sessions {
			c.Close()
		}
		n.sessions = nil
	}
}

func (n *node) isCut() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cut
}

// errCut is what a node partitioned from the servers gets from them.
func (n *node) errCut() error {
	return fmt.Errorf("sim: node %s is partitioned from the servers: %w", n.name, net.ErrClosed)
}

func (n *node) get() *client.Client {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.client
}

// simCluster is the in-process cluster of one schedule.
type simCluster struct {
	t       testing.TB
	sched   *Schedule
	nodes   []*node
	witness *Witness

	// raftNet carries the Raft traffic of a 3-server schedule.
	raftNet *RaftNet

	// mu guards servers and down: a leader restart replaces a server.
	mu      sync.Mutex
	servers []*cluster.Server
	down    map[int]bool
}

// serverSet is one node's RPC transport: any server that is up (a
// follower forwards to the leader), as an agent's server list is. While
// the node is partitioned from the servers every call fails, and a call
// that was in flight when the partition began loses its answer.
type serverSet struct {
	c *simCluster
	n *node
}

func (s serverSet) RPC(method string, args, reply any) error {
	if s.n.isCut() {
		return s.n.errCut()
	}
	err := s.c.anyServer().RPC(method, args, reply)
	if s.n.isCut() {
		return s.n.errCut()
	}
	return err
}

// DialNodeSession opens the node session through a server that is up,
// which dials the leader. The session is closed if the node is cut off.
func (s serverSet) DialNodeSession(ctx context.Context) (net.Conn, error) {
	if s.n.isCut() {
		return nil, s.n.errCut()
	}
	conn, err := s.c.anyServer().DialNodeSession(ctx)
	if err != nil {
		return nil, err
	}
	s.n.mu.Lock()
	defer s.n.mu.Unlock()
	if s.n.cut {
		conn.Close()
		return nil, s.n.errCut()
	}
	s.n.sessions = append(s.n.sessions, conn)
	return conn, nil
}

// cutServer cuts the Raft traffic of server i (the leader when i < 0)
// off from the other servers.
func (c *simCluster) cutServer(i int) (addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for j, s := range c.servers {
		if c.down[j] {
			continue
		}
		if (i < 0 && s.IsLeader()) || j == i {
			c.raftNet.Cut(raft.ServerAddress(s.Addr))
			return s.Addr
		}
	}
	return ""
}

// anyServer is the leader if one is up, else any server that is up.
func (c *simCluster) anyServer() *cluster.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	var up *cluster.Server
	for i, s := range c.servers {
		if c.down[i] {
			continue
		}
		if s.IsLeader() {
			return s
		}
		if up == nil {
			up = s
		}
	}
	return up
}

// restartLeader kills the leader, waits for the others to elect a new
// one, and starts the old leader again from its Raft data dir.
func (c *simCluster) restartLeader() error {
	c.mu.Lock()
	idx := -1
	for i, s := range c.servers {
		if !c.down[i] && s.IsLeader() {
			idx = i
		}
	}
	if idx < 0 || len(c.servers) < 3 {
		c.mu.Unlock()
		return nil
	}
	old := c.servers[idx]
	c.down[idx] = true
	c.mu.Unlock()
	if err := endWithin(processStalls(), 20*time.Second, func() { _ = old.Shutdown() }); err != nil {
		// The server stays down, the other two go on; its Shutdown is
		// left running (the cluster's cleanup reports it if it never
		// ends).
		c.t.Logf("server %s still shutting down; goroutines:\n%s", old.Config.NodeName, goroutines())
		return fmt.Errorf("server %s (the leader) did not shut down: %w", old.Config.NodeName, err)
	}
	if err := waitFor(20*time.Second, func() error {
		if s := c.anyServer(); s == nil || !s.IsLeader() {
			return fmt.Errorf("no new leader after %s left", old.Config.NodeName)
		}
		return nil
	}); err != nil {
		return err
	}
	s, err := restart(c.t, old)
	if err != nil {
		return err // the server stays down; the other two go on
	}
	c.mu.Lock()
	c.servers[idx] = s
	delete(c.down, idx)
	c.mu.Unlock()
	return nil
}

// restart starts old again from its data dir. A panic while the server
// starts (raft-wal's "sealed segment has no index block" reopening a log
// whose suffix Raft truncated, seed 20538) is returned as an error, so
// that it is reported as this schedule's violation with its seed instead
// of killing the binary and with it every schedule running alongside.
func restart(t testing.TB, old *cluster.Server) (s *cluster.Server, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("server %s panicked starting again from its data dir: %v", old.Config.NodeName, p)
		}
	}()
	return cluster.Restart(t, old), nil
}

// serverConfig shortens every timer the claim protocol waits on, so a
// schedule's faults heal and claims free in about a second of real time.
func serverConfig(c *nomad.Config) {
	cluster.FastHeartbeats(c)
	c.CSIClaimRetryBase = 20 * time.Millisecond
	c.CSIClaimRetryMax = 300 * time.Millisecond
	c.CSIVolumeWatcherResync = 500 * time.Millisecond
	c.CSIClaimGCInterval = 500 * time.Millisecond
	c.CSIControllerTimeout = 2 * time.Second
	// The servers' wait for a client's own unpublish, 2 min in agents:
	// unshortened, a client that missed its unpublish (seeds 40071,
	// 40859) held its claim past the 15 s bound, the servers' NodeDetach
	// fallback never ran inside it. Like CSIControllerTimeout, a sixtieth.
	c.CSINodeDetachGrace = 2 * time.Second
	c.EvalNackDelay = 50 * time.Millisecond
	c.FailedEvalFollowUpDelay = 200 * time.Millisecond
}

func (p Profile) settings(nodeName string) func(*fake.Settings) {
	return func(s *fake.Settings) {
		s.NodeID = extNodeID(nodeName)
		s.PluginServices = nil
		s.ControllerCapabilities = nil
		if p.Controller {
			s.PluginServices = []csipb.PluginCapability_Service_Type{csipb.PluginCapability_Service_CONTROLLER_SERVICE}
			if p.PublishUnpublish {
				s.ControllerCapabilities = append(s.ControllerCapabilities, csipb.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME)
			}
			if p.PublishReadOnly {
				s.ControllerCapabilities = append(s.ControllerCapabilities, csipb.ControllerServiceCapability_RPC_PUBLISH_READONLY)
			}
		}
		s.NodeCapabilities = nil
		if p.StageUnstage {
			s.NodeCapabilities = []csipb.NodeServiceCapability_RPC_Type{csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME}
		}
	}
}

// start brings up the servers, the nodes with their plugins, waits for the
// plugin to be healthy on every node, and registers the volumes.
func start(t testing.TB, s *Schedule, w *Witness) (*simCluster, error) {
	c := &simCluster{t: t, sched: s, witness: w, down: map[int]bool{}, raftNet: NewRaftNet(s.Seed)}
	if s.Servers <= 1 {
		c.servers = []*cluster.Server{cluster.NewServer(t, serverConfig)}
	} else {
		// Raft on disk, so a restarted server comes back with its log.
		c.servers = cluster.NewCluster(t, s.Servers, func(_ int, cfg *nomad.Config) {
			serverConfig(cfg)
			cfg.RaftTransportWrap = c.raftNet.Wrap
			cfg.DevMode = false
			cfg.DataDir = t.TempDir()
		})
	}
	for i := range s.Nodes {
		// Not t.TempDir(): the plugin socket must fit in 107 bytes.
		dir, err := os.MkdirTemp("", tempPrefix())
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		n := &node{name: fmt.Sprintf("n%d", i), dataDir: filepath.Join(dir, "data"), sock: filepath.Join(dir, "csi.sock")}
		n.plugin = fake.New()
		n.plugin.Configure(s.Profile.settings(n.name))
		n.plugin.SetObserver(w.Observer(n.name))
		if err := n.plugin.Listen(n.sock); err != nil {
			return nil, err
		}
		t.Cleanup(n.plugin.Stop)
		c.nodes = append(c.nodes, n)
		c.startClient(n)
	}
	if err := waitFor(20*time.Second, func() error {
		p, err := c.anyServer().State().CSIPluginByID(nil, PluginID)
		if err != nil || p == nil {
			return fmt.Errorf("plugin %s not fingerprinted (%v)", PluginID, err)
		}
		want := 0
		if s.Profile.Controller {
			want = s.Nodes
		}
		if p.NodesHealthy != s.Nodes || p.ControllersHealthy != want {
			return fmt.Errorf("plugin %s has %d/%d healthy nodes, %d/%d controllers", PluginID, p.NodesHealthy, s.Nodes, p.ControllersHealthy, want)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	var vols []*structs.CSIVolume
	for _, v := range s.Volumes {
		for _, id := range volumeIDs(v) {
			vols = append(vols, &structs.CSIVolume{
				ID: id, Name: id, ExternalID: "ext-" + id, Namespace: structs.DefaultNamespace, PluginID: PluginID,
				RequestedCapabilities: []*structs.CSIVolumeCapability{{
					AccessMode: v.Mode, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
				}},
			})
		}
	}
	// Retried: three servers may still be settling their first leader.
	if err := waitFor(20*time.Second, func() error {
		return c.rpc("CSIVolume.Register", &structs.CSIVolumeRegisterRequest{Volumes: vols}, &structs.CSIVolumeRegisterResponse{})
	}); err != nil {
		return nil, fmt.Errorf("registering volumes: %w", err)
	}
	return c, nil
}

// tempPrefix names the node dirs of this process (a leak test counts
// them, and other processes may run schedules beside it).
func tempPrefix() string { return fmt.Sprintf("sim%d-", os.Getpid()) }

// volumeIDs are the volumes registered for v: per_alloc families have one
// per alloc index.
func volumeIDs(v Volume) []string {
	if v.PerAlloc {
		return []string{v.ID + "[0]", v.ID + "[1]"}
	}
	return []string{v.ID}
}

func (c *simCluster) startClient(n *node) {
	plugins := []*dynamicplugins.PluginInfo{{
		Name: PluginID, Type: dynamicplugins.PluginTypeCSINode, SocketPath: n.sock, AllocID: "sim-plugin",
	}}
	if c.sched.Profile.Controller {
		plugins = append(plugins, &dynamicplugins.PluginInfo{
			Name: PluginID, Type: dynamicplugins.PluginTypeCSIController, SocketPath: n.sock, AllocID: "sim-plugin",
		})
	}
	cl := cluster.NewClient(c.t, c.anyServer(), n.name, func(cfg *client.Config) {
		cfg.RPC = serverSet{c, n}
		cfg.DisconnectDeadline = c.sched.DisconnectDeadline
		cfg.DataDir = n.dataDir
		// Not dev mode: a killed client leaves its tasks running, as when
		// the agent process dies; the restarted one reattaches to them.
		cfg.DevMode = false
		logger := cfg.Logger
		cfg.Drivers = map[string]drivers.Driver{mock.Name: mock.New(logger, mock.Config{MountConfig: structs.MountConfigSupportAll})}
		cfg.RetryBackoff = helper.Backoff{Base: 20 * time.Millisecond, Max: 300 * time.Millisecond}
		cfg.ShutdownTimeout = 2 * time.Second
		cfg.CSI = client.CSIConfig{
			PluginWait:   5 * time.Second,
			RetryBackoff: helper.Backoff{Base: 20 * time.Millisecond, Max: 300 * time.Millisecond},
			PostrunWait:  100 * time.Millisecond, FingerprintInterval: 500 * time.Millisecond,
			PluginProbeInterval: 500 * time.Millisecond,
			IsMountpoint:        c.witness.IsMountpoint,
			ClientOptions: []csi.Option{
				csi.WithMaxAttempts(2),
				csi.WithTimeouts(csi.Timeouts{Probe: time.Second, Fingerprint: 2 * time.Second, Call: 2 * time.Second}),
				csi.WithBackoff(csi.ExponentialBackoff(5*time.Millisecond, 20*time.Millisecond, nil)),
			},
			Plugins: plugins,
		}
	})
	n.mu.Lock()
	n.client, n.id = cl, cl.NodeID()
	n.mu.Unlock()
}

// rpc sends a request through a server that is up (followers forward).
func (c *simCluster) rpc(method string, args, reply any) error {
	return c.anyServer().RPC(method, args, reply)
}

// waitFor polls f until it returns nil or d of running time passes (d
// plus what the process was stalled meanwhile: stall.go); it returns f's
// last error then.
func waitFor(d time.Duration, f func() error) error {
	_, err := waitRunning(processStalls(), d, f)
	return err
}

// endWithin runs f and waits d of running time (on meter m) for it to
// return. A call that never returns is an error, not a hang of the
// schedule: seed 2793's leader restart waited 60+ min on a server's
// Shutdown, itself waiting on a call stuck on a Raft future that
// hashicorp/raft dropped as it shut down. f is left running then.
func endWithin(m *stallMeter, d time.Duration, f func()) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	_, err := waitRunning(m, d, func() error {
		select {
		case <-done:
			return nil
		default:
			return fmt.Errorf("still running after %s of running time", d)
		}
	})
	return err
}

// goroutines is every goroutine's stack, for a call that did not end.
func goroutines() string {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	return b.String()
}

// waitRunning is waitFor on meter m; it also returns how long the process
// was stalled while it waited.
func waitRunning(m *stallMeter, d time.Duration, f func() error) (time.Duration, error) {
	dl := m.deadline(d)
	for {
		err := f()
		if err == nil || dl.passed() {
			return dl.stalled(), err
		}
		// A poll interval, not a wait for something: f is the condition.
		time.Sleep(25 * time.Millisecond)
	}
}
