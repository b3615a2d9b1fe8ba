package nomad

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/rpc"
	"reflect"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/helper/tlsutil"
	"github.com/berth-io/berth/nomad/connlimit"
	"github.com/berth-io/berth/nomad/msgpack"
	"github.com/berth-io/berth/nomad/structs"
)

// The RPC port carries two protocols; the first byte of a connection says
// which. One port is easier to operate and to firewall than two.
const (
	rpcByteRPC  byte = 0x01 // net/rpc with the msgpack codec
	rpcByteRaft byte = 0x02 // hashicorp/raft's network transport
	// rpcByteNodeSession (0x03, node_session.go): a client's node session.
	// rpcByteTLS starts a TLS handshake; the first byte inside the TLS
	// stream then names one of the protocols above. With Config.TLS set it
	// is the only byte the port takes.
	rpcByteTLS byte = 0x04
)

// handshakeTimeout bounds the start of a connection: the protocol byte,
// and with TLS the handshake and the inner byte.
const handshakeTimeout = 10 * time.Second

// listen accepts connections and hands each to its protocol. A source
// over its connection cap is closed at once; accept errors back off
// (connlimit.Accept).
func (s *Server) listen(ctx context.Context) {
	defer s.wg.Done()
	refused := helper.NewLogLimiter(5 * time.Second)
	err := connlimit.Accept(ctx, s.rpcListener, s.logger, func(conn net.Conn) {
		release, err := s.connLimit.Acquire(conn.RemoteAddr())
		if err != nil {
			if ok, held := refused.Allow(); ok {
				s.logger.Warn("refusing rpc connection", "error", err, "suppressed", held)
			}
			conn.Close()
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer release()
			s.handleConn(ctx, conn)
		}()
	})
	if err != nil {
		s.logger.Error("rpc listener stopped", "error", err)
	}
}

func (s *Server) handleConn(ctx context.Context, conn net.Conn) {
	// A peer that connects but never sends its protocol byte (or never
	// finishes its handshake) must not hold a goroutine forever.
	conn.SetDeadline(time.Now().Add(handshakeTimeout))
	b, err := readByte(conn)
	if err != nil {
		conn.Close()
		return
	}
	logger := s.logger.With("remote", conn.RemoteAddr().String())
	var peer *tls.ConnectionState
	switch {
	case b == rpcByteTLS && s.config.TLS != nil:
		tc := tls.Server(conn, s.config.TLS.IncomingConfig(tls.RequireAndVerifyClientCert))
		if err := tc.HandshakeContext(ctx); err != nil {
			logger.Warn("refusing rpc connection: tls handshake failed", "error", err)
			conn.Close()
			return
		}
		st := tc.ConnectionState()
		peer, conn = &st, tc
		if b, err = readByte(conn); err != nil {
			conn.Close()
			return
		}
	case b == rpcByteTLS:
		logger.Warn("refusing tls rpc connection: tls.rpc is off on this server")
		conn.Close()
		return
	case s.config.TLS != nil:
		logger.Warn("refusing plaintext rpc connection: tls.rpc is on, so peers must use TLS", "byte", b)
		conn.Close()
		return
	}
	conn.SetDeadline(time.Time{})
	// Roles by certificate: only servers may speak Raft; node sessions
	// need a client (or server, for the -dev client) certificate.
	switch {
	case peer == nil:
	case b == rpcByteRaft:
		if err := tlsutil.PeerRole(*peer, tlsutil.RoleServer, s.config.Region); err != nil {
			logger.Warn("refusing raft connection", "error", err)
			conn.Close()
			return
		}
	case b == rpcByteNodeSession:
		if tlsutil.PeerRole(*peer, tlsutil.RoleClient, s.config.Region) != nil && tlsutil.PeerRole(*peer, tlsutil.RoleServer, s.config.Region) != nil {
			logger.Warn("refusing node session: the peer's certificate is neither a client's nor a server's",
				"names", peer.PeerCertificates[0].DNSNames)
			conn.Close()
			return
		}
	}
	switch b {
	case rpcByteRPC:
		s.serveRPC(conn)
	case rpcByteRaft:
		s.raftLayer.handoff(ctx, conn)
	case rpcByteNodeSession:
		s.serveNodeSession(ctx, conn)
	default:
		logger.Warn("unknown rpc protocol byte; closing connection", "byte", b)
		conn.Close()
	}
}

func readByte(conn net.Conn) (byte, error) {
	var b [1]byte
	_, err := io.ReadFull(conn, b[:])
	return b[0], err
}

