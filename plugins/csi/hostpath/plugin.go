package hostpath

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Directories under the root.
const (
	volumesDirName   = "volumes"
	snapshotsDirName = "snapshots"
	// tmpPrefix names directories being filled by a copy; they are renamed
	// into place when complete, and removed at start if a crash left them.
	tmpPrefix = ".tmp-"
)

// windowSize is the fixed HTTP/2 flow-control window, per stream and per
// connection, the plugin grants its callers. A fixed window turns off
// gRPC's bandwidth estimator, which answers the first request after each
// quiet spell with a WINDOW_UPDATE and a PING the caller must answer: on a
// unix socket carrying one small call at a time that is a write and a
// wake-up of each process per call, on the claim path, for an estimate
// that only matters on a long network path. 4 MiB is gRPC's largest
// message by default, so no request waits for a window update either.
const windowSize = 4 << 20

// gracePeriod bounds how long Serve waits for in-flight RPCs at shutdown.
const gracePeriod = 10 * time.Second

// Plugin is a hostpath CSI plugin. Create it with New, serve it with Serve
// (or use Run, which does both on Config.Endpoint), and Close it when done.
// Its methods are safe for concurrent use.
type Plugin struct {
	cfg          Config
	log          hclog.Logger
	store        *store
	volumesDir   string
	snapshotsDir string
	// mountErr, when set, is why this process cannot make bind mounts
	// (Config.CanMount, asked once in New): NodeGetInfo reports it.
	mountErr error
}

// New opens (creating if needed) the root directory and its state, and, when
// the plugin serves the Node service, registers the node in the shared state
// so that controllers sharing the root can publish to it.
func New(ctx context.Context, cfg Config) (*Plugin, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("configuring hostpath plugin: %w", err)
	}
	p := &Plugin{
		cfg:          cfg,
		log:          cfg.Logger,
		volumesDir:   filepath.Join(cfg.Root, volumesDirName),
		snapshotsDir: filepath.Join(cfg.Root, snapshotsDirName),
	}
	if cfg.Mode.servesNode() {
		canMount := cfg.CanMount
		if canMount == nil {
			canMount = CheckMountPrivileges
		}
		if p.mountErr = canMount(); p.mountErr != nil {
			p.log.Warn("cannot mount volumes; the node service reports unhealthy", "error", p.mountErr)
		}
	}
	for _, d := range []string{p.volumesDir, p.snapshotsDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, fmt.Errorf("creating %s: %w", d, err)
		}
	}
	st, err := openStore(ctx, cfg.Root, p.log.Named("state"))
	if err != nil {
		return nil, fmt.Errorf("opening hostpath state in %s: %w", cfg.Root, err)
	}
	p.store = st
	err = st.update(ctx, true, func(tx *txn) error {
		// Under the lock, no copy is in progress: leftovers are from a crash.
		p.removeLeftovers()
		if cfg.Mode.servesNode() {
			n := &Node{ID: cfg.NodeID, MaxVolumes: cfg.MaxVolumesPerNode}
			if old := tx.Nodes[n.ID]; old == nil || *old != *n {
				tx.putNode(n)
			}
		}
		return nil
	})
	if err != nil {
		st.close()
		return nil, fmt.Errorf("registering node %q: %w", cfg.NodeID, err)
	}
	return p, nil
}

// Close releases the state files.
func (p *Plugin) Close() error { return p.store.close() }

// Serve serves the CSI services of the plugin's mode on lis until ctx is
// done, then stops gracefully (in-flight RPCs get gracePeriod to finish) and
// returns nil. It closes lis.
func (p *Plugin) Serve(ctx context.Context, lis net.Listener) error {
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(p.intercept),
		grpc.StaticStreamWindowSize(windowSize), grpc.StaticConnWindowSize(windowSize))
	csi.RegisterIdentityServer(srv, &identityServer{p: p})
	if p.cfg.Mode.servesController() {
		csi.RegisterControllerServer(srv, &controllerServer{p: p})
	}
	if p.cfg.Mode.servesNode() {
		csi.RegisterNodeServer(srv, &nodeServer{p: p})
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	select {
	case err := <-served:
		return fmt.Errorf("serving CSI on %s: %w", lis.Addr(), err)
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(stopped)
	}()
	timer := time.NewTimer(gracePeriod)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C:
		p.log.Warn("in-flight RPCs did not finish in time; stopping", "grace_period", gracePeriod)
		srv.Stop()
		<-stopped
	}
	if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("serving CSI on %s: %w", lis.Addr(), err)
	}
	return nil
}

// intercept logs RPCs and turns a panic into an Internal error, so that one
// bad request does not take down every mount the plugin manages.
func (p *Plugin) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	start := time.Now()
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("panic in RPC", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
			resp, err = nil, status.Errorf(codes.Internal, "%s: internal error: %v", info.FullMethod, r)
		}
	}()
	resp, err = handler(ctx, req)
	switch {
	case err != nil && status.Code(err) == codes.Internal:
		p.log.Warn("RPC failed", "method", info.FullMethod, "error", err, "duration", time.Since(start))
	case err != nil:
		p.log.Debug("RPC failed", "method", info.FullMethod, "error", err, "duration", time.Since(start))
	case p.log.IsTrace():
		p.log.Trace("RPC done", "method", info.FullMethod, "duration", time.Since(start))
	}
	return resp, err
}

// removeLeftovers removes half-copied directories left by a crash. Call it
// with the state lock held.
func (p *Plugin) removeLeftovers() {
	for _, dir := range []string{p.volumesDir, p.snapshotsDir} {
		ents, err := os.ReadDir(dir)
		if err != nil {
			p.log.Warn("listing directory", "path", dir, "error", err)
			continue
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), tmpPrefix) {
				path := filepath.Join(dir, e.Name())
				p.log.Info("removing incomplete copy", "path", path)
				if err := os.RemoveAll(path); err != nil {
					p.log.Warn("removing incomplete copy", "path", path, "error", err)
				}
			}
		}
	}
}

func (p *Plugin) volumeDir(id string) string   { return filepath.Join(p.volumesDir, id) }
func (p *Plugin) snapshotDir(id string) string { return filepath.Join(p.snapshotsDir, id) }

// newID returns a random ID with a prefix, e.g. "vol-3f9c0a1b2d4e6f70".
func newID(prefix string) (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating ID: %w", err)
	}
	return prefix + hex.EncodeToString(b), nil
}

// validID reports whether an ID chosen by someone else (a static volume ID)
// can name a directory: one path element, not hidden, at most 128 bytes.
func validID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("ID is empty")
	case len(id) > 128:
		return fmt.Errorf("ID is %d bytes; at most 128 are allowed", len(id))
	case strings.ContainsAny(id, "/\x00"):
		return fmt.Errorf("ID %q contains '/' or NUL", id)
	case strings.HasPrefix(id, "."):
		return fmt.Errorf("ID %q starts with '.'", id)
	}
	return nil
}

// statusErr turns an unexpected error into a gRPC status naming the
// operation and volume; context errors keep their own codes.
func statusErr(op, volumeID string, err error) error {
	if _, ok := status.FromError(err); ok && status.Code(err) != codes.Unknown {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return status.Errorf(codes.Internal, "%s %q: %v", op, volumeID, err)
}
