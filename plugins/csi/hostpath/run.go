package hostpath

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// maxSocketPath is the longest unix socket path Linux accepts
// (sizeof(sun_path) minus the terminating NUL).
const maxSocketPath = 107

// Run serves the plugin on cfg.Endpoint until ctx is done, then stops
// gracefully and removes the socket. It runs Go code on one thread at a
// time unless $GOMAXPROCS says otherwise (see oneProc).
func Run(ctx context.Context, cfg Config) error {
	oneProc()
	path, err := SocketPath(cfg.Endpoint)
	if err != nil {
		return err
	}
	p, err := New(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		if err := p.Close(); err != nil {
			p.log.Warn("closing state", "error", err)
		}
	}()
	lis, err := listenUnix(ctx, path)
	if err != nil {
		return err
	}
	defer removeOwnSocket(path, socketID(path))
	p.log.Info("serving", "endpoint", path, "mode", p.cfg.Mode, "node_id", p.cfg.NodeID, "root", p.cfg.Root)
	err = p.Serve(ctx, lis)
	p.log.Info("stopped", "endpoint", path)
	return err
}

// oneProc sets GOMAXPROCS to 1 unless $GOMAXPROCS is set. The plugin runs
// one state-changing call at a time (the store's lock, held across the
// mount), so more processors buy it nothing, while each one the Go
// scheduler keeps costs a thread hand-off per call: a request read by the
// connection's goroutine wakes another thread to run its handler, and idle
// threads spin looking for work, on the CPUs the CO and its tasks use. A
// call blocked in a system call (a mount) still lets another goroutine run:
// the runtime hands the processor on. Over stage/publish/unpublish/unstage
// cycles from another process this took the plugin's futex calls from ~4.9
// to ~1.3 per call, its CPU by a sixth and each call's round trip by 30–50
// µs (README, Benchmarks).
func oneProc() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}

// SocketPath turns an endpoint ("unix:///path", "unix:/path" or "/path")
// into a socket path.
func SocketPath(endpoint string) (string, error) {
	path := endpoint
	switch {
	case endpoint == "":
		return "", fmt.Errorf("endpoint is required")
	case strings.HasPrefix(endpoint, "unix://"):
		path = strings.TrimPrefix(endpoint, "unix://")
	case strings.HasPrefix(endpoint, "unix:"):
		path = strings.TrimPrefix(endpoint, "unix:")
	case strings.Contains(endpoint, "://"):
		return "", fmt.Errorf("endpoint %q: only unix sockets are supported", endpoint)
	}
	if path == "" {
		return "", fmt.Errorf("endpoint %q has no path", endpoint)
	}
	if len(path) > maxSocketPath {
		return "", fmt.Errorf("endpoint %q: socket path is %d bytes, but unix socket paths must be at most %d; use a shorter directory", endpoint, len(path), maxSocketPath)
	}
	return path, nil
}

// listenUnix listens on a unix socket, first removing a stale socket file
// left by a dead process. It refuses to take over a socket someone still
// serves, and to remove anything that is not a socket.
func listenUnix(ctx context.Context, path string) (net.Listener, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("checking endpoint %q: %w", path, err)
	case fi.Mode()&fs.ModeSocket == 0:
		return nil, fmt.Errorf("endpoint %q exists and is not a socket; refusing to replace it", path)
	default:
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		conn, derr := (&net.Dialer{}).DialContext(dctx, "unix", path)
		cancel()
		if derr == nil {
			conn.Close()
			return nil, fmt.Errorf("endpoint %q is in use by another process", path)
		}
		if !errors.Is(derr, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("checking endpoint %q: %w", path, derr)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing stale socket %q: %w", path, err)
		}
	}
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("listening on %q: %w", path, err)
	}
	return lis, nil
}

// socketID identifies the socket file at path, to recognise it at exit.
func socketID(path string) [2]uint64 {
	var st syscall.Stat_t
	if syscall.Lstat(path, &st) != nil {
		return [2]uint64{}
	}
	return [2]uint64{st.Dev, st.Ino}
}

// removeOwnSocket removes the socket file if it is still the one this
// process created; the listener usually unlinked it on close already, and a
// socket created since by another process is left alone.
func removeOwnSocket(path string, id [2]uint64) {
	if id != ([2]uint64{}) && socketID(path) == id {
		os.Remove(path)
	}
}