// dialConn dials addr and announces proto. With tc it first announces
// TLS, completes the handshake (tc says which server name the peer's
// certificate must carry), and announces proto inside the TLS stream.
func dialConn(ctx context.Context, addr string, proto byte, tc *tls.Config) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		tcp.SetKeepAlive(true)
		tcp.SetKeepAlivePeriod(15 * time.Second)
		tcp.SetNoDelay(true)
	}
	if tc != nil {
		if _, err := conn.Write([]byte{rpcByteTLS}); err != nil {
			conn.Close()
			return nil, err
		}
		t := tls.Client(conn, tc)
		if err := t.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("tls handshake: %w", err)
		}
		conn = t
	}
	if _, err := conn.Write([]byte{proto}); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// outgoingTLS is the config for a dial to another server, nil without
// TLS. A server only ever dials servers, so the peer must hold a server
// certificate.
func (s *Server) outgoingTLS() *tls.Config {
	if s.config.TLS == nil {
		return nil
	}
	return s.config.TLS.OutgoingConfig(tlsutil.RoleServer.Name(s.config.Region))
}

func (s *Server) serveRPC(conn net.Conn) {
	s.trackConn(conn, true)
	defer s.trackConn(conn, false)
	// An RPC connection idle past the longest blocking query is closed;
	// pooled clients redial (ConnPool.RPC).
	if s.config.RPCIdleTimeout > 0 {
		conn = &connlimit.IdleConn{Conn: conn, Timeout: s.config.RPCIdleTimeout}
	}
	// ServeCodec runs each request in its own goroutine, so a blocking
	// query never holds up a heartbeat sent on the same connection. It
	// returns when the connection closes (Shutdown closes tracked conns).
	s.rpcServer.ServeCodec(newAuthCodec(s, msgpack.NewRPCCodec(conn)))
}

// trackConn remembers open RPC connections so Shutdown can close them and
// not wait on idle clients. One that opens after Shutdown closed them (its
// handshake was in flight) is closed at once: Shutdown waits for its
// goroutine, which would otherwise read from it forever.
func (s *Server) trackConn(c net.Conn, open bool) {
	s.connsLock.Lock()
	defer s.connsLock.Unlock()
	if open {
		if s.connsClosed {
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
	} else {
		delete(s.conns, c)
	}
}

func (s *Server) closeConns() {
	s.connsLock.Lock()
	defer s.connsLock.Unlock()
	s.connsClosed = true
	for c := range s.conns {
		c.Close()
	}
}

// raftLayer is a raft.StreamLayer over the shared RPC port: inbound Raft
// connections arrive through handoff; outbound ones send the Raft byte.
//
// The layer owns every connection it hands to Raft, both ways, and Close
// closes them: raft.NetworkTransport.Close stops only the accept loop, so
// without this a shut-down server keeps a goroutine blocked reading each
// inbound connection (and through it the whole Raft instance and its
// state) until the peer hangs up, and its pooled outbound connections
// stay open; a process that starts and stops many servers (the simulator)
// grew by a Raft instance per stopped server.
type raftLayer struct {
	addr net.Addr
	// tls, when set, gives the config of each outbound dial.
	tls     func() *tls.Config
	connCh  chan net.Conn
	closeCh chan struct{}
	once    sync.Once

	// mu guards conns and closed.
	mu     sync.Mutex
	conns  map[*raftConn]struct{}
	closed bool
}

// raftConn is a connection the raftLayer handed to Raft; closing it
// forgets it.
type raftConn struct {
	net.Conn
	l    *raftLayer
	once sync.Once
}

func (c *raftConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

func newRaftLayer(addr net.Addr, tls func() *tls.Config) *raftLayer {
	return &raftLayer{addr: addr, tls: tls, connCh: make(chan net.Conn), closeCh: make(chan struct{}),
		conns: map[*raftConn]struct{}{}}
}

// track wraps c so that Close closes it; a layer already closed closes c.
func (l *raftLayer) track(c net.Conn) (net.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		c.Close()
		return nil, net.ErrClosed
	}
	rc := &raftConn{Conn: c, l: l}
	l.conns[rc] = struct{}{}
	return rc, nil
}

func (l *raftLayer) handoff(ctx context.Context, c net.Conn) {
	tc, err := l.track(c)
	if err != nil {
		return
	}
	select {
	case l.connCh <- tc:
	case <-l.closeCh:
		tc.Close()
	case <-ctx.Done():
		tc.Close()
	}
}

func (l *raftLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.connCh:
		return c, nil
	case <-l.closeCh:
		return nil, net.ErrClosed
	}
}

// Close stops Accept and closes every connection handed to Raft.
func (l *raftLayer) Close() error {
	l.once.Do(func() { close(l.closeCh) })
	l.mu.Lock()
	l.closed = true
	conns := l.conns
	l.conns = map[*raftConn]struct{}{}
	l.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
	return nil
}

func (l *raftLayer) Addr() net.Addr { return l.addr }

func (l *raftLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := dialConn(ctx, string(address), rpcByteRaft, l.tls())
	if err != nil {
		return nil, err
	}
	return l.track(c)
}

