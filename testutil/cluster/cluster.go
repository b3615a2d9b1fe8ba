// Package cluster starts in-process Berth servers and clusters for tests:
// listeners on 127.0.0.1:0, shortened Raft timings, cleanup via t.Cleanup.
package cluster

import (
	"fmt"
	"net"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/testutil"
)

// TestConfig returns a server config with fast Raft timings and a logger
// that writes through t.Log at the level given by BERTH_TEST_LOG (default
// off).
func TestConfig(t testing.TB, name string) *nomad.Config {
	c := nomad.DefaultConfig()
	c.NodeName = name
	c.DevMode = true
	c.RPCAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 0}
	rc := raft.DefaultConfig()
	rc.HeartbeatTimeout = 100 * time.Millisecond
	rc.ElectionTimeout = 100 * time.Millisecond
	rc.LeaderLeaseTimeout = 50 * time.Millisecond
	rc.CommitTimeout = 5 * time.Millisecond
	rc.ShutdownOnRemove = false
	c.RaftConfig = rc
	c.ServerJoinInterval = 50 * time.Millisecond
	c.RPCHoldTimeout = 5 * time.Second
	c.Logger = testLogger(t, name)
	return c
}

// Server is one in-process server with what a test needs to restart it.
type Server struct {
	*nomad.Server
	Config *nomad.Config
	Addr   string
}

// NewServer starts a single server that bootstraps itself.
func NewServer(t testing.TB, cb func(c *nomad.Config)) *Server {
	t.Helper()
	c := TestConfig(t, "server-0")
	c.BootstrapExpect = 1
	if cb != nil {
		cb(c)
	}
	s := start(t, c)
	WaitForLeader(t, s)
	return s
}

// NewCluster starts n servers that find each other through server_join
// with bootstrap_expect = n. cb may adjust each server's config (e.g. set
// a DataDir to put Raft on disk).
func NewCluster(t testing.TB, n int, cb func(i int, c *nomad.Config)) []*Server {
	t.Helper()
	lns := make([]net.Listener, n)
	addrs := make([]string, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listening: %v", err)
		}
		lns[i] = ln
		addrs[i] = ln.Addr().String()
	}
	servers := make([]*Server, n)
	for i := range n {
		c := TestConfig(t, fmt.Sprintf("server-%d", i))
		clusterTimings(c)
		c.BootstrapExpect = n
		c.ServerJoin = addrs
		c.RPCListener = lns[i]
		if cb != nil {
			cb(i, c)
		}
		servers[i] = start(t, c)
	}
	WaitForLeader(t, servers...)
	return servers
}

// clusterTimings slows TestConfig's Raft timings for servers with peers.
// A lone server cannot lose its leadership, so it keeps the fastest
// timings (its one election is every single-server test's start-up). With
// peers, a leader steps down when it has not heard from a quorum within
// LeaderLeaseTimeout, and on a loaded 2-core CI machine under -race a
// 50ms lease ran out between a test's calls: leadership moved right after
// WaitForLeader, under a test that had just found the leader (1 run in 16
// of a failover test with two busy loops beside it). Still below the
// product's nomad.RaftHeartbeatTimeout.
func clusterTimings(c *nomad.Config) {
	c.RaftConfig.HeartbeatTimeout = clusterHeartbeatTimeout
	c.RaftConfig.ElectionTimeout = clusterHeartbeatTimeout
	c.RaftConfig.LeaderLeaseTimeout = clusterHeartbeatTimeout / 2
}

const clusterHeartbeatTimeout = 250 * time.Millisecond

func start(t testing.TB, c *nomad.Config) *Server {
	t.Helper()
	s, err := nomad.NewServer(c)
	if err != nil {
		t.Fatalf("starting server %s: %v", c.NodeName, err)
	}
	srv := &Server{Server: s, Config: c, Addr: s.RPCAddr()}
	t.Cleanup(func() {
		if err := srv.shutdownWithin(shutdownBound); err != nil {
			t.Error(err)
		}
	})
	return srv
}

// shutdownBound is how long a test waits for a server to shut down (it
// takes milliseconds) before it reports the server instead of hanging on
// it. A call the server waits for that never ends held a simulator run
// for an hour (seed 2793).
const shutdownBound = 2 * time.Minute

// shutdownWithin shuts s down and waits up to d for it. A server still
// shutting down then is an error with every goroutine's stack; its
// Shutdown is left running.
func (s *Server) shutdownWithin(d time.Duration) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Shutdown()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		var b strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
		return fmt.Errorf("server %s did not shut down within %s; goroutines:\n%s", s.Config.NodeName, d, b.String())
	}
}

// Restart shuts s down and starts a new server with the same config, ID,
// data dir and address. The old value must not be used afterwards.
func Restart(t testing.TB, s *Server) *Server {
	t.Helper()
	if err := s.shutdownWithin(shutdownBound); err != nil {
		t.Fatalf("restarting: %v", err)
	}
	c := *s.Config
	c.RPCListener = nil
	addr, err := net.ResolveTCPAddr("tcp", s.Addr)
	if err != nil {
		t.Fatalf("resolving %s: %v", s.Addr, err)
	}
	c.RPCAddr = addr
	// A restarted member of a bootstrapped cluster must not wait to
	// bootstrap again; its Raft state says who its peers are.
	return start(t, &c)
}

// WaitForLeader waits until every running server agrees on one leader and
// returns it.
func WaitForLeader(t testing.TB, servers ...*Server) *Server {
	t.Helper()
	var leader *Server
	testutil.WaitForResult(t, func() (bool, error) {
		leader = nil
		var addr string
		for _, s := range servers {
			l := s.Leader()
			if l == "" {
				return false, fmt.Errorf("server %s knows no leader", s.Config.NodeName)
			}
			if addr != "" && l != addr {
				return false, fmt.Errorf("servers disagree on the leader: %s vs %s", addr, l)
			}
			addr = l
			if s.IsLeader() {
				leader = s
			}
		}
		if leader == nil {
			return false, fmt.Errorf("leader %s is not among the given servers", addr)
		}
		return true, nil
	})
	return leader
}

func testLogger(t testing.TB, name string) hclog.Logger {
	level := hclog.LevelFromString(getenv("BERTH_TEST_LOG", "off"))
	if level == hclog.NoLevel {
		level = hclog.Off
	}
	w := &tWriter{t: t}
	// Registered before the server's own cleanup, so it runs after it:
	// shutdown logs still reach the test, later stragglers are dropped.
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: level, Output: w})
}
