package sim

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/testutil"
	"github.com/berth-io/berth/testutil/cluster"
)

// netPair is two in-memory Raft transports on one RaftNet: a sends to b,
// and b's consumer answers and counts what it received.
type netPair struct {
	net      *RaftNet
	a, b     raft.Transport
	bAddr    raft.ServerAddress
	mu       sync.Mutex
	received int
}

func newNetPair(t *testing.T) *netPair {
	n := NewRaftNet(1)
	aAddr, ai := raft.NewInmemTransport("a")
	bAddr, bi := raft.NewInmemTransport("b")
	ai.Connect(bAddr, bi)
	bi.Connect(aAddr, ai)
	p := &netPair{net: n, a: n.Wrap(ai), b: n.Wrap(bi), bAddr: bAddr}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case rpc := <-p.b.Consumer():
				p.mu.Lock()
				p.received++
				p.mu.Unlock()
				rpc.Respond(&raft.AppendEntriesResponse{Success: true}, nil)
			case <-done:
				return
			}
		}
	}()
	t.Cleanup(func() { close(done); ai.Close(); bi.Close() })
	return p
}

func (p *netPair) append() error {
	return p.a.AppendEntries("b", p.bAddr, &raft.AppendEntriesRequest{}, &raft.AppendEntriesResponse{})
}

func (p *netPair) got() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.received
}

func TestRaftNet_CutAndMendALink(t *testing.T) {
	p := newNetPair(t)
	if err := p.append(); err != nil {
		t.Fatalf("append over an intact link: %v", err)
	}
	p.net.Cut(p.bAddr)
	if err := p.append(); !errors.Is(err, ErrPartitioned) {
		t.Fatalf("append to a server cut off: got %v, want ErrPartitioned", err)
	}
	if err := p.a.RequestVote("b", p.bAddr, &raft.RequestVoteRequest{}, &raft.RequestVoteResponse{}); !errors.Is(err, ErrPartitioned) {
		t.Fatalf("vote request to a server cut off: got %v, want ErrPartitioned", err)
	}
	if got := p.got(); got != 1 {
		t.Fatalf("the cut-off server received %d RPCs, want only the 1 sent before the cut", got)
	}
	if p.net.Healed() {
		t.Fatalf("Healed() with a server cut off")
	}
	p.net.Mend(p.bAddr)
	if err := p.append(); err != nil {
		t.Fatalf("append after mending: %v", err)
	}
	if got := p.got(); got != 2 {
		t.Fatalf("received %d RPCs after mending, want 2", got)
	}
}

func TestRaftNet_DropsRequestsAndResponses(t *testing.T) {
	p := newNetPair(t)
	p.net.SetLoss(Loss{DropRequest: 1})
	for range 5 {
		if err := p.append(); !errors.Is(err, ErrDropped) {
			t.Fatalf("append with every request dropped: got %v, want ErrDropped", err)
		}
	}
	if got := p.got(); got != 0 {
		t.Fatalf("%d dropped requests were delivered", got)
	}
	// A lost response: the target handled the call, the sender sees a
	// failure.
	p.net.SetLoss(Loss{DropResponse: 1})
	for range 5 {
		if err := p.append(); !errors.Is(err, ErrDropped) {
			t.Fatalf("append with every response dropped: got %v, want ErrDropped", err)
		}
	}
	if got := p.got(); got != 5 {
		t.Fatalf("%d of 5 calls whose responses were dropped were delivered, want 5", got)
	}
	p.net.Heal()
	if err := p.append(); err != nil {
		t.Fatalf("append after healing: %v", err)
	}
	if !p.net.Healed() {
		t.Fatalf("not Healed() after Heal")
	}
}

func TestRaftNet_DelaysCallsAndRefusesPipelines(t *testing.T) {
	p := newNetPair(t)
	var slept []time.Duration
	p.net.sleep = func(d time.Duration) { slept = append(slept, d) }
	p.net.SetLoss(Loss{Delay: 50 * time.Millisecond})
	for range 20 {
		if err := p.append(); err != nil {
			t.Fatalf("delayed append: %v", err)
		}
	}
	if len(slept) == 0 {
		t.Fatalf("no call was delayed")
	}
	for _, d := range slept {
		if d < 0 || d >= 50*time.Millisecond {
			t.Fatalf("a delay of %s is outside [0, 50ms)", d)
		}
	}
	if _, err := p.a.AppendEntriesPipeline("b", p.bAddr); !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
		t.Fatalf("pipeline: got %v, want ErrPipelineReplicationNotSupported (every append must pass the network)", err)
	}
	if _, ok := p.a.(raft.WithPreVote); !ok {
		t.Fatalf("the wrapper hides pre-vote")
	}
	if _, ok := p.a.(raft.WithClose); !ok {
		t.Fatalf("the wrapper hides Close")
	}
}

// TestRaftNet_LeaderCutOffIsReplacedAndRejoins runs three real servers on
// a RaftNet: the leader cut off steps down and the other two elect one of
// themselves; once mended, all three agree on a leader again.
func TestRaftNet_LeaderCutOffIsReplacedAndRejoins(t *testing.T) {
	n := NewRaftNet(1)
	servers := cluster.NewCluster(t, 3, func(_ int, c *nomad.Config) { c.RaftTransportWrap = n.Wrap })
	old := cluster.WaitForLeader(t, servers...)
	n.Cut(raft.ServerAddress(old.Addr))
	testutil.WaitForResult(t, func() (bool, error) {
		if old.IsLeader() {
			return false, fmt.Errorf("%s still leads while cut off", old.Config.NodeName)
		}
		for _, s := range servers {
			if s != old && s.IsLeader() {
				return true, nil
			}
		}
		return false, fmt.Errorf("the two connected servers elected no leader")
	})
	n.Mend(raft.ServerAddress(old.Addr))
	cluster.WaitForLeader(t, servers...)
}
