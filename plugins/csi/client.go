package csi

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sync/atomic"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/hashicorp/go-hclog"
	metrics "github.com/hashicorp/go-metrics"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/berth-io/berth/nomad/structs"
)

// MaxSocketPathLen is the longest unix socket path Linux accepts: sun_path
// is 108 bytes including the terminating NUL.
const MaxSocketPathLen = 107

// Client talks to one CSI plugin over its unix socket.
//
// All methods are safe for concurrent use and take a ctx that bounds the
// whole call, retries included; when ctx ends first they return an error
// wrapping ctx.Err(). Other failures are *Error values carrying ErrRetryable
// or ErrFinal (see Classify). The methods are as idempotent as the CSI spec
// makes the RPCs: repeating a successful call is safe. Teardown methods
// (ControllerUnpublishVolume, NodeUnstageVolume, NodeUnpublishVolume,
// ControllerDeleteVolume, ControllerDeleteSnapshot) return nil when the
// plugin answers NotFound.
//
// Which methods a plugin serves depends on its type and capabilities; an
// Unimplemented answer is a final error.
type Client interface {
	// PluginInfo returns the plugin's name and vendor version.
	PluginInfo(ctx context.Context) (name, version string, err error)
	// PluginCapabilities reports the plugin's services.
	PluginCapabilities(ctx context.Context) (*PluginCapabilitySet, error)
	// Probe reports whether the plugin is ready. A plugin that does not say
	// counts as ready; an error means it could not be asked.
	Probe(ctx context.Context) (bool, error)

	// ControllerGetCapabilities reports the controller RPCs the plugin serves.
	ControllerGetCapabilities(ctx context.Context) (*structs.CSIControllerInfo, error)
	// ControllerPublishVolume attaches a volume to a node; the returned
	// publish context is passed to NodeStage/NodePublish.
	ControllerPublishVolume(ctx context.Context, req *ControllerPublishVolumeRequest) (*ControllerPublishVolumeResponse, error)
	// ControllerUnpublishVolume detaches a volume from a node.
	ControllerUnpublishVolume(ctx context.Context, req *ControllerUnpublishVolumeRequest) error
	// ControllerValidateCapabilities checks that the volume supports every
	// requested capability; an unconfirmed capability gives ErrNotConfirmed.
	ControllerValidateCapabilities(ctx context.Context, req *ControllerValidateVolumeRequest) error
	// ControllerCreateVolume provisions a volume (idempotent by name).
	ControllerCreateVolume(ctx context.Context, req *ControllerCreateVolumeRequest) (*Volume, error)
	// ControllerDeleteVolume deletes a volume.
	ControllerDeleteVolume(ctx context.Context, req *ControllerDeleteVolumeRequest) error
	// ControllerListVolumes lists one page of volumes.
	ControllerListVolumes(ctx context.Context, req *ControllerListVolumesRequest) (*ControllerListVolumesResponse, error)
	// ControllerGetCapacity reports the capacity available for new volumes.
	ControllerGetCapacity(ctx context.Context, req *ControllerGetCapacityRequest) (*ControllerGetCapacityResponse, error)
	// ControllerExpandVolume grows a volume.
	ControllerExpandVolume(ctx context.Context, req *ControllerExpandVolumeRequest) (*ControllerExpandVolumeResponse, error)
	// ControllerModifyVolume changes a volume's mutable parameters.
	ControllerModifyVolume(ctx context.Context, req *ControllerModifyVolumeRequest) error
	// ControllerCreateSnapshot snapshots a volume (idempotent by name).
	ControllerCreateSnapshot(ctx context.Context, req *ControllerCreateSnapshotRequest) (*Snapshot, error)
	// ControllerDeleteSnapshot deletes a snapshot.
	ControllerDeleteSnapshot(ctx context.Context, req *ControllerDeleteSnapshotRequest) error
	// ControllerListSnapshots lists one page of snapshots.
	ControllerListSnapshots(ctx context.Context, req *ControllerListSnapshotsRequest) (*ControllerListSnapshotsResponse, error)

	// NodeGetCapabilities reports the node RPCs the plugin serves.
	NodeGetCapabilities(ctx context.Context) (*NodeCapabilitySet, error)
	// NodeGetInfo returns the plugin's node ID, volume limit and topology.
	NodeGetInfo(ctx context.Context) (*NodeInfo, error)
	// NodeStageVolume makes a volume available at a staging path on this
	// node; call it once per volume and usage, before NodePublishVolume, when
	// the node capabilities include StageUnstageVolume.
	NodeStageVolume(ctx context.Context, req *NodeStageVolumeRequest) error
	// NodeUnstageVolume undoes NodeStageVolume, after the last unpublish.
	NodeUnstageVolume(ctx context.Context, req *NodeUnstageVolumeRequest) error
	// NodePublishVolume makes a volume available at a target path.
	NodePublishVolume(ctx context.Context, req *NodePublishVolumeRequest) error
	// NodeUnpublishVolume undoes NodePublishVolume.
	NodeUnpublishVolume(ctx context.Context, req *NodeUnpublishVolumeRequest) error
	// NodeGetVolumeStats reports usage and condition of a published volume.
	NodeGetVolumeStats(ctx context.Context, req *NodeGetVolumeStatsRequest) (*VolumeStats, error)
	// NodeExpandVolume grows the file system of a volume on this node.
	NodeExpandVolume(ctx context.Context, req *NodeExpandVolumeRequest) (*NodeExpandVolumeResponse, error)

	// Retries counts the retry attempts this client has made, over all RPCs.
	Retries() uint64
	// Connection identifies the connection to the plugin that is up now,
	// or is 0 while none is (before the first call, while the plugin is
	// gone, while reconnecting). Connections are numbered 1, 2, ... as they
	// are made. A plugin that restarted (perhaps as another version, under
	// the same registration) is only reached again through a new
	// connection, so what a caller learned from the plugin over connection
	// n still holds while Connection() is n.
	Connection() uint64
	// Close closes the connection. Calls made after Close fail with ErrClosed.
	Close() error
}

