package nomad

import (
	"context"
	"sync"
	"time"

	"github.com/berth-io/berth/nomad/leader"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/nomad/volumewatcher"
)

// monitorLeadership starts the leader's duties when this server wins an
// election and stops them when it loses leadership. Duties run under a
// context that is cancelled on revoke, and revoke waits for them, so two
// terms never overlap on one server.
func (s *Server) monitorLeadership(ctx context.Context) {
	defer s.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case isLeader := <-s.leaderNotify:
			if isLeader {
				s.establishLeadership(ctx)
			} else {
				s.revokeLeadership()
			}
		}
	}
}

// establishLeadership waits until the FSM has applied everything committed
// in earlier terms (a barrier), then starts the leader-only loops.
func (s *Server) establishLeadership(ctx context.Context) {
	s.revokeLeadership()
	if err := s.raftWait(s.raft.Barrier(s.config.RaftTimeout)); err != nil {
		s.logger.Error("leader barrier failed; duties not started", "error", err)
		return
	}
	lctx, cancel := context.WithCancel(ctx)
	duties := s.leaderDuties()
	// The duties are counted under leaderLock, before revokeLeadership can
	// see the term: a revoke (from Shutdown, say) then always waits for
	// them, and never races the WaitGroup's Add with its Wait.
	s.leaderLock.Lock()
	if ctx.Err() != nil {
		s.leaderLock.Unlock()
		cancel()
		return
	}
	s.leaderCancel = cancel
	s.leaderWG.Add(len(duties))
	s.leaderLock.Unlock()
	s.logger.Info("cluster leadership acquired")
	for _, duty := range duties {
		go func() {
			defer s.leaderWG.Done()
			duty(lctx)
		}()
	}
}

// revokeLeadership stops the leader's duties and waits for them.
func (s *Server) revokeLeadership() {
	s.leaderLock.Lock()
	cancel := s.leaderCancel
	s.leaderCancel = nil
	s.leaderLock.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	s.leaderWG.Wait()
	s.logger.Info("cluster leadership lost")
}

// leaderDuties lists the loops that run only on the leader. Each returns
// when its context is cancelled.
func (s *Server) leaderDuties() []func(context.Context) {
	return []func(context.Context){
		// Eval feeder, broker, workers, plan applier, blocked evals,
		// heartbeats, node watcher, drainer (package leader), and the CSI
		// reapers (csi_gc.go).
		s.runScheduling,
		// Node sessions: how the leader calls clients (node_session.go).
		s.runNodeSessions,
	}
}

// scheduling is one term's scheduling machinery as the server holds it:
// the leader runtime's term (package leader) and the volumewatcher, which
// endpoints reach while the term lasts (Server.sched).
type scheduling struct {
	term    *leader.Term
	volumes *volumewatcher.Watcher
}

// runScheduling is the leader duty that schedules: it runs until ctx (the
// term) ends. Nothing built here outlives the term.
func (s *Server) runScheduling(ctx context.Context) {
	c := s.config
	sc := &scheduling{
		term: leader.NewTerm(leader.Config{
			State:                   s.fsm.State,
			Raft:                    raftApplier{s},
			Logger:                  s.logger,
			NumSchedulers:           c.NumSchedulers,
			EvalDeliveryLimit:       c.EvalDeliveryLimit,
			EvalNackDelay:           c.EvalNackDelay,
			HeartbeatTTL:            c.HeartbeatTTL,
			HeartbeatGrace:          c.HeartbeatGrace,
			FailedEvalFollowUpDelay: c.FailedEvalFollowUpDelay,
			RaftTimeout:             c.RaftTimeout,
		}),
		volumes: s.newVolumeWatcher(),
	}
	s.sched.Store(sc)
	defer s.sched.CompareAndSwap(sc, nil)

	var wg sync.WaitGroup
	wg.Go(func() { sc.term.Run(ctx) })
	wg.Go(func() { s.runCSIReapers(ctx, sc) })
	wg.Wait()
}

// raftApplier is the leader runtime's Raft: the server's own apply.
type raftApplier struct{ s *Server }

func (r raftApplier) Apply(t structs.MessageType, msg any) (uint64, error) {
	if t == structs.ApplyPlanResultsRequestType && joblessPlan(msg) {
		// The leader's FSM stores the plan it proposed without decoding
		// it (2,000 placements are 3.7 MB): UpsertPlanResults copies every
		// alloc, claim and eval it stores, so nothing of the applier's is
		// kept, and a plan round-trips equal (TestHandOff_PlanRoundTripsEqual).
		_, index, err := r.s.raftApplyHandOff(t, msg, func() {})
		return index, err
	}
	_, index, err := r.s.raftApply(t, msg)
	return index, err
}

// waitForLeader waits up to RPCHoldTimeout for a leader to be known.
func (s *Server) waitForLeader(ctx context.Context) (string, error) {
	if l := s.Leader(); l != "" {
		return l, nil
	}
	deadline := time.NewTimer(s.config.RPCHoldTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-deadline.C:
			return "", ErrNoLeader
		case <-tick.C:
			if l := s.Leader(); l != "" {
				return l, nil
			}
		}
	}
}
