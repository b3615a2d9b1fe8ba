package nomad

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/rpc"
	"sync"
	"time"

	"github.com/berth-io/berth/nomad/msgpack"
	"github.com/berth-io/berth/nomad/structs"
)

// Node sessions are how the leader calls clients, e.g. to run a CSI
// controller RPC through the client that runs the controller plugin.
//
// A client opens the session: it dials the leader's RPC port and sends
// rpcByteNodeSession, and from then on the roles on that connection are
// reversed — the server is the net/rpc caller and the client serves. So
// clients need no listening port and no address the servers can reach
// (why: clients sit behind NAT and firewalls as often as not; Nomad
// multiplexes over the client's own RPC connection for the same reason).
// The first call is NodeSession.Identify: the client names its node and
// proves it with the node's secret.
//
// Only the leader holds sessions, since only the leader calls clients: a
// follower closes a session at once, and the leader closes every session
// when it loses leadership, so clients redial the new leader (learnt from
// Status.Leader). While a client has no session, calls to it fail with a
// retryable error; the claim protocol retries them.
const rpcByteNodeSession byte = 0x03

// nodeSessionIdentifyTimeout bounds the Identify call of a new session.
const nodeSessionIdentifyTimeout = 10 * time.Second

// DialNodeSession opens a node session to the server at addr, over mutual
// TLS when tc is set. The caller serves net/rpc on the returned
// connection (with msgpack.NewRPCCodec).
func DialNodeSession(ctx context.Context, addr string, tc *tls.Config) (net.Conn, error) {
	conn, err := dialConn(ctx, addr, rpcByteNodeSession, tc)
	if err != nil {
		return nil, fmt.Errorf("dialing server %s for a node session: %w", addr, err)
	}
	return conn, nil
}

// DialNodeSession opens a node session to the current leader, for a client
// in the same process (-dev, tests).
func (s *Server) DialNodeSession(ctx context.Context) (net.Conn, error) {
	leader, err := s.waitForLeader(ctx)
	if err != nil {
		return nil, err
	}
	return DialNodeSession(ctx, leader, s.outgoingTLS())
}

// NodeSessionOpen reports whether this server (the leader) holds an open
// session with the node.
func (s *Server) NodeSessionOpen(nodeID string) bool { return s.sessions.has(nodeID) }

// nodeSession is one client's open session.
type nodeSession struct {
	nodeID string
	rc     *rpc.Client
	// done is closed when the connection fails or is closed.
	done chan struct{}
	once sync.Once
}

func (n *nodeSession) close() {
	n.once.Do(func() { close(n.done) })
	n.rc.Close()
}

// doneConn closes done when a read on the connection fails: the session
// is gone.
type doneConn struct {
	net.Conn
	sess *nodeSession
}

func (c *doneConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		c.sess.once.Do(func() { close(c.sess.done) })
	}
	return n, err
}

// nodeSessions holds the leader's sessions by node ID.
type nodeSessions struct {
	// lock guards open and byNode.
	lock sync.Mutex
	// open is true while this server runs leader duties; sessions are
	// refused otherwise.
	open   bool
	byNode map[string]*nodeSession
	// opened is closed when the table opens; nil until first needed.
	opened chan struct{}
}