// client implements Client.
type client struct {
	socket     string
	logger     hclog.Logger
	cfg        config
	conn       *grpc.ClientConn
	identity   csipb.IdentityClient
	controller csipb.ControllerClient
	node       csipb.NodeClient

	retries atomic.Uint64
	closed  atomic.Bool
	// conns counts the connections dial made.
	conns atomic.Uint64

	// incrCounter and addSample record metrics; tests replace them.
	incrCounter func(key []string, val float32, labels []metrics.Label)
	addSample   func(key []string, val float32, labels []metrics.Label)
}

var _ Client = (*client)(nil)

// connectParams make gRPC's own reconnect loop pick up a restarted plugin
// within about a second (its default backoff grows to two minutes). On a
// unix socket a connection attempt is cheap, so polling this often is fine.
var connectParams = grpc.ConnectParams{
	Backoff: backoff.Config{
		BaseDelay:  100 * time.Millisecond,
		Multiplier: 1.6,
		Jitter:     0.2,
		MaxDelay:   time.Second,
	},
	MinConnectTimeout: time.Second,
}

// windowSize is the fixed HTTP/2 flow-control window, per stream and per
// connection, of the connection to a plugin. A fixed window turns off
// gRPC's bandwidth estimator, which otherwise answers the first DATA frame
// after each quiet spell with a WINDOW_UPDATE and a PING that the plugin
// must answer: on a connection that carries one small call at a time (a
// NodeStage, then a NodePublish) that was a frame, a write and a wake-up of
// each process per call, for an estimate that only matters on a long
// network path. 4 MiB is gRPC's largest message by default, so no message
// waits for a window update either.
const windowSize = 4 << 20

// New returns a Client for the plugin listening on the unix socket at
// socketPath. It does not connect: the connection is made on the first call
// and remade by gRPC whenever the plugin goes away and comes back, so New
// succeeds before the plugin has created its socket. It fails only for a
// path that cannot be a socket address.
func New(socketPath string, logger hclog.Logger, opts ...Option) (Client, error) {
	if socketPath == "" {
		return nil, fmt.Errorf("creating csi client: empty socket path")
	}
	abs, err := filepath.Abs(socketPath)
	if err != nil {
		return nil, fmt.Errorf("creating csi client for socket %q: %w", socketPath, err)
	}
	if len(abs) > MaxSocketPathLen {
		return nil, fmt.Errorf("creating csi client for socket %q: %w: %d bytes, the limit is %d; use a shorter plugin socket directory",
			abs, ErrSocketPathTooLong, len(abs), MaxSocketPathLen)
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}

	c := &client{
		socket:      abs,
		logger:      logger.Named("csi_client").With("socket", abs),
		cfg:         defaultConfig(),
		incrCounter: metrics.IncrCounterWithLabels,
		addSample:   metrics.AddSampleWithLabels,
	}
	for _, opt := range opts {
		opt(&c.cfg)
	}

	conn, err := grpc.NewClient("unix://"+abs,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(connectParams),
		grpc.WithStaticStreamWindowSize(windowSize),
		grpc.WithStaticConnWindowSize(windowSize),
		grpc.WithChainUnaryInterceptor(c.intercept),
		grpc.WithContextDialer(c.dial),
	)
	if err != nil {
		return nil, fmt.Errorf("creating csi client for socket %q: %w", abs, err)
	}
	c.conn = conn
	c.identity = csipb.NewIdentityClient(conn)
	c.controller = csipb.NewControllerClient(conn)
	c.node = csipb.NewNodeClient(conn)
	return c, nil
}

func (c *client) Retries() uint64 { return c.retries.Load() }

func (c *client) Connection() uint64 {
	// With one address gRPC makes a new connection only once the last
	// one is gone, so while the channel is ready the latest dial is the
	// connection in use.
	if c.conn.GetState() != connectivity.Ready {
		return 0
	}
	return c.conns.Load()
}

// dial connects to the plugin's socket and counts the connection. It
// ignores gRPC's rendering of the target: the client has one socket. A
// connection is counted before gRPC can send a call over it.
func (c *client) dial(ctx context.Context, _ string) (net.Conn, error) {
	var conn net.Conn
	var err error
	if c.cfg.dialer != nil {
		conn, err = c.cfg.dialer(ctx)
	} else {
		var d net.Dialer
		conn, err = d.DialContext(ctx, "unix", c.socket)
	}
	if err != nil {
		return nil, err
	}
	c.conns.Add(1)
	return conn, nil
}

func (c *client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	if err := c.conn.Close(); err != nil {
		return fmt.Errorf("closing csi client for socket %q: %w", c.socket, err)
	}
	return nil
}
