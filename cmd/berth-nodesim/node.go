package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/test/bufconn"

	"github.com/berth-io/berth/client"
	"github.com/berth-io/berth/client/allocrunner"
	"github.com/berth-io/berth/client/dynamicplugins"
	"github.com/berth-io/berth/client/state"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi"
	"github.com/berth-io/berth/plugins/csi/fake"
	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/plugins/drivers/mock"
)

// pluginID is the simulated node plugin's ID on every node.
const pluginID = "nodesim"

// pluginBuffer is each direction's buffer of an in-memory plugin
// connection: a gRPC frame's worth.
const pluginBuffer = 16 << 10

// simNode is one simulated node: a real client with the minimal alloc
// runner and a fake node plugin of its own, in memory or on a unix socket.
type simNode struct {
	name   string
	plugin *fake.Plugin
	client *client.Client
}

// publishes records when each volume was published and unpublished, by
// the plugins' observers.
type publishes struct {
	mu          sync.Mutex
	published   map[string]time.Time
	unpublished map[string]time.Time
	changed     chan struct{}
}

func newPublishes() *publishes {
	return &publishes{published: map[string]time.Time{}, unpublished: map[string]time.Time{}, changed: make(chan struct{}, 1)}
}

func (p *publishes) observe(c fake.Call) {
	if !c.Done || c.Err != nil {
		return
	}
	now := time.Now()
	var vol string
	var m map[string]time.Time
	switch c.Method {
	case "NodePublishVolume":
		vol, m = volumeOf(c), p.published
	case "NodeUnpublishVolume":
		vol, m = volumeOf(c), p.unpublished
	default:
		return
	}
	p.mu.Lock()
	if _, ok := m[vol]; !ok {
		m[vol] = now
	}
	p.mu.Unlock()
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

func volumeOf(c fake.Call) string {
	if r, ok := c.Req.(interface{ GetVolumeId() string }); ok {
		// The fake's volume ID is the external ID, "ext-<id>".
		return strings.TrimPrefix(r.GetVolumeId(), "ext-")
	}
	return ""
}

func (p *publishes) counts() (published, unpublished int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.published), len(p.unpublished)
}

type nodeOptions struct {
	dir      string
	rpc      func() client.RPCer
	memState bool
	// pluginSocket serves each fake plugin on a unix socket instead of
	// in memory.
	pluginSocket bool
	logger       hclog.Logger
	obs          func(fake.Call)
}

func startNode(i int, o nodeOptions) (*simNode, error) {
	n := &simNode{name: fmt.Sprintf("sim-%05d", i)}
	dir := filepath.Join(o.dir, n.name)
	sock := filepath.Join(dir, "csi.sock")
	n.plugin = fake.New()
	n.plugin.Configure(func(s *fake.Settings) {
		s.Name, s.NodeID = pluginID, n.name
		s.PluginServices, s.ControllerCapabilities = nil, nil
	})
	n.plugin.SetObserver(o.obs)
	if err := mkdir(dir); err != nil {
		return nil, err
	}
	var csiOpts []csi.Option
	if o.pluginSocket {
		if err := n.plugin.Listen(sock); err != nil {
			return nil, fmt.Errorf("node %s: %w", n.name, err)
		}
	} else {
		// In memory: the client still dials its plugin and calls it
		// through gRPC, but no socket costs two file descriptors.
		lis := bufconn.Listen(pluginBuffer)
		if err := n.plugin.Serve(lis); err != nil {
			return nil, fmt.Errorf("node %s: %w", n.name, err)
		}
		csiOpts = append(csiOpts, csi.WithDialer(lis.DialContext))
	}
	cfg := &client.Config{
		DataDir: filepath.Join(dir, "data"),
		Node: &structs.Node{
			Name: n.name, Datacenter: "dc1",
			NodeResources: &structs.NodeResources{CPU: 64000, MemoryMB: 256 * 1024},
		},
		RPC:                o.rpc(),
		Drivers:            map[string]drivers.Driver{mock.Name: mock.New(o.logger, mock.Config{})},
		Logger:             o.logger.Named(n.name),
		AllocRunnerFactory: allocrunner.NewMinimal,
		ShutdownTimeout:    5 * time.Second,
		CSI: client.CSIConfig{
			Plugins: []*dynamicplugins.PluginInfo{{
				Name: pluginID, Type: dynamicplugins.PluginTypeCSINode, SocketPath: sock, AllocID: "nodesim",
			}},
			// Nothing is mounted: the fake plugin only answers.
			IsMountpoint:  func(string) (bool, error) { return false, nil },
			ClientOptions: csiOpts,
		},
	}
	if o.memState {
		cfg.StateDB = state.NewMemDB()
	}
	c, err := client.New(cfg)
	if err != nil {
		n.plugin.Stop()
		return nil, fmt.Errorf("node %s: %w", n.name, err)
	}
	n.client = c
	return n, nil
}

func (n *simNode) stop() {
	if n.client != nil {
		_ = n.client.Shutdown()
	}
	n.plugin.Stop()
}

func mkdir(dir string) error { return os.MkdirAll(dir, 0o700) }

// span is the earliest and the latest publish (or unpublish) seen.
func (p *publishes) span(published bool) (first, last time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.unpublished
	if published {
		m = p.published
	}
	for _, at := range m {
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	return first, last
}