// waitOpen waits until leader duties run, for a session that arrives
// between the election and the leader's barrier (clients dial the new
// leader as soon as it is elected). It reports whether they run.
func (ns *nodeSessions) waitOpen(ctx context.Context) bool {
	ns.lock.Lock()
	if ns.open {
		ns.lock.Unlock()
		return true
	}
	if ns.opened == nil {
		ns.opened = make(chan struct{})
	}
	ch := ns.opened
	ns.lock.Unlock()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// add records sess, replacing (and closing) an older session of the same
// node. It refuses sess when leader duties are not running.
func (ns *nodeSessions) add(sess *nodeSession) bool {
	ns.lock.Lock()
	defer ns.lock.Unlock()
	if !ns.open {
		return false
	}
	if ns.byNode == nil {
		ns.byNode = map[string]*nodeSession{}
	}
	if old := ns.byNode[sess.nodeID]; old != nil {
		old.close()
	}
	ns.byNode[sess.nodeID] = sess
	return true
}

// remove forgets sess if it is still the node's session.
func (ns *nodeSessions) remove(sess *nodeSession) {
	ns.lock.Lock()
	defer ns.lock.Unlock()
	if ns.byNode[sess.nodeID] == sess {
		delete(ns.byNode, sess.nodeID)
	}
}

func (ns *nodeSessions) get(nodeID string) *nodeSession {
	ns.lock.Lock()
	defer ns.lock.Unlock()
	return ns.byNode[nodeID]
}

// has reports whether nodeID has a session.
func (ns *nodeSessions) has(nodeID string) bool { return ns.get(nodeID) != nil }

// setOpen opens the table for a leadership term, or closes every session
// and refuses new ones at its end.
func (ns *nodeSessions) setOpen(open bool) {
	ns.lock.Lock()
	defer ns.lock.Unlock()
	ns.open = open
	if open {
		if ns.opened != nil {
			close(ns.opened)
			ns.opened = nil
		}
		return
	}
	for id, sess := range ns.byNode {
		sess.close()
		delete(ns.byNode, id)
	}
}

// runNodeSessions is a leader duty: sessions are accepted for as long as
// it runs.
func (s *Server) runNodeSessions(ctx context.Context) {
	s.sessions.setOpen(true)
	<-ctx.Done()
	s.sessions.setOpen(false)
}

// serveNodeSession takes a connection that sent rpcByteNodeSession.
func (s *Server) serveNodeSession(ctx context.Context, conn net.Conn) {
	logger := s.logger.With("remote", conn.RemoteAddr().String())
	if !s.IsLeader() {
		logger.Debug("refusing a node session: not the leader")
		conn.Close()
		return
	}
	s.trackConn(conn, true)
	defer s.trackConn(conn, false)
	// Serve only once the leader's duties run: its state is then caught
	// up with every earlier term (the node lookup below must not read
	// stale state), and the session table is open.
	waitCtx, waitCancel := context.WithTimeout(ctx, nodeSessionIdentifyTimeout)
	ready := s.sessions.waitOpen(waitCtx)
	waitCancel()
	if !ready {
		logger.Debug("refusing a node session: leader duties did not start in time")
		conn.Close()
		return
	}

	sess := &nodeSession{done: make(chan struct{})}
	sess.rc = rpc.NewClientWithCodec(msgpack.NewRPCCodec(&doneConn{Conn: conn, sess: sess}))
	defer sess.close()

	idCtx, cancel := context.WithTimeout(ctx, nodeSessionIdentifyTimeout)
	var id structs.NodeSessionIdentity
	err := sess.call(idCtx, "NodeSession.Identify", &structs.NodeSessionIdentifyRequest{}, &id)
	cancel()
	if err != nil {
		logger.Warn("node session: the client did not identify itself", "error", err)
		return
	}
	node, err := s.State().NodeByID(nil, id.NodeID)
	switch {
	case err != nil:
		logger.Error("node session: reading the node", "node_id", id.NodeID, "error", err)
		return
	case node == nil:
		logger.Warn("node session refused: unknown node; the client registers first", "node_id", id.NodeID)
		return
	case subtle.ConstantTimeCompare([]byte(node.SecretID), []byte(id.SecretID)) != 1:
		logger.Warn("node session refused: wrong secret for the node", "node_id", id.NodeID)
		return
	}
	sess.nodeID = id.NodeID
	if !s.sessions.add(sess) {
		logger.Debug("refusing a node session: leadership is changing", "node_id", id.NodeID)
		return
	}
	defer s.sessions.remove(sess)
	logger.Debug("node session open", "node_id", id.NodeID)
	select {
	case <-sess.done:
	case <-ctx.Done():
	}
	logger.Debug("node session closed", "node_id", id.NodeID)
}

// call runs method on the session's client; when ctx ends first it
// returns ctx's error (net/rpc cannot cancel: the reply goes nowhere).
func (n *nodeSession) call(ctx context.Context, method string, args, reply any) error {
	call := n.rc.Go(method, args, reply, make(chan *rpc.Call, 1))
	select {
	case <-call.Done:
	case <-ctx.Done():
		return ctx.Err()
	case <-n.done:
		return io.ErrUnexpectedEOF
	}
	if call.Error != nil {
		var se rpc.ServerError
		if errors.As(call.Error, &se) {
			return structs.DecodeWireError(call.Error)
		}
		return call.Error
	}
	return nil
}

// nodeRPC calls method on the client of nodeID through its session. A
// node without a session, or whose session breaks, gives a retryable
// error naming the node; an error the client answered keeps its code.
func (s *Server) nodeRPC(ctx context.Context, nodeID, method string, args, reply any) error {
	sess := s.sessions.get(nodeID)
	if sess == nil {
		return notTaken{structs.NewError(structs.CodeRetryable,
			"node %s is not connected to the leader (no node session: its client is down, restarting or reconnecting); retry", nodeID)}
	}
	err := sess.call(ctx, method, args, reply)
	if err == nil {
		return nil
	}
	var coded *structs.Error
	if errors.As(err, &coded) {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("calling %s on node %s: %w", method, nodeID, err)
	}
	// The connection broke: forget it; the client redials.
	s.sessions.remove(sess)
	sess.close()
	// The request may have reached the client, which may still run it.
	return mayStillRun{structs.NewError(structs.CodeRetryable, "calling %s on node %s: its session broke (%v); retry", method, nodeID, err)}
}
