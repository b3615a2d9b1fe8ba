package nomad

import (
	"io"
	"net"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/berth-io/berth/helper/tlsutil"
	"github.com/berth-io/berth/nomad/claims"
)

// Config configures a Server. DefaultConfig gives production values; tests
// shorten the Raft timings (see testutil/cluster).
type Config struct {
	// NodeName names the server in logs and peer lists.
	NodeName string
	// NodeID is the server's Raft ID. Empty means: read it from
	// DataDir/server/node-id, or make one and write it there, so a server
	// keeps its identity across restarts.
	NodeID string
	// Datacenter and Region are reported to clients; one region for now.
	Datacenter string
	Region     string

	// DataDir holds Raft's log, stable store and snapshots. Required unless
	// DevMode is set.
	DataDir string
	// DevMode keeps Raft in memory: for `agent -dev` and unit tests only.
	DevMode bool

	// RPCAddr is the TCP address to listen on for RPC and Raft (one port,
	// demultiplexed by the first byte). Port 0 picks a free port.
	RPCAddr *net.TCPAddr
	// RPCListener, when set, is used instead of listening on RPCAddr. Tests
	// use it to know every server's address before any starts.
	RPCListener net.Listener
	// RPCAdvertise is the address other servers and clients use to reach
	// this one; defaults to the listener's address.
	RPCAdvertise *net.TCPAddr

	// TLS, when set, puts the RPC port under mutual TLS (tls.rpc): every
	// connection starts with a TLS handshake and presents a certificate
	// signed by the CA; Raft takes only server.<Region>.berth
	// certificates, node sessions client or server ones; this server's
	// own dials (Raft, forwarding, joining) require the peer to hold a
	// server certificate. Reloading it applies to new connections.
	TLS *tlsutil.Reloader

	// BootstrapExpect is how many servers must know each other before the
	// cluster bootstraps once. 1 bootstraps a single server immediately.
	// 0 never bootstraps (join an existing cluster by add-peer).
	BootstrapExpect int
	// ServerJoin lists peers' RPC addresses to dial until BootstrapExpect
	// servers are known.
	ServerJoin []string
	// ServerJoinInterval is how often unreachable peers are dialled again.
	ServerJoinInterval time.Duration

	// RaftConfig is passed to hashicorp/raft; LocalID is set from NodeID.
	RaftConfig *raft.Config
	// RaftTransportWrap, when set, wraps this server's Raft transport
	// before Raft starts. Tests only: the fault-schedule simulator
	// (testutil/sim) drops, delays and partitions Raft traffic through
	// it. Nil in agents.
	RaftTransportWrap func(raft.Transport) raft.Transport
	// RaftTimeout bounds one Raft apply.
	RaftTimeout time.Duration

	// ACLEnabled makes every request carry a token its policies allow
	// (agent config acl { enabled = true }).
	ACLEnabled bool
	// AuditLogPath is the audit log file; empty records nothing.
	// AuditLogMaxBytes rotates it (0: audit.DefaultMaxBytes).
	AuditLogPath     string
	AuditLogMaxBytes int64

	// EventBufferSize is how many Raft indexes' events the event stream
	// keeps for subscribers to catch up and resume from (0: the default,
	// stream.DefaultBufferSize).
	EventBufferSize int

	// JobTrackedVersions is how many versions of each job are kept (0:
	// structs.DefaultJobTrackedVersions). The leader writes it into each
	// job write's Raft entry, so followers trim as it does.
	JobTrackedVersions int

	// RPCHoldTimeout is how long a request waits for a leader to appear
	// before failing with "no cluster leader".
	RPCHoldTimeout time.Duration
	// RPCMaxConnsPerClient caps open RPC connections per source IP (0:
	// no cap); RPCIdleTimeout closes an RPC connection nothing was sent
	// on for that long. Both keep one peer from using up the server's
	// file descriptors.
	RPCMaxConnsPerClient int
	RPCIdleTimeout       time.Duration

	// NumSchedulers is how many scheduler workers the leader runs. Zero
	// runs none: evals stay pending (for tests that inspect them).
	NumSchedulers int
	// HeartbeatTTL is how often clients must heartbeat (Node.UpdateStatus
	// tells them). The leader marks a node down when HeartbeatTTL plus
	// HeartbeatGrace pass without one; a new leader gives every node that
	// long from its first pass.
	HeartbeatTTL   time.Duration
	HeartbeatGrace time.Duration
	// EvalDeliveryLimit is how many times an eval is handed to a worker
	// before it is marked failed; EvalNackDelay is the wait before a
	// failed attempt is handed out again.
	EvalDeliveryLimit int
	EvalNackDelay     time.Duration
	// FailedEvalFollowUpDelay is when the follow-up of a failed eval runs.
	FailedEvalFollowUpDelay time.Duration

	// ControllerPublisher replaces, for tests, how the claim protocol
	// reaches CSI controller plugins. Nil (the default) calls them through
	// the clients that run them, over node sessions.
	ControllerPublisher ControllerPublisher
	// CSIControllerTimeout bounds one ControllerPublish/Unpublish.
	CSIControllerTimeout time.Duration
	// CSIClaimCommitsInFlight is how many group commits of claim writes
	// may be in Raft at once (writeClaims); 0 or 1: one.
	CSIClaimCommitsInFlight int
	// CSIDisconnectDeadline is how long after a node goes down its claims
	// may be freed without fencing, for nodes that report no
	// DisconnectDeadline of their own. Zero (the default) assumes nothing.
	// A node that reports one has a client that stops its allocs using
	// CSI volumes by then once it loses the servers
	// (client.Config.DisconnectDeadline; 5m in agents by default, taken
	// back on a clean client shutdown). A node
	// that reports none has a client that promised nothing, and may still
	// run its allocs however long it is down: freeing its claims on a
	// timer could let a second writer in while the first still runs. Set
	// it only where that is acceptable.
	CSIDisconnectDeadline time.Duration
	// CSINodeDetachGrace is how long after a stopped alloc last changed
	// the servers wait for its client to unpublish its volumes by itself
	// before they ask the client to (a NodeDetach; see
	// claims.DefaultNodeDetachGrace).
	CSINodeDetachGrace time.Duration
	// CSIClaimRetryBase and CSIClaimRetryMax bound the volumewatcher's
	// capped exponential backoff between failed controller unpublishes.
	CSIClaimRetryBase time.Duration
	CSIClaimRetryMax  time.Duration
	// CSIVolumeWatcherResync is how often the volumewatcher re-queues every
	// volume with unfinished claims, whatever changed.
	CSIVolumeWatcherResync time.Duration
	// CSIClaimGCInterval is how often claim GC re-queues every volume with
	// claims in the volumewatcher.
	CSIClaimGCInterval time.Duration
	// CSIPluginGCInterval is how often plugin GC runs; it deletes plugins
	// that have had no instance for CSIPluginGCThreshold.
	CSIPluginGCInterval  time.Duration
	CSIPluginGCThreshold time.Duration
	// CSIClock is the clock of claim decisions (disconnect deadlines,
	// retry times) and plugin GC; nil means time.Now. Tests inject one.
	CSIClock func() time.Time

	Logger    hclog.Logger
	LogOutput io.Writer
}

