// Package nomad is Berth's server: it keeps cluster state in go-memdb
// replicated by hashicorp/raft, serves RPC, and runs the leader's duties.
//
// One TCP port carries both RPC (net/rpc + msgpack) and Raft, told apart by
// the first byte of each connection. Followers forward writes (and reads
// that are not stale) to the leader. Every endpoint follows one skeleton:
//
//	forward → validate → raft apply (writes) or blocking query (reads) → reply metadata
//
// Errors cross RPC with a code (structs.ErrorCode), never matched by text.
//
// Where things live: endpoints in *_endpoint.go (shared halves in
// endpoint_helpers.go), Raft and membership in raft.go, the RPC transport
// in rpc.go, node sessions in node_session.go, the FSM in fsm.go. The
// leader's loops (eval broker, blocked evals, plan applier, heartbeats,
// drainer, node watcher, workers) are package nomad/leader; leader.go
// starts them for each term, beside the CSI reapers (csi_gc.go).
package nomad

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/rpc"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/helper/groupcommit"
	"github.com/berth-io/berth/nomad/audit"
	"github.com/berth-io/berth/nomad/auth"
	"github.com/berth-io/berth/nomad/connlimit"
	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/stream"
	"github.com/berth-io/berth/nomad/structs"
)

// Server is one Berth server.
type Server struct {
	config *Config
	logger hclog.Logger

	fsm       *FSM
	events    *stream.Broker
	raft      *raft.Raft
	raftLayer *raftLayer
	raftTrans *raft.NetworkTransport
	// raftStore is closed on shutdown (the WAL or the in-memory store).
	raftStoreClose func() error
	// claimWrites group-commits concurrent claim writes (writeClaims).
	claimWrites *groupcommit.Batcher[[]*structs.CSIVolumeClaimUpdate]
	// allocUpdates group-commits concurrent Node.UpdateAlloc writes.
	allocUpdates *groupcommit.Batcher[*structs.AllocUpdateRequest]

	rpcListener net.Listener
	rpcServer   *rpc.Server
	rpcAdvert   string
	pool        *ConnPool

	// connLimit caps open connections per source IP.
	connLimit *connlimit.Limiter

	// connsLock guards conns, the open inbound RPC connections, and
	// connsClosed: once Shutdown has closed them, a connection that
	// finishes its handshake later is closed at once, or Shutdown would
	// wait for it forever.
	connsLock   sync.Mutex
	conns       map[net.Conn]struct{}
	connsClosed bool

	// sessions are the clients' node sessions, held while leader.
	sessions nodeSessions
	// csiControllers calls CSI controller plugins through node sessions.
	csiControllers *csiControllers
	// volumeStats holds the clients' latest volume usage samples (see
	// CSIVolume.ReportStats); only the leader's are read.
	volumeStats volumeStatsStore

	// resolver turns request secrets into identities; audit records
	// writes (see acl_endpoint.go).
	resolver *auth.Resolver
	audit    *serverAudit

	// leaderNotify receives Raft's leadership changes.
	leaderNotify <-chan bool

	// leaderLock guards leaderCancel, the context of the current term's
	// leader duties (nil when not leader).
	leaderLock   sync.Mutex
	leaderCancel context.CancelFunc
	leaderWG     sync.WaitGroup

	// sched is the current term's scheduling machinery (eval broker,
	// blocked evals, plan queue, heartbeat deadlines); nil when not
	// running leader duties. See leader.go.
	sched atomic.Pointer[scheduling]

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	shutdownOnce sync.Once
}

// NewServer starts a server: listener, Raft, RPC endpoints, and the join
// loop that bootstraps the cluster once BootstrapExpect servers know each
// other.
func NewServer(config *Config) (*Server, error) {
	if config.Logger == nil {
		config.Logger = hclog.NewNullLogger()
	}
	if !config.DevMode && config.DataDir == "" {
		return nil, errors.New("server: data_dir is required (or run with -dev for in-memory state)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		config:    config,
		logger:    config.Logger.Named("server"),
		rpcServer: rpc.NewServer(),
		pool:      NewConnPool(5 * time.Second),
		conns:     map[net.Conn]struct{}{},
		connLimit: connlimit.NewLimiter(config.RPCMaxConnsPerClient),
		ctx:       ctx,
		cancel:    cancel,
	}
	s.csiControllers = &csiControllers{s: s}
	s.claimWrites = newClaimWrites(s)
	s.allocUpdates = newAllocUpdates(s)
	s.resolver = auth.NewResolver(config.ACLEnabled)
	s.audit = &serverAudit{logger: s.logger.Named("audit")}
	if config.AuditLogPath != "" {
		l, err := audit.Open(config.AuditLogPath, config.AuditLogMaxBytes)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("server: %w", err)
		}
		s.audit.log = l
	}
	s.pool.WithTLS(s.outgoingTLS)
	if err := s.setupNodeID(); err != nil {
		cancel()
		return nil, err
	}
	fsm, err := NewFSM(config.Logger)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("server: creating fsm: %w", err)
	}
	s.fsm = fsm
	s.events = stream.NewBroker(config.EventBufferSize)
	fsm.SetEventBroker(s.events)

	ln := config.RPCListener
	if ln == nil {
		tl, err := net.ListenTCP("tcp", config.RPCAddr)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("server: listening for rpc on %s: %w", config.RPCAddr, err)
		}
		ln = tl
	}
	s.rpcListener = ln
	s.rpcAdvert = ln.Addr().String()
	if config.RPCAdvertise != nil {
		s.rpcAdvert = config.RPCAdvertise.String()
	}
	advertAddr, err := net.ResolveTCPAddr("tcp", s.rpcAdvert)
	if err != nil {
		ln.Close()
		cancel()
		return nil, fmt.Errorf("server: resolving rpc advertise address %q: %w", s.rpcAdvert, err)
	}
	s.raftLayer = newRaftLayer(advertAddr, s.outgoingTLS)

	if err := s.registerEndpoints(); err != nil {
		ln.Close()
		cancel()
		return nil, err
	}
	if err := s.setupRaft(); err != nil {
		s.Shutdown()
		return nil, err
	}
	// Accept connections only once Raft exists: every endpoint consults it.
	s.wg.Add(1)
	go s.listen(ctx)
	s.wg.Add(1)
	go s.monitorLeadership(ctx)
	if config.BootstrapExpect > 0 {
		s.wg.Add(1)
		go s.joinLoop(ctx)
	}
	s.logger.Info("server started", "id", config.NodeID, "rpc", s.rpcAdvert, "dev", config.DevMode)
	return s, nil
}

