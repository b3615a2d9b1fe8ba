package nomad

import (
	"context"
	"time"

	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// ErrNoLeader is returned when no leader is known within RPCHoldTimeout.
var ErrNoLeader = structs.ErrNoLeader

// forward sends the request to the leader unless this server should answer
// it itself (it is the leader, or the read allows stale results). It
// reports whether it forwarded; if so, reply holds the leader's answer.
func (s *Server) forward(method string, info structs.RPCInfo, args, reply any) (bool, error) {
	if info.IsRead() && info.AllowStaleRead() {
		return false, nil
	}
	if s.IsLeader() {
		if err := s.waitCaughtUp(method); err != nil {
			return true, err
		}
		return false, nil
	}
	if info.IsForwarded() {
		// Forwarded to us, but we are not (or no longer) the leader: do
		// not bounce it around the cluster.
		return true, structs.NewError(structs.CodeNoLeader, "no cluster leader: %s reached a server that is not the leader", method)
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.config.RPCHoldTimeout+s.config.RaftTimeout)
	defer cancel()
	leader, err := s.waitForLeader(ctx)
	if err != nil {
		return true, err
	}
	if leader == s.rpcAdvert {
		// We just became leader while waiting.
		if err := s.waitCaughtUp(method); err != nil {
			return true, err
		}
		return false, nil
	}
	info.SetForwarded()
	return true, s.pool.RPC(ctx, leader, method, args, reply)
}

// waitCaughtUp makes a newly elected leader's requests wait until its FSM
// has applied every entry committed in earlier terms. Raft elects a leader
// before it has applied them (establishLeadership's barrier does that); a
// request served in between would see state older than writes already
// acknowledged: right after a restart of every server, a freed claim read
// back as taken. Once the leader's duties run, the barrier has passed and
// this costs a lock.
func (s *Server) waitCaughtUp(method string) error {
	s.leaderLock.Lock()
	established := s.leaderCancel != nil
	s.leaderLock.Unlock()
	if established {
		return nil
	}
	if err := s.raft.Barrier(s.config.RaftTimeout).Error(); err != nil {
		return structs.NewError(structs.CodeNoLeader, "no cluster leader: %s reached a new leader that could not catch up: %v", method, err)
	}
	return nil
}

// blockingRPC runs fn, and if the query asks to block (MinQueryIndex > 0)
// re-runs it whenever the data it watched changes, until its index passes
// MinQueryIndex or MaxQueryTime (capped, with jitter) runs out.
func (s *Server) blockingRPC(opts *structs.QueryOptions, meta *structs.QueryMeta, fn state.QueryFunc) error {
	if opts.MinQueryIndex == 0 {
		snap, err := s.fsm.State().Snapshot()
		if err != nil {
			return err
		}
		idx, err := fn(nil, snap)
		if err != nil {
			return err
		}
		meta.Index = max(idx, 1)
		s.setQueryMeta(meta)
		return nil
	}
	wait := opts.MaxQueryTime
	if wait <= 0 || wait > structs.MaxBlockingQueryTime {
		wait = structs.DefaultBlockingQueryTime
	}
	// Jitter up to 1/16 so many clients woken together do not return together.
	wait += time.Duration(time.Now().UnixNano() % int64(wait/16+1))
	ctx, cancel := context.WithTimeout(s.ctx, wait)
	defer cancel()

	min := opts.MinQueryIndex
	// BlockingQueryFunc follows the store across a snapshot restore.
	idx, err := state.BlockingQueryFunc(ctx, s.fsm.State, min, fn)
	if err != nil && (ctx.Err() == nil || s.ctx.Err() != nil) {
		return err
	}
	// Never report index 0: a client would then block on 0 and spin.
	meta.Index = max(idx, 1)
	s.setQueryMeta(meta)
	return nil
}

// setQueryMeta fills in leader knowledge for a read.
func (s *Server) setQueryMeta(m *structs.QueryMeta) {
	if s.IsLeader() {
		m.LastContact = 0
		m.KnownLeader = true
		return
	}
	m.LastContact = time.Since(s.raft.LastContact())
	m.KnownLeader = s.Leader() != ""
}
