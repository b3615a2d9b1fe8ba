package client

import (
	"context"
	"net"
	"net/rpc"
	"time"

	"github.com/berth-io/berth/client/csiendpoint"
	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/msgpack"
	"github.com/berth-io/berth/nomad/structs"
)

// The node session is how the leader calls this client: CSI controller
// RPCs and node detaches, whose endpoints are in client/csiendpoint, and
// alloc restart and signal (ClientAlloc, alloc_lifecycle.go). The
// client dials the leader and serves net/rpc on that connection (see
// nomad/node_session.go for why the roles are reversed). This file is the
// transport: the client keeps one session open while it runs, redialling
// with backoff whenever it breaks, e.g. when leadership moves.

// SessionDialer is an RPCer that can open a node session to the leader.
// Without it the client serves no session and the servers cannot reach
// its controller plugins.
type SessionDialer interface {
	DialNodeSession(ctx context.Context) (net.Conn, error)
}

// nodeSessionBackoff paces redials of a failed or broken session: capped
// at 5 s so a down leader is not dialled by every client at once, while
// any answer from the servers cuts the wait short (redialer.wait).
var nodeSessionBackoff = helper.Backoff{Base: 100 * time.Millisecond, Max: 5 * time.Second}

// nodeSessionLoop keeps a node session open until ctx ends.
func (c *Client) nodeSessionLoop(ctx context.Context) {
	dialer, ok := c.cfg.RPC.(SessionDialer)
	if !ok {
		c.logger.Debug("the RPC transport cannot open node sessions: the servers cannot reach this node's CSI controllers")
		return
	}
	select {
	case <-c.registered: // the servers check the session against the node
	case <-ctx.Done():
		return
	}
	srv := rpc.NewServer()
	if err := srv.RegisterName("NodeSession", &nodeSessionEndpoint{c: c}); err != nil {
		c.logger.Error("node session: registering endpoint", "error", err)
		return
	}
	if err := srv.RegisterName("ClientAlloc", &ClientAlloc{c: c}); err != nil {
		c.logger.Error("node session: registering endpoint", "error", err)
		return
	}
	if err := csiendpoint.Register(ctx, srv, c.csiEndpointConfig()); err != nil {
		c.logger.Error("node session: registering endpoint", "error", err)
		return
	}
	rd := redialer{backoff: nodeSessionBackoff, contact: c.serverContact}
	rd.run(ctx, dialer.DialNodeSession, func(conn net.Conn) { c.serveNodeSession(ctx, srv, conn) },
		func(err error) { c.logger.Debug("node session: dialling the leader", "error", err) })
}

// redialer keeps dialling a session after each one fails or breaks. The
// wait between dials grows with backoff, but a server answering any other
// RPC of this client (contact: the client's heartbeats, alloc updates)
// means a partition has healed or a leader is back, so the wait is cut to
// backoff's first step (jittered, so clients healed together do not dial
// together). Only answers after a dial count, and a dial is never sooner
// than that first step after a wake, so even a stream of answers cannot
// make the client dial faster than one per first step.
type redialer struct {
	backoff helper.Backoff
	contact chan struct{}
}

// run dials until ctx ends, serving each session with serve until it
// ends; failed reports a failed dial.
func (rd redialer) run(ctx context.Context, dial func(context.Context) (net.Conn, error), serve func(net.Conn), failed func(error)) {
	attempt := 0
	for ctx.Err() == nil {
		// Answers that came before this dial say nothing about it.
		select {
		case <-rd.contact:
		default:
		}
		conn, err := dial(ctx)
		if err == nil {
			start := time.Now()
			serve(conn)
			if time.Since(start) > 10*time.Second {
				attempt = 0 // a session that lived was no failure
			}
		} else if ctx.Err() == nil {
			failed(err)
		}
		if !rd.wait(ctx, rd.backoff.Delay(attempt)) {
			return
		}
		attempt++
	}
}

// wait sleeps d, or backoff's first step once a server answers, whichever
// ends first; false when ctx ends.
func (rd redialer) wait(ctx context.Context, d time.Duration) bool {
	deadline := time.Now().Add(d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	case <-rd.contact:
	}
	// The cut counts from the answer. When the timer already running ends
	// sooner, it stays: it still ends d after the last dial, and returning
	// at once here would dial right after it.
	if short := rd.backoff.Delay(0); short < time.Until(deadline) {
		t.Reset(short)
	}
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// serveNodeSession serves conn until it breaks or ctx ends.
func (c *Client) serveNodeSession(ctx context.Context, srv *rpc.Server, conn net.Conn) {
	codec := msgpack.NewRPCCodec(conn)
	stop := context.AfterFunc(ctx, func() { codec.Close() })
	defer stop()
	srv.ServeCodec(codec) // returns when the connection closes
}

// nodeSessionEndpoint is the session's NodeSession endpoint.
type nodeSessionEndpoint struct{ c *Client }

// Identify names this node and proves it with the node's secret.
func (e *nodeSessionEndpoint) Identify(_ *structs.NodeSessionIdentifyRequest, reply *structs.NodeSessionIdentity) error {
	reply.NodeID = e.c.NodeID()
	reply.SecretID = e.c.nodeSecret()
	return nil
}

// csiEndpointConfig is what the session's CSI endpoints need of c.
func (c *Client) csiEndpointConfig() csiendpoint.Config {
	return csiendpoint.Config{
		NodeID:  c.NodeID(),
		Plugins: c.csi,
		TasksRunning: func(allocID string) bool {
			r, err := c.runner(allocID)
			return err == nil && !r.Alloc().TasksExited
		},
		Logger: c.logger,
	}
}
