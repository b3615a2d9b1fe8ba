package sim

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// RaftNet is the network between the servers of a 3-server schedule, as
// Raft sees it: every server's Raft transport is wrapped (Wrap, installed
// through nomad.Config.RaftTransportWrap) so that each outbound Raft RPC —
// AppendEntries (heartbeats included), RequestVote, RequestPreVote,
// InstallSnapshot, TimeoutNow — first asks RaftNet whether the link from
// its server to the target is up. A server cut off (Cut) can reach no
// other server and none can reach it; a lossy network (SetLoss) drops a
// request before it is delivered, or its response after (so the receiver
// applied it but the sender sees a failure, as when a reply packet is
// lost), and delays the rest.
//
// Every server wraps its own transport and the check is on the sender's
// side, which covers both directions of a link: a response rides on its
// request's call. Inbound RPCs are not screened again.
//
// Only Raft goes through RaftNet: RPC forwarding between servers and the
// clients' connections stay up, so a server cut off from Raft still
// forwards what it is asked to the leader it last knew. What a client
// sees when it loses the servers is the node partition of simCluster.
//
// Pipelined replication is turned off (the wrapper refuses it, and Raft
// falls back to one AppendEntries at a time), so that every append passes
// the check.
type RaftNet struct {
	mu    sync.Mutex
	cut   map[raft.ServerAddress]bool
	loss  Loss
	rand  *rand.Rand
	sleep func(time.Duration) // time.Sleep; a test may record instead
}

// Loss is how lossy the links between servers are.
type Loss struct {
	// DropRequest and DropResponse are the chances, in [0, 1], that a
	// call is lost before it reaches the target, or that its answer is
	// lost after the target handled it.
	DropRequest, DropResponse float64
	// Delay is the most a call waits before it is sent (uniform in
	// [0, Delay)).
	Delay time.Duration
}

// ErrPartitioned is the error of a Raft call over a link that is cut.
var ErrPartitioned = errors.New("sim: raft link partitioned")

// ErrDropped is the error of a Raft call the lossy network dropped.
var ErrDropped = errors.New("sim: raft message dropped")

// NewRaftNet makes a network with every link up and no loss; seed draws
// which calls are dropped and how long each is delayed.
func NewRaftNet(seed uint64) *RaftNet {
	return &RaftNet{
		cut:   map[raft.ServerAddress]bool{},
		rand:  rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d)),
		sleep: time.Sleep,
	}
}

// Cut cuts the server at addr off from every other server.
func (n *RaftNet) Cut(addr raft.ServerAddress) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[addr] = true
}

// Mend reconnects the server at addr.
func (n *RaftNet) Mend(addr raft.ServerAddress) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.cut, addr)
}

// SetLoss makes every link as lossy as l (the zero Loss: none).
func (n *RaftNet) SetLoss(l Loss) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.loss = l
}

// Heal reconnects every server and ends every loss.
func (n *RaftNet) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.cut)
	n.loss = Loss{}
}

// Healed reports whether every link is up and lossless.
func (n *RaftNet) Healed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.cut) == 0 && n.loss == Loss{}
}

// verdict is what the network does with one call.
type verdict struct {
	err          error         // refuse the call before sending
	delay        time.Duration // wait before sending
	dropResponse bool          // send, then report the call failed
}

func (n *RaftNet) judge(from, to raft.ServerAddress) verdict {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cut[from] || n.cut[to] {
		return verdict{err: fmt.Errorf("%s → %s: %w", from, to, ErrPartitioned)}
	}
	var v verdict
	if n.loss.Delay > 0 {
		v.delay = time.Duration(n.rand.Int64N(int64(n.loss.Delay)))
	}
	switch {
	case n.loss.DropRequest > 0 && n.rand.Float64() < n.loss.DropRequest:
		v.err = fmt.Errorf("%s → %s: request: %w", from, to, ErrDropped)
	case n.loss.DropResponse > 0 && n.rand.Float64() < n.loss.DropResponse:
		v.dropResponse = true
	}
	return v
}

// send runs call over the link from → to as the network decides.
func (n *RaftNet) send(from, to raft.ServerAddress, call func() error) error {
	v := n.judge(from, to)
	if v.delay > 0 {
		// Network latency being simulated, not a wait for a condition.
		n.sleep(v.delay)
	}
	if v.err != nil {
		return v.err
	}
	err := call()
	if err == nil && v.dropResponse {
		return fmt.Errorf("%s → %s: response: %w", from, to, ErrDropped)
	}
	// A link cut while the call was in flight loses its answer.
	if err == nil {
		if after := n.judgeCut(from, to); after != nil {
			return after
		}
	}
	return err
}

func (n *RaftNet) judgeCut(from, to raft.ServerAddress) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cut[from] || n.cut[to] {
		return fmt.Errorf("%s → %s: response: %w", from, to, ErrPartitioned)
	}
	return nil
}

// Wrap wraps one server's Raft transport; it is the value of
// nomad.Config.RaftTransportWrap.
func (n *RaftNet) Wrap(inner raft.Transport) raft.Transport {
	return &netTransport{Transport: inner, net: n}
}

// netTransport is one server's Raft transport on a RaftNet. It implements
// raft.WithPreVote and raft.WithClose by passing them on.
type netTransport struct {
	raft.Transport
	net *RaftNet
}

func (t *netTransport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

func (t *netTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	return t.net.send(t.LocalAddr(), target, func() error { return t.Transport.AppendEntries(id, target, args, resp) })
}

func (t *netTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return t.net.send(t.LocalAddr(), target, func() error { return t.Transport.RequestVote(id, target, args, resp) })
}

func (t *netTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	return t.net.send(t.LocalAddr(), target, func() error { return t.Transport.InstallSnapshot(id, target, args, resp, data) })
}

func (t *netTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return t.net.send(t.LocalAddr(), target, func() error { return t.Transport.TimeoutNow(id, target, args, resp) })
}

func (t *netTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	pv, ok := t.Transport.(raft.WithPreVote)
	if !ok {
		return fmt.Errorf("sim: the wrapped raft transport %T does not support pre-vote", t.Transport)
	}
	return t.net.send(t.LocalAddr(), target, func() error { return pv.RequestPreVote(id, target, args, resp) })
}

func (t *netTransport) Close() error {
	if c, ok := t.Transport.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}
