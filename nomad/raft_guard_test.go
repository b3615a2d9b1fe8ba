package nomad_test

import (
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/nomad/msgpack"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil"
	"github.com/berth-io/berth/testutil/cluster"
)

// forgeLayer is an attacker's raft.StreamLayer: it dials the RPC port and
// sends the Raft protocol byte, as a server's own would, and accepts
// nothing.
type forgeLayer struct {
	once sync.Once
	done chan struct{}
}

func (l *forgeLayer) Accept() (net.Conn, error) { <-l.done; return nil, net.ErrClosed }
func (l *forgeLayer) Close() error              { l.once.Do(func() { close(l.done) }); return nil }
func (l *forgeLayer) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (l *forgeLayer) Dial(a raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", string(a), timeout)
	if err != nil {
		return nil, err
	}
	if _, err := c.Write([]byte{0x02}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// forgeAppendEntries sends one AppendEntries to target as sender, with a
// far higher term, entries right after target's last log entry and a
// commit index that commits them: what the attacker sent.
func forgeAppendEntries(t *testing.T, target *cluster.Server, sender string, data []byte) error {
	t.Helper()
	trans := raft.NewNetworkTransport(&forgeLayer{done: make(chan struct{})}, 1, 5*time.Second, io.Discard)
	defer trans.Close()
	stats := target.Raft().Stats()
	lastTerm, err := strconv.ParseUint(stats["last_log_term"], 10, 64)
	must.NoError(t, err)
	last := target.Raft().LastIndex()
	req := &raft.AppendEntriesRequest{
		RPCHeader:         raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(sender), Addr: []byte("127.0.0.1:1")},
		Term:              lastTerm + 1000,
		PrevLogEntry:      last,
		PrevLogTerm:       lastTerm,
		Entries:           []*raft.Log{{Index: last + 1, Term: lastTerm + 1000, Type: raft.LogCommand, Data: data}},
		LeaderCommitIndex: last + 1,
	}
	var resp raft.AppendEntriesResponse
	if err := trans.AppendEntries(raft.ServerID(sender), raft.ServerAddress(target.Addr), req, &resp); err != nil {
		return err
	}
	if !resp.Success {
		return errors.New("append entries not successful")
	}
	return nil
}

// unknownEntry is an entry of a message type no Berth defines.
var unknownEntry = []byte{77, 0x80}

// TestRaftGuard_ForgedAppendEntriesToSingleServer: the attack of issue 15
// on a TLS-less server with its Raft log on disk. The RPC is refused,
// the leader keeps its term, nothing is committed or applied, and the
// server restarts cleanly.
func TestRaftGuard_ForgedAppendEntriesToSingleServer(t *testing.T) {
	dir := t.TempDir()
	s := cluster.NewServer(t, func(c *nomad.Config) {
		c.DevMode = false
		c.DataDir = dir
	})
	registerNode(t, s, 1)
	term := s.Raft().Stats()["term"]
	last := s.Raft().LastIndex()

	for _, sender := range []string{"attacker", s.ID()} {
		err := forgeAppendEntries(t, s, sender, unknownEntry)
		must.Error(t, err)
		must.StrContains(t, err.Error(), "refused")
	}
	must.True(t, s.IsLeader())
	must.Eq(t, term, s.Raft().Stats()["term"])
	must.Eq(t, last, s.Raft().LastIndex())
	halted, _ := s.Halted()
	select {
	case <-halted:
		t.Fatal("the fsm halted on a refused entry")
	default:
	}

	s = cluster.Restart(t, s)
	cluster.WaitForLeader(t, s)
	registerNode(t, s, 2)
	_, herr := s.Halted()
	must.NoError(t, herr)
}

// TestRaftGuard_ForgedEntryFromAMemberID: an attacker who knows a real
// server's ID passes the sender check; the entry check still keeps an
// unknown type out of the log. The same request with a known type is
// accepted, which shows the refusal is the entry check's doing and not a
// malformed forgery.
func TestRaftGuard_ForgedEntryFromAMemberID(t *testing.T) {
	servers := cluster.NewCluster(t, 3, nil)
	leader := cluster.WaitForLeader(t, servers...)
	f := followers(servers, leader)[0]
	registerNode(t, leader, 1)
	waitForNode(t, 1, servers...)
	last := f.Raft().LastIndex()

	err := forgeAppendEntries(t, f, leader.ID(), unknownEntry)
	must.Error(t, err)
	must.StrContains(t, err.Error(), "unknown message type 77")
	must.Eq(t, last, f.Raft().LastIndex())
	_, herr := f.Halted()
	must.NoError(t, herr)

	known, err := msgpack.Encode(structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: testNode(9)})
	must.NoError(t, err)
	must.NoError(t, forgeAppendEntries(t, f, leader.ID(), known))
	must.Eq(t, last+1, f.Raft().LastIndex())
}

// TestFSM_HaltsOnUnknownEntryInLog: an unknown entry that is already in a
// disk server's log (written before the guard, or by a newer version)
// halts the FSM with an error naming the index and the recovery, on the
// first run and again after a restart — never a panic.
func TestFSM_HaltsOnUnknownEntryInLog(t *testing.T) {
	dir := t.TempDir()
	s := cluster.NewServer(t, func(c *nomad.Config) {
		c.DevMode = false
		c.DataDir = dir
	})
	registerNode(t, s, 1)
	// The leader's raftApply refuses unknown types; Raft's own Apply is
	// the path an older leader would have taken.
	fut := s.Raft().Apply(unknownEntry, 5*time.Second)
	must.NoError(t, fut.Error())
	idx := fut.Index()
	var he *nomad.HaltError
	must.True(t, errors.As(fut.Response().(error), &he))
	must.Eq(t, idx, he.Index)

	halted, err := s.Halted()
	<-halted
	must.ErrorAs[error](t, err, &he)
	must.StrContains(t, err.Error(), "raft entry "+strconv.FormatUint(idx, 10))
	must.StrContains(t, err.Error(), "data_dir/server/raft")

	// Later entries are not applied.
	must.NoError(t, s.Raft().Apply(mustEncode(t, structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: testNode(2)}), 5*time.Second).Error())
	n, err := s.State().NodeByID(nil, testNode(2).ID)
	must.NoError(t, err)
	must.Nil(t, n)

	s = cluster.Restart(t, s)
	testutil.WaitForResult(t, func() (bool, error) {
		_, err := s.Halted()
		return err != nil, errors.New("restarted server has not halted on the entry yet")
	})
	_, err = s.Halted()
	must.ErrorAs[error](t, err, &he)
	must.Eq(t, idx, he.Index)
}

func mustEncode(t *testing.T, mt structs.MessageType, msg any) []byte {
	t.Helper()
	b, err := msgpack.Encode(mt, msg)
	must.NoError(t, err)
	return b
}