// ConnPool keeps one multiplexed net/rpc client per server address. A
// client whose connection broke is dropped and redialled on next use.
type ConnPool struct {
	timeout time.Duration
	// tls, when set, gives the config of each dial (WithTLS).
	tls func() *tls.Config

	// lock guards clients.
	lock    sync.Mutex
	clients map[string]*rpc.Client
}

// NewConnPool makes a pool whose dials time out after timeout.
func NewConnPool(timeout time.Duration) *ConnPool {
	return &ConnPool{timeout: timeout, clients: map[string]*rpc.Client{}}
}

// WithTLS makes the pool dial with mutual TLS, taking each dial's config
// from f (so reloaded certificates apply to new connections). Call it
// before the first RPC.
func (p *ConnPool) WithTLS(f func() *tls.Config) *ConnPool {
	p.tls = f
	return p
}

func (p *ConnPool) get(addr string) (*rpc.Client, error) {
	p.lock.Lock()
	defer p.lock.Unlock()
	if c, ok := p.clients[addr]; ok {
		return c, nil
	}
	ctx := context.Background()
	if p.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	var tc *tls.Config
	if p.tls != nil {
		tc = p.tls()
	}
	conn, err := dialConn(ctx, addr, rpcByteRPC, tc)
	if err != nil {
		return nil, fmt.Errorf("dialing server %s: %w", addr, err)
	}
	c := rpc.NewClientWithCodec(msgpack.NewRPCCodec(conn))
	p.clients[addr] = c
	return c, nil
}

func (p *ConnPool) drop(addr string, c *rpc.Client) {
	p.lock.Lock()
	defer p.lock.Unlock()
	if p.clients[addr] == c {
		delete(p.clients, addr)
		c.Close()
	}
}

// RPC calls method on the server at addr. Coded errors come back as
// *structs.Error; transport errors drop the connection.
func (p *ConnPool) RPC(ctx context.Context, addr, method string, args, reply any) error {
	err := p.call(ctx, addr, method, args, reply)
	if errors.Is(err, rpc.ErrShutdown) {
		// The pooled connection had closed (a server restart, or the
		// server's idle deadline) before the call was sent: redial once.
		err = p.call(ctx, addr, method, args, reply)
	}
	return err
}

func (p *ConnPool) call(ctx context.Context, addr, method string, args, reply any) error {
	c, err := p.get(addr)
	if err != nil {
		return err
	}
	call := c.Go(method, args, reply, make(chan *rpc.Call, 1))
	select {
	case <-call.Done:
	case <-ctx.Done():
		// net/rpc cannot cancel a call; drop the connection so the reply
		// (if any) goes nowhere and the next call redials.
		p.drop(addr, c)
		return ctx.Err()
	}
	if call.Error != nil {
		var se rpc.ServerError
		if errors.As(call.Error, &se) {
			return structs.DecodeWireError(call.Error)
		}
		p.drop(addr, c)
		if errors.Is(call.Error, rpc.ErrShutdown) {
			return call.Error
		}
		return fmt.Errorf("rpc %s to %s: %w", method, addr, call.Error)
	}
	return nil
}

// Close closes every pooled connection.
func (p *ConnPool) Close() {
	p.lock.Lock()
	defer p.lock.Unlock()
	for addr, c := range p.clients {
		c.Close()
		delete(p.clients, addr)
	}
}

// inmemCodec serves one in-process RPC (the HTTP API and the -dev client
// calling their own server) through net/rpc's dispatch without encoding:
// args and reply are copied by value. It keeps the endpoint skeleton
// (forwarding, blocking, errors) identical for local and remote callers.
type inmemCodec struct {
	method string
	args   any
	reply  any
	err    error
	read   bool
}

func (c *inmemCodec) ReadRequestHeader(r *rpc.Request) error {
	if c.read {
		return io.EOF
	}
	c.read = true
	r.ServiceMethod = c.method
	return nil
}

func (c *inmemCodec) ReadRequestBody(out any) error {
	if out == nil {
		return nil
	}
	reflect.ValueOf(out).Elem().Set(reflect.ValueOf(c.args).Elem())
	return nil
}

func (c *inmemCodec) WriteResponse(resp *rpc.Response, body any) error {
	if resp.Error != "" {
		c.err = structs.DecodeWireError(errors.New(resp.Error))
		return nil
	}
	if c.reply != nil && body != nil {
		reflect.ValueOf(c.reply).Elem().Set(reflect.ValueOf(body).Elem())
	}
	return nil
}

func (c *inmemCodec) Close() error { return nil }

// wire converts an endpoint's error into the form that carries its code
// across net/rpc. Every endpoint defers it: `defer wire(&err)`.
func wire(err *error) {
	if *err != nil {
		*err = structs.WireError(*err)
	}
}