// setupNodeID gives the server a stable Raft ID across restarts.
func (s *Server) setupNodeID() error {
	if s.config.NodeID != "" {
		return nil
	}
	if s.config.DevMode {
		s.config.NodeID = helper.UUID()
		return nil
	}
	dir := filepath.Join(s.config.DataDir, "server")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("server: creating %s: %w", dir, err)
	}
	path := filepath.Join(dir, "node-id")
	if b, err := os.ReadFile(path); err == nil {
		id := strings.TrimSpace(string(b))
		if id == "" {
			return fmt.Errorf("server: %s is empty; remove it to make a new server ID", path)
		}
		s.config.NodeID = id
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("server: reading %s: %w", path, err)
	}
	id := helper.UUID()
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return fmt.Errorf("server: writing %s: %w", path, err)
	}
	s.config.NodeID = id
	return nil
}

// RPCAddr is the address the server advertises for RPC and Raft.
func (s *Server) RPCAddr() string { return s.rpcAdvert }

// ID is the server's Raft ID.
func (s *Server) ID() string { return s.config.NodeID }

// State returns the current state store. Callers must not mutate what it
// returns.
func (s *Server) State() *state.StateStore { return s.fsm.State() }

// Events is the server's event stream broker (GET /v1/event/stream).
func (s *Server) Events() *stream.Broker { return s.events }

// Halted returns a channel closed when the FSM halts on an entry it
// cannot apply (FSM.Apply says why), and the reason once it has. The
// agent stops on it: a server that applies no more entries must not
// serve reads or lead.
func (s *Server) Halted() (<-chan struct{}, error) {
	ch, h := s.fsm.Halted()
	if h == nil {
		return ch, nil
	}
	return ch, h
}

// Raft exposes the Raft instance for operator tooling and tests.
func (s *Server) Raft() *raft.Raft { return s.raft }

// Applied is how many Raft entries of type t this server's FSM applied
// since it started (berth-nodesim breaks its entry counts down by it).
func (s *Server) Applied(t structs.MessageType) uint64 { return s.fsm.Applied(t) }

// IsLeader reports whether this server is the Raft leader.
func (s *Server) IsLeader() bool { return s.raft.State() == raft.Leader }

// Leader returns the leader's RPC address, or "" when there is none.
func (s *Server) Leader() string {
	addr, _ := s.raft.LeaderWithID()
	return string(addr)
}

// Shutdown stops the server. It is safe to call more than once.
func (s *Server) Shutdown() error {
	var err error
	s.shutdownOnce.Do(func() {
		s.logger.Info("shutting down server")
		s.cancel()
		s.revokeLeadership()
		if s.raft != nil {
			if e := s.raft.Shutdown().Error(); e != nil {
				err = fmt.Errorf("shutting down raft: %w", e)
			}
		}
		if s.raftTrans != nil {
			s.raftTrans.Close()
		}
		s.raftLayer.Close()
		s.rpcListener.Close()
		s.closeConns()
		s.pool.Close()
		s.wg.Wait()
		s.audit.log.Close()
		if s.raftStoreClose != nil {
			if e := s.raftStoreClose(); e != nil && err == nil {
				err = fmt.Errorf("closing raft log: %w", e)
			}
		}
	})
	return err
}

// RPC serves an in-process call (the HTTP API, the -dev client) through
// the same dispatch, forwarding and errors as a remote one.
func (s *Server) RPC(method string, args, reply any) error {
	codec := &inmemCodec{method: method, args: args, reply: reply}
	if err := s.rpcServer.ServeRequest(newAuthCodec(s, codec)); err != nil {
		// A request refused while decoding (authorization) comes back
		// from ServeRequest itself, still wire-encoded.
		return structs.DecodeWireError(err)
	}
	return codec.err
}

// registerEndpoints exposes every endpoint on the RPC server.
func (s *Server) registerEndpoints() error {
	eps := s.endpoints()
	if err := checkRPCTable(eps); err != nil {
		return err
	}
	for name, ep := range eps {
		if err := s.rpcServer.RegisterName(name, ep); err != nil {
			return fmt.Errorf("server: registering rpc endpoint %s: %w", name, err)
		}
	}
	return nil
}

// endpoints lists every RPC endpoint by name.
func (s *Server) endpoints() map[string]any {
	return map[string]any{
		"Status":    &Status{srv: s},
		"Operator":  &Operator{srv: s},
		"Node":      &NodeEndpoint{srv: s},
		"Job":       &JobEndpoint{srv: s},
		"Alloc":     &AllocEndpoint{srv: s},
		"Eval":      &EvalEndpoint{srv: s},
		"CSIVolume": &CSIVolumeEndpoint{srv: s},
		"CSIPlugin": &CSIPluginEndpoint{srv: s},
		"System":    &System{srv: s},
		"ACL":       &ACL{srv: s},
	}
}
