// Package connlimit keeps one source from exhausting a server's
// connections: a cap on open connections per source IP, a read deadline
// that closes connections left idle, and backoff for an accept loop that
// fails (EMFILE) so it neither spins nor floods the log.
package connlimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/helper"
)

// Limiter counts open connections per source IP. Safe for concurrent use.
type Limiter struct {
	max int

	// lock guards open.
	lock sync.Mutex
	open map[string]int
}

// NewLimiter allows max open connections per source IP; 0 allows any.
func NewLimiter(max int) *Limiter { return &Limiter{max: max, open: map[string]int{}} }

// Acquire takes a slot for a connection from addr. On success the caller
// must call release once, when the connection closes.
func (l *Limiter) Acquire(addr net.Addr) (release func(), err error) {
	ip := sourceIP(addr)
	l.lock.Lock()
	defer l.lock.Unlock()
	if l.max > 0 && l.open[ip] >= l.max {
		return nil, fmt.Errorf("source %s already has %d open rpc connections, the limit (limits.rpc_max_conns_per_client)", ip, l.max)
	}
	l.open[ip]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.lock.Lock()
			defer l.lock.Unlock()
			if l.open[ip]--; l.open[ip] <= 0 {
				delete(l.open, ip)
			}
		})
	}, nil
}

// Open returns how many connections from ip are open (tests, metrics).
func (l *Limiter) Open(ip string) int {
	l.lock.Lock()
	defer l.lock.Unlock()
	return l.open[ip]
}

func sourceIP(addr net.Addr) string {
	if ta, ok := addr.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	if addr == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return host
}

// IdleConn closes a connection nothing was read from for Timeout: each
// Read moves the read deadline. Timeout must outlast the longest time a
// well-behaved peer stays silent (a blocking query it waits on).
type IdleConn struct {
	net.Conn
	Timeout time.Duration
}

func (c *IdleConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.Timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

// Accept accepts from ln until ctx ends. A failed Accept waits with
// capped backoff (doubling from 5ms to 1s, reset by a success) and logs
// at most once per 5s, with how many failures it held back. It returns
// nil once ctx is done; a listener closed while ctx is live is an error.
// Any other error (EMFILE, ENFILE, ECONNABORTED) is retried.
func Accept(ctx context.Context, ln net.Listener, logger hclog.Logger, handle func(net.Conn)) error {
	b := helper.Backoff{Base: 5 * time.Millisecond, Max: time.Second}
	limit := helper.NewLogLimiter(5 * time.Second)
	failures := 0
	for {
		conn, err := ln.Accept()
		if err == nil {
			failures = 0
			handle(conn)
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, net.ErrClosed) {
			return fmt.Errorf("rpc listener closed: %w", err)
		}
		if ok, held := limit.Allow(); ok {
			logger.Error("accepting rpc connection failed; backing off", "error", err, "suppressed", held)
		}
		t := time.NewTimer(b.Delay(failures))
		failures++
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}
