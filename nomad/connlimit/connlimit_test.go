package connlimit

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
)

func TestLimiter(t *testing.T) {
	l := NewLimiter(2)
	a := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 1}
	b := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 2), Port: 1}
	r1, err := l.Acquire(a)
	must.NoError(t, err)
	_, err = l.Acquire(&net.TCPAddr{IP: a.IP, Port: 2})
	must.NoError(t, err)
	_, err = l.Acquire(a)
	must.ErrorContains(t, err, "source 10.0.0.1 already has 2 open rpc connections")
	_, err = l.Acquire(b) // another source is not affected
	must.NoError(t, err)
	r1()
	r1() // twice is harmless
	must.Eq(t, 1, l.Open("10.0.0.1"))
	_, err = l.Acquire(a)
	must.NoError(t, err)

	unlimited := NewLimiter(0)
	for range 1000 {
		_, err := unlimited.Acquire(a)
		must.NoError(t, err)
	}
}

// failingListener fails Accept with EMFILE n times, then is closed.
type failingListener struct {
	n     int
	calls int
}

func (l *failingListener) Accept() (net.Conn, error) {
	l.calls++
	if l.calls <= l.n {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	return nil, net.ErrClosed
}
func (l *failingListener) Close() error   { return nil }
func (l *failingListener) Addr() net.Addr { return &net.TCPAddr{} }

// TestAccept_BacksOffAndRateLimitsLogs: a listener failing with EMFILE
// 2000 times is retried with backoff (not spun on) and logged a handful
// of times, not 2000 (the issue saw 875,777 lines in 13 s).
func TestAccept_BacksOffAndRateLimitsLogs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		logger := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Error})
		ln := &failingListener{n: 2000}
		start := time.Now()
		err := Accept(context.Background(), ln, logger, func(net.Conn) {})
		must.True(t, errors.Is(err, net.ErrClosed))
		elapsed := time.Since(start)
		// With a 1s cap and jitter of at least half, 2000 failures
		// take well over 10 minutes of (fake) time.
		must.Greater(t, 10*time.Minute, elapsed)
		lines := strings.Count(logs.String(), "accepting rpc connection failed")
		must.Between(t, 1, lines, int(elapsed/(5*time.Second))+1)
		must.StrContains(t, logs.String(), "suppressed")
	})
}

func TestAccept_StopsOnContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		ln := &failingListener{n: 1 << 30}
		done := make(chan error)
		go func() { done <- Accept(ctx, ln, hclog.NewNullLogger(), func(net.Conn) {}) }()
		time.Sleep(time.Minute) // fake time inside the bubble
		cancel()
		must.NoError(t, <-done)
	})
}

func TestIdleConn_ClosesAfterSilence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		c := &IdleConn{Conn: a, Timeout: time.Minute}
		go b.Write([]byte("x"))
		buf := make([]byte, 1)
		_, err := c.Read(buf)
		must.NoError(t, err)
		_, err = c.Read(buf) // nothing more is sent
		must.ErrorIs(t, err, os.ErrDeadlineExceeded)
	})
}
