package nomad_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil"
	"github.com/berth-io/berth/testutil/cluster"
)

// TestRPC_ConnectionCapPerSource: a source over its cap has its new
// connections closed at once, while the ones it holds and the server's
// in-process RPC keep working; closing one frees a slot.
func TestRPC_ConnectionCapPerSource(t *testing.T) {
	s := cluster.NewServer(t, func(c *nomad.Config) { c.RPCMaxConnsPerClient = 3 })
	dial := func() net.Conn {
		c, err := net.Dial("tcp", s.Addr)
		must.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		_, err = c.Write([]byte{0x01})
		must.NoError(t, err)
		return c
	}
	// closed reports whether the server closed c (EOF) within wait
	// rather than keeping it open (the read deadline passes).
	closed := func(c net.Conn, wait time.Duration) bool {
		c.SetReadDeadline(time.Now().Add(wait))
		_, err := c.Read(make([]byte, 1))
		// EOF, or a reset: the server closed it with our byte unread.
		var ne net.Error
		return err != nil && !(errors.As(err, &ne) && ne.Timeout())
	}
	held := []net.Conn{dial(), dial(), dial()}
	over := dial()
	// A deadline, not a speed check: a loaded CI box may take a while.
	must.True(t, closed(over, testutil.WaitTimeout), must.Sprint("a fourth connection from one source was kept"))
	for _, c := range held {
		must.False(t, closed(c, 500*time.Millisecond))
	}
	var reply structs.PingResponse
	must.NoError(t, s.RPC("Status.Ping", &structs.GenericRequest{}, &reply))

	held[0].Close()
	// The slot frees once the server sees the close; a new connection
	// is eventually kept.
	deadline := time.Now().Add(testutil.WaitTimeout)
	for {
		if !closed(dial(), 500*time.Millisecond) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slot of a closed connection was never freed")
		}
	}
}
