package nomad_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil"
	"github.com/berth-io/berth/testutil/cluster"
)

func testNode(i int) *structs.Node {
	return &structs.Node{
		ID:         fmt.Sprintf("00000000-0000-4000-8000-%012d", i),
		SecretID:   fmt.Sprintf("secret-%d", i),
		Name:       fmt.Sprintf("node-%d", i),
		Datacenter: "dc1",
		Attributes: map[string]string{"kernel.name": "linux"},
	}
}

func registerNode(t *testing.T, s *cluster.Server, i int) uint64 {
	t.Helper()
	var reply structs.NodeUpdateResponse
	// A loaded machine can lose the leader mid-test; a client retries.
	rpcWhileNoLeader(t, s, "Node.Register", &structs.NodeRegisterRequest{Node: testNode(i)}, &reply)
	must.Positive(t, reply.Index)
	return reply.Index
}

// waitForNode waits until every server's state has node i.
func waitForNode(t *testing.T, i int, servers ...*cluster.Server) {
	t.Helper()
	id := testNode(i).ID
	testutil.WaitForResult(t, func() (bool, error) {
		for _, s := range servers {
			n, err := s.State().NodeByID(nil, id)
			if err != nil {
				return false, err
			}
			if n == nil {
				return false, fmt.Errorf("server %s does not have node %d yet", s.Config.NodeName, i)
			}
		}
		return true, nil
	})
}

func followers(servers []*cluster.Server, leader *cluster.Server) []*cluster.Server {
	var out []*cluster.Server
	for _, s := range servers {
		if s != leader {
			out = append(out, s)
		}
	}
	return out
}

func TestCluster_ElectsOneLeader(t *testing.T) {
	servers := cluster.NewCluster(t, 3, nil)
	leader := cluster.WaitForLeader(t, servers...)
	count := 0
	for _, s := range servers {
		if s.IsLeader() {
			count++
		}
	}
	must.Eq(t, 1, count)

	var peers structs.PeersResponse
	must.NoError(t, servers[0].RPC("Status.Peers", &structs.GenericRequest{}, &peers))
	must.SliceLen(t, 3, peers.Peers)
	must.SliceContains(t, peers.Peers, leader.Addr)
}

func TestCluster_FollowerForwardsWrites(t *testing.T) {
	servers := cluster.NewCluster(t, 3, nil)
	leader := cluster.WaitForLeader(t, servers...)
	f := followers(servers, leader)[0]

	registerNode(t, f, 1)
	waitForNode(t, 1, servers...)

	// A non-stale read on a follower is forwarded and sees the write.
	var resp structs.SingleNodeResponse
	must.NoError(t, f.RPC("Node.GetNode", &structs.NodeSpecificRequest{NodeID: testNode(1).ID}, &resp))
	must.NotNil(t, resp.Node)
	must.Eq(t, "node-1", resp.Node.Name)
	must.Eq(t, "", resp.Node.SecretID) // secrets never leave the servers
	must.True(t, resp.KnownLeader)
}

func TestCluster_LeaderFailoverKeepsCommittedWrites(t *testing.T) {
	servers := cluster.NewCluster(t, 3, nil)
	leader := cluster.WaitForLeader(t, servers...)
	for i := range 5 {
		registerNode(t, leader, i)
	}
	leader.Shutdown()
	rest := followers(servers, leader)
	newLeader := cluster.WaitForLeader(t, rest...)
	must.NotEq(t, leader.Addr, newLeader.Addr)

	for i := range 5 {
		waitForNode(t, i, rest...)
	}
	// The new leader takes writes, through either server.
	registerNode(t, followers(rest, newLeader)[0], 99)
	waitForNode(t, 99, rest...)
}

func TestServer_RestartFromDataDirRecoversState(t *testing.T) {
	dir := t.TempDir()
	s := cluster.NewServer(t, func(c *nomad.Config) {
		c.DevMode = false
		c.DataDir = dir
	})
	id := s.ID()
	for i := range 10 {
		registerNode(t, s, i)
	}
	s = cluster.Restart(t, s)
	must.Eq(t, id, s.ID()) // the server ID persists in data_dir
	cluster.WaitForLeader(t, s)
	waitForNode(t, 9, s)
	for i := range 10 {
		n, err := s.State().NodeByID(nil, testNode(i).ID)
		must.NoError(t, err)
		must.NotNil(t, n, must.Sprintf("node %d lost across restart", i))
	}
	registerNode(t, s, 10)
}