// RaftHeartbeatTimeout is the servers' Raft heartbeat and election
// timeout (DefaultConfig); the leader lease is half of it.
const RaftHeartbeatTimeout = 400 * time.Millisecond

// DefaultConfig returns production defaults.
func DefaultConfig() *Config {
	host, _ := os.Hostname()
	rc := raft.DefaultConfig()
	rc.ShutdownOnRemove = false
	// Failover in about half a second instead of raft's 1 s defaults
	// (which made a kill -9 of the leader cost ~2.5 s): a follower stands
	// for election after raftHeartbeatTimeout to twice that without the
	// leader, and the leader steps down after raftLeaderLease without a
	// quorum. The price is that a leader starved of CPU or network for
	// that long loses leadership where 1 s would have kept it; the leader
	// heartbeats every tenth of the timeout, on its own goroutine, apart
	// from log appends and their fsync. See DESIGN.md §2.
	rc.HeartbeatTimeout = RaftHeartbeatTimeout
	rc.ElectionTimeout = RaftHeartbeatTimeout
	rc.LeaderLeaseTimeout = RaftHeartbeatTimeout / 2
	return &Config{
		NodeName:           host,
		Datacenter:         "dc1",
		Region:             "global",
		RPCAddr:            &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4647},
		BootstrapExpect:    0,
		ServerJoinInterval: 2 * time.Second,
		RaftConfig:         rc,
		RaftTimeout:        10 * time.Second,
		RPCHoldTimeout:     5 * time.Second,
		// Over the longest blocking query (5m plus 1/16 jitter).
		RPCIdleTimeout:       10 * time.Minute,
		RPCMaxConnsPerClient: 100,

		NumSchedulers:           2,
		HeartbeatTTL:            10 * time.Second,
		HeartbeatGrace:          10 * time.Second,
		EvalDeliveryLimit:       3,
		EvalNackDelay:           time.Second,
		FailedEvalFollowUpDelay: time.Minute,

		CSIControllerTimeout:   2 * time.Minute,
		CSIDisconnectDeadline:  0,
		CSINodeDetachGrace:     claims.DefaultNodeDetachGrace,
		CSIClaimRetryBase:      time.Second,
		CSIClaimRetryMax:       time.Minute,
		CSIVolumeWatcherResync: time.Minute,
		CSIClaimGCInterval:     5 * time.Minute,
		CSIPluginGCInterval:    5 * time.Minute,
		CSIPluginGCThreshold:   time.Hour,

		Logger:    hclog.NewNullLogger(),
		LogOutput: io.Discard,
	}
}
