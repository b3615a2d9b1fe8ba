package hostpath

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/berth-io/berth/testutil"
)

// recordingListener keeps a copy of everything written to the connections
// it accepts.
type recordingListener struct {
	net.Listener
	// mu guards buf.
	mu  sync.Mutex
	buf []byte
}

func (l *recordingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return recordingConn{Conn: c, l: l}, nil
}

type recordingConn struct {
	net.Conn
	l *recordingListener
}

func (c recordingConn) Write(b []byte) (int, error) {
	c.l.mu.Lock()
	c.l.buf = append(c.l.buf, b...)
	c.l.mu.Unlock()
	return c.Conn.Write(b)
}

// pings counts the HTTP/2 PING frames (not their acknowledgements) the
// server wrote: frames of a 9-byte header (length 24 bits, type, flags,
// stream) and a payload.
func (l *recordingListener) pings(t *testing.T) int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	pings, left := testutil.HTTP2Pings(l.buf)
	must.Zero(t, left, must.Sprint("a frame was cut short"))
	return pings
}

// The plugin grants a fixed flow-control window, so it never sends gRPC's
// bandwidth-estimating PINGs, which by default follow the first request
// after each quiet spell and which the CO must answer: on the claim path
// that was a PING, its acknowledgement and a wake-up of each process per
// call.
func TestPlugin_SendsNoBandwidthPings(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	p, err := New(ctx, Config{NodeID: "n1", Root: t.TempDir(), Logger: hclog.NewNullLogger()})
	must.NoError(t, err)
	sockDir, err := os.MkdirTemp("", "hp")
	must.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "csi.sock")
	inner, err := net.Listen("unix", sock)
	must.NoError(t, err)
	lis := &recordingListener{Listener: inner}
	served := make(chan error, 1)
	go func() { served <- p.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		must.NoError(t, <-served)
		must.NoError(t, p.Close())
	})

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	must.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	node := csi.NewNodeClient(conn)
	for range 20 {
		_, err := node.NodeGetCapabilities(t.Context(), &csi.NodeGetCapabilitiesRequest{})
		must.NoError(t, err)
	}
	must.Zero(t, lis.pings(t))
}

// The plugin runs on one processor unless $GOMAXPROCS asks otherwise.
func TestOneProc(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })

	runtime.GOMAXPROCS(2)
	t.Setenv("GOMAXPROCS", "2")
	oneProc()
	must.EqOp(t, 2, runtime.GOMAXPROCS(0), must.Sprint("an explicit $GOMAXPROCS is the operator's"))

	t.Setenv("GOMAXPROCS", "")
	oneProc()
	must.EqOp(t, 1, runtime.GOMAXPROCS(0))
}