// TestServer_RestartAfterRaftTruncatedALogSuffix is the crash-loop of
// SEED=20538: a server whose Raft had cleared a log suffix (entries a new
// leader did not have) panicked on restart inside raft.NewRaft with
// raft-wal's "sealed segment has no index block" (hashicorp/raft-wal#31).
// The suffix is made here as Raft makes it, on the stopped server's log:
// one uncommitted entry appended after the last, then deleted. The server
// must come back with every entry it kept.
func TestServer_RestartAfterRaftTruncatedALogSuffix(t *testing.T) {
	dir := t.TempDir()
	s := cluster.NewServer(t, func(c *nomad.Config) {
		c.DevMode = false
		c.DataDir = dir
	})
	for i := range 10 {
		registerNode(t, s, i)
	}
	must.NoError(t, s.Shutdown())

	walDir := filepath.Join(dir, "server", "raft", "wal")
	meta := &metadb.BoltMetaDB{}
	wal, err := raftwal.Open(walDir, raftwal.WithMetaStore(meta))
	must.NoError(t, err)
	last, err := wal.LastIndex()
	must.NoError(t, err)
	var l raft.Log
	must.NoError(t, wal.GetLog(last, &l))
	must.NoError(t, wal.StoreLog(&raft.Log{Index: last + 1, Term: l.Term, Type: raft.LogNoop}))
	must.NoError(t, wal.DeleteRange(last+1, last+1))
	must.NoError(t, wal.Close())
	must.NoError(t, meta.Close())

	s = cluster.Restart(t, s)
	cluster.WaitForLeader(t, s)
	waitForNode(t, 9, s)
	for i := range 10 {
		n, err := s.State().NodeByID(nil, testNode(i).ID)
		must.NoError(t, err)
		must.NotNil(t, n, must.Sprintf("node %d lost across restart", i))
	}
	registerNode(t, s, 10)
}

func TestCluster_RestartAllServersFromDisk(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	servers := cluster.NewCluster(t, 3, func(i int, c *nomad.Config) {
		c.DevMode = false
		c.DataDir = dirs[i]
	})
	leader := cluster.WaitForLeader(t, servers...)
	registerNode(t, leader, 1)
	waitForNode(t, 1, servers...)

	for _, s := range servers {
		s.Shutdown()
	}
	for i, s := range servers {
		servers[i] = cluster.Restart(t, s)
	}
	cluster.WaitForLeader(t, servers...)
	waitForNode(t, 1, servers...)
}

func TestRPC_ErrorsKeepTheirCodeAcrossTheWire(t *testing.T) {
	s := cluster.NewServer(t, nil)
	pool := nomad.NewConnPool(0)
	t.Cleanup(pool.Close)

	err := pool.RPC(context.Background(), s.Addr, "Operator.RaftRemovePeer",
		&structs.RaftPeerRequest{ID: "no-such-peer"}, &structs.GenericResponse{})
	must.Error(t, err)
	must.True(t, errors.Is(err, structs.ErrNotFound), must.Sprintf("got %T %v", err, err))
	must.StrContains(t, err.Error(), "no-such-peer")

	err = pool.RPC(context.Background(), s.Addr, "Node.Register",
		&structs.NodeRegisterRequest{Node: &structs.Node{ID: "x"}}, &structs.NodeUpdateResponse{})
	must.True(t, errors.Is(err, structs.ErrInvalid), must.Sprintf("got %T %v", err, err))
	must.StrContains(t, err.Error(), "missing datacenter")

	// In-process calls see the same codes.
	err = s.RPC("Node.Register", &structs.NodeRegisterRequest{}, &structs.NodeUpdateResponse{})
	must.True(t, errors.Is(err, structs.ErrInvalid))
}

func TestOperator_AddAndRemovePeer(t *testing.T) {
	s1 := cluster.NewServer(t, nil)
	// A second server that does not bootstrap, joined by add-peer.
	c2 := cluster.TestConfig(t, "server-1")
	c2.BootstrapExpect = 0
	s2, err := nomad.NewServer(c2)
	must.NoError(t, err)
	t.Cleanup(func() { s2.Shutdown() })

	must.NoError(t, s1.RPC("Operator.RaftAddPeer", &structs.RaftPeerRequest{Address: s2.RPCAddr()}, &structs.GenericResponse{}))
	registerNode(t, s1, 7)
	testutil.WaitForResult(t, func() (bool, error) {
		n, err := s2.State().NodeByID(nil, testNode(7).ID)
		return n != nil, err
	})

	var cfg structs.RaftConfigurationResponse
	must.NoError(t, s1.RPC("Operator.RaftGetConfiguration", &structs.GenericRequest{}, &cfg))
	must.SliceLen(t, 2, cfg.Servers)
	names := []string{cfg.Servers[0].NodeName, cfg.Servers[1].NodeName}
	must.SliceContainsAll(t, []string{"server-0", "server-1"}, names)

	must.NoError(t, s1.RPC("Operator.RaftRemovePeer", &structs.RaftPeerRequest{ID: s2.ID()}, &structs.GenericResponse{}))
	must.NoError(t, s1.RPC("Operator.RaftGetConfiguration", &structs.GenericRequest{}, &cfg))
	must.SliceLen(t, 1, cfg.Servers)
}

// The servers' Raft timings are the fast-failover ones DESIGN.md §2
// describes, and hashicorp/raft accepts them (it refuses a leader lease
// longer than the heartbeat timeout, which would make NewServer fail).
func TestDefaultConfig_RaftTimings(t *testing.T) {
	rc := nomad.DefaultConfig().RaftConfig
	rc.LocalID = "server-1"
	must.NoError(t, raft.ValidateConfig(rc))
	must.Eq(t, nomad.RaftHeartbeatTimeout, rc.HeartbeatTimeout)
	must.Eq(t, nomad.RaftHeartbeatTimeout, rc.ElectionTimeout)
	must.Eq(t, nomad.RaftHeartbeatTimeout/2, rc.LeaderLeaseTimeout)
	must.Less(t, raft.DefaultConfig().HeartbeatTimeout, rc.HeartbeatTimeout, must.Sprint("faster than raft's default"))
}
