package nomad

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// TestServer_ConnOpenedAfterShutdownClosedConnsIsClosed: an RPC
// connection whose handshake was in flight while Shutdown closed the open
// ones registers afterwards; it must be closed then, or its ServeCodec
// reads forever and Shutdown waits for it forever. The simulator hung on
// this for 9 minutes in a leader restart (seeds 42000-43999, run of
// 2026-11-26).
func TestServer_ConnOpenedAfterShutdownClosedConnsIsClosed(t *testing.T) {
	s := &Server{conns: map[net.Conn]struct{}{}}
	s.closeConns()
	conn, peer := net.Pipe()
	defer peer.Close()
	// A write to a net.Pipe end blocks until the other end reads, unless
	// the end is closed; the deadline turns a missing close into a
	// failure instead of a hang.
	must.NoError(t, conn.SetWriteDeadline(time.Now().Add(10*time.Second)))
	s.trackConn(conn, true)
	_, err := conn.Write([]byte{1})
	must.ErrorIs(t, err, io.ErrClosedPipe)
	must.MapEmpty(t, s.conns)
}
