// Package leader is the server's leader runtime: the loops that run only
// on the Raft leader, one set per leadership term, and the queues between
// them (eval broker, blocked evals, plan queue, heartbeat deadlines).
//
// It sees the server only through Config: a function returning the state
// store, a Raft applier, and tunables. It never imports package nomad, so
// the loops can be read, and tested, without the RPC server around them.
// Everything a term holds in memory is rebuilt from Raft by the next one.
package leader

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// Raft commits leader writes. Apply proposes one entry of type t and waits
// for the FSM: it returns the entry's index, or the FSM's error for it
// (typed with structs.ErrorCode; CodeNoLeader when leadership was lost).
// Safe for concurrent use.
type Raft interface {
	Apply(t structs.MessageType, msg any) (uint64, error)
}

// Config is what a term needs from the server.
type Config struct {
	// State returns the current state store (it changes on snapshot
	// restore, so loops call it on every pass).
	State func() *state.StateStore
	// Raft commits the loops' decisions.
	Raft   Raft
	Logger hclog.Logger

	// NumSchedulers is how many scheduler workers run; zero runs none.
	NumSchedulers int
	// EvalDeliveryLimit and EvalNackDelay: see evalBroker.
	EvalDeliveryLimit int
	EvalNackDelay     time.Duration
	// HeartbeatTTL and HeartbeatGrace: see heartbeats.
	HeartbeatTTL   time.Duration
	HeartbeatGrace time.Duration
	// FailedEvalFollowUpDelay is when the follow-up of a failed eval runs.
	FailedEvalFollowUpDelay time.Duration
	// RaftTimeout bounds how long a worker waits for the FSM to reach the
	// index of an eval or plan result.
	RaftTimeout time.Duration
}

// server is the term's view of the server: its Config, with the helpers
// every loop uses.
type server struct {
	config Config
	logger hclog.Logger

	// nodesRead counts the nodes the node watcher has read, for tests
	// that it reads only what changed.
	nodesRead atomic.Uint64
}

func (s *server) raftApply(t structs.MessageType, msg any) (uint64, error) {
	return s.config.Raft.Apply(t, msg)
}

// Term is one leadership term's scheduling machinery. Run runs every
// loop below under the term's context, waits for all of them, and drops
// the broker: nothing survives a term but what is in Raft.
//
//	evals table ──► feedEvals ──► broker ──► workers ──► plan applier ──► Raft
//	                    │                       │
//	                    └──► blocked evals ◄────┘ (hints)
//	                              ▲ capacity signals
//	          watchCapacity (allocs, volumes, plugins), watchNodes (nodes)
//
//	watchNodes ──► heartbeat deadlines ──► runHeartbeats ──► node down + evals
//	runDrainer ──► drain evals, drain completion
//	reapFailedEvals ──► evals over the delivery limit marked failed
//
// The server runs its own term-scoped duties (the CSI reapers) beside it.
type Term struct {
	srv        *server
	broker     *evalBroker
	blocked    *blockedEvals
	plans      *planQueue
	heartbeats *heartbeats

	// startCapacity and startNodes are what the watchers compare their
	// first pass with, read by Run before any loop starts (nil when that
	// read failed: the watchers then take their first pass as the start).
	startCapacity *capacityView
	startNodes    map[string]*structs.Node
}

// NewTerm makes a term's machinery; nothing runs until Run.
func NewTerm(c Config) *Term {
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	return &Term{
		srv:        &server{config: c, logger: c.Logger},
		broker:     newEvalBroker(c.EvalDeliveryLimit, c.EvalNackDelay, nil),
		blocked:    newBlockedEvals(),
		plans:      newPlanQueue(),
		heartbeats: newHeartbeats(c.HeartbeatTTL, c.HeartbeatGrace, nil),
	}
}

// Run runs the term's loops until ctx (the term) ends, and waits for them.
func (sc *Term) Run(ctx context.Context) {
	s := sc.srv
	loops := []func(context.Context, *Term){
		s.feedEvals, s.applyPlans, s.unblockEvals, s.watchCapacity,
		s.watchNodes, s.runHeartbeats, s.runDrainer, s.reapFailedEvals,
	}
	sc.readStart()
	var wg sync.WaitGroup
	wg.Go(func() { sc.broker.Run(ctx) })
	for _, loop := range loops {
		wg.Go(func() { loop(ctx, sc) })
	}
	for i := range s.config.NumSchedulers {
		wg.Go(func() { s.runWorker(ctx, sc, i) })
	}
	wg.Wait()
	sc.broker.flush()
}

// readStart reads the state the watchers start from, before any worker
// can plan (see watchCapacity and watchNodes).
func (sc *Term) readStart() {
	store := sc.srv.config.State()
	var err error
	if sc.startCapacity, _, err = readCapacity(store, nil); err != nil {
		sc.srv.logger.Warn("reading capacity at term start failed; the first pass stands in", "error", err)
	}
	snap, err := store.Snapshot()
	if err == nil {
		sc.startNodes, err = readNodes(snap)
	}
	if err != nil {
		sc.srv.logger.Warn("reading nodes at term start failed; the first pass stands in", "error", err)
	}
}

// Heartbeat records a heartbeat of nodeID: its deadline moves to now +
// TTL + grace.
func (sc *Term) Heartbeat(nodeID string) { sc.heartbeats.reset(nodeID) }

// ForgetNode drops nodeID's heartbeat deadline (the node is down or gone).
func (sc *Term) ForgetNode(nodeID string) { sc.heartbeats.untrack(nodeID) }

// HeartbeatDeadline returns nodeID's heartbeat deadline, if it has one.
func (sc *Term) HeartbeatDeadline(nodeID string) (time.Time, bool) {
	return sc.heartbeats.deadline(nodeID)
}
