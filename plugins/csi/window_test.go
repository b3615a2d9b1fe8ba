package csi

import (
	"context"
	"net"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/plugins/csi/fake"
	"github.com/berth-io/berth/testutil"
)

// writeRecorder is a connection that keeps a copy of what is written to it.
type writeRecorder struct {
	net.Conn
	// mu guards buf.
	mu  *sync.Mutex
	buf *[]byte
}

func (c writeRecorder) Write(b []byte) (int, error) {
	c.mu.Lock()
	*c.buf = append(*c.buf, b...)
	c.mu.Unlock()
	return c.Conn.Write(b)
}

// http2Pings counts the PING frames (not their acknowledgements) in b, the
// bytes a client wrote: the connection preface, then frames of a 9-byte
// header (length 24 bits, type, flags, stream) and a payload.
func http2Pings(t *testing.T, b []byte) int {
	t.Helper()
	const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	must.StrHasPrefix(t, preface, string(b))
	b = b[len(preface):]
	pings, left := testutil.HTTP2Pings(b)
	must.Zero(t, left, must.Sprint("a frame was cut short"))
	return pings
}

// The connection to a plugin has a fixed flow-control window, so the client
// never sends gRPC's bandwidth-estimating PINGs, which by default follow the
// first answer after each quiet spell: on a plugin socket carrying one call
// at a time that was a PING, its acknowledgement and a wake-up of each
// process per call.
func TestClient_SendsNoBandwidthPings(t *testing.T) {
	sock := socketPath(t)
	fake.Start(t, sock)
	var mu sync.Mutex
	var written []byte
	c, err := New(sock, hclog.NewNullLogger(), WithDialer(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "unix", sock)
		if err != nil {
			return nil, err
		}
		return writeRecorder{Conn: conn, mu: &mu, buf: &written}, nil
	}))
	must.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	for range 20 {
		_, err := c.NodeGetCapabilities(testCtx(t))
		must.NoError(t, err)
	}
	mu.Lock()
	defer mu.Unlock()
	must.Zero(t, http2Pings(t, written))
}
