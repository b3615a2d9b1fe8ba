package nomad

import (
	"context"
	"sync"

	"github.com/berth-io/berth/nomad/volumewatcher"
)

// scheduling is one leadership term's scheduling machinery. The leader
// duty runScheduling builds it, runs every loop below under the term's
// context, waits for all of them, and drops it: nothing survives a term
// but what is in Raft.
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
//	runCSIReapers ──► volumewatcher (claim release), claim and plugin GC (csi_gc.go)
type scheduling struct {
	broker     *evalBroker
	blocked    *blockedEvals
	plans      *planQueue
	heartbeats *heartbeats
	volumes    *volumewatcher.Watcher
}

func newScheduling(c *Config) *scheduling {
	return &scheduling{
		broker:     newEvalBroker(c.EvalDeliveryLimit, c.EvalNackDelay, nil),
		blocked:    newBlockedEvals(),
		plans:      newPlanQueue(),
		heartbeats: newHeartbeats(c.HeartbeatTTL, c.HeartbeatGrace, nil),
	}
}

// runScheduling is the leader duty that schedules: it runs until ctx (the
// term) ends.
func (s *Server) runScheduling(ctx context.Context) {
	sc := newScheduling(s.config)
	sc.volumes = s.newVolumeWatcher()
	s.sched.Store(sc)
	defer s.sched.CompareAndSwap(sc, nil)

	loops := []func(context.Context, *scheduling){
		s.feedEvals, s.applyPlans, s.unblockEvals, s.watchCapacity,
		s.watchNodes, s.runHeartbeats, s.runDrainer, s.reapFailedEvals, s.runCSIReapers,
	}
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
