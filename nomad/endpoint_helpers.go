package nomad

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-bexpr"
	"github.com/hashicorp/go-memdb"
	metrics "github.com/hashicorp/go-metrics"

	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// ErrNoLeader is returned when no leader is known within RPCHoldTimeout.
var ErrNoLeader = structs.ErrNoLeader

// forward sends the request to the leader unless this server should answer
// it itself (it is the leader, or the read allows stale results). It
// reports whether it forwarded; if so, reply holds the leader's answer.
//
// A leader that answers CodeNoLeader did not serve the call as leader:
// it lost its leadership (or had not yet caught up) after this server
// chose it, as happens right after an election. Such an answer is retried
// against the leader known then, within RPCHoldTimeout, as a caller
// waiting for a leader is held: a user's write through a follower right
// after a failover should not fail for a leadership move it cannot see.
// Callers already retry CodeNoLeader themselves, so a call retried here is
// one they would have sent again.
func (s *Server) forward(method string, info structs.RPCInfo, args, reply any) (bool, error) {
	if info.IsRead() && info.AllowStaleRead() {
		return false, nil
	}
	if s.IsLeader() {
		return s.serveHere(method, args)
	}
	if info.IsForwarded() {
		// Forwarded to us, but we are not (or no longer) the leader: do
		// not bounce it around the cluster.
		return true, structs.NewError(structs.CodeNoLeader, "no cluster leader: %s reached a server that is not the leader", method)
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.config.RPCHoldTimeout+s.config.RaftTimeout)
	defer cancel()
	return holdWhileNoLeader(ctx, s.config.RPCHoldTimeout, func() (bool, error) {
		leader, err := s.waitForLeader(ctx)
		if err != nil {
			return true, err
		}
		if leader == s.rpcAdvert {
			// We became leader while waiting.
			return s.serveHere(method, args)
		}
		info.SetForwarded()
		return true, forwardError(method, leader, s.pool.RPC(ctx, leader, method, args, reply))
	})
}

// holdWhileNoLeader calls try again while it answers CodeNoLeader, for up
// to hold, with a short jittered pause between calls (so that the calls
// caught in one leadership move do not all come back at once). try
// reports, as forward does, whether the call was answered.
func holdWhileNoLeader(ctx context.Context, hold time.Duration, try func() (bool, error)) (bool, error) {
	deadline := time.Now().Add(hold)
	for {
		done, err := try()
		if !done || structs.CodeOf(err) != structs.CodeNoLeader || !time.Now().Before(deadline) {
			return done, err
		}
		pause := forwardRetryPause + time.Duration(rand.Int64N(int64(forwardRetryPause)))
		select {
		case <-ctx.Done():
			return done, err
		case <-time.After(pause):
		}
	}
}

// forwardRetryPause is the least wait before forward retries a call a
// leader answered with CodeNoLeader.
const forwardRetryPause = 20 * time.Millisecond

// serveHere readies this server to serve a call itself: its state caught
// up with the log, and the call authorized again if a follower's check
// was deferred to the leader (authorizeArriving) and this server became
// that leader. Like forward, it reports whether the call is answered
// (with the error) rather than left to the endpoint.
func (s *Server) serveHere(method string, args any) (bool, error) {
	if err := s.waitCaughtUp(method); err != nil {
		return true, err
	}
	if err := s.authorizeDeferred(method, args); err != nil {
		return true, err
	}
	return false, nil
}

// forwardError is the error a forwarded call answers its caller with. The
// leader's own errors keep their code. A transport failure on the way to
// the leader (its connection closed: it stepped down or restarted) carries
// no code, and would reach the caller as CodeInternal, which clients take
// as final: a client's volume claim failed its alloc when a leader changed
// under a 3-server berth-nodesim run. It is CodeNoLeader instead, which
// callers retry, as they retry a transport failure on their own
// connection (the write may or may not have happened, the same both ways).
func forwardError(method, leader string, err error) error {
	if err == nil {
		return nil
	}
	var se *structs.Error
	if errors.As(err, &se) {
		return err
	}
	return structs.NewError(structs.CodeNoLeader, "no cluster leader: forwarding %s to the leader at %s failed: %v", method, leader, err)
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
	if err := s.raftWait(s.raft.Barrier(s.config.RaftTimeout)); err != nil {
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

// Helpers shared by the read endpoints: pagination, filters, ID prefix
// lookups, and RPC latency metrics.
//
// List queries share one shape (Nomad's): ?per_page=&next_token= pages
// over a memdb iterator in index order, ?filter= is a go-bexpr expression
// evaluated over each list stub, and ?reverse=true walks backwards.
//
// A next token is the key of the first object of the next page (so a
// deleted object never breaks paging): its ID, or "<namespace>.<id>" for
// namespaced tables. Keys compare component by component, which is the
// order of memdb's compound indexes, so "a-b.x" sorts after "a.y" as the
// index does. Namespaces never contain a dot; IDs may.

// pageKey is an object's position in its index: [id] or [namespace, id].
type pageKey []string

func (k pageKey) token() string { return strings.Join(k, ".") }

// parseToken splits a next token into a key of n components.
func parseToken(token string, n int) pageKey {
	if token == "" {
		return nil
	}
	return pageKey(strings.SplitN(token, ".", n))
}

// compareKeys orders keys the way memdb orders the index they come from.
func compareKeys(a, b pageKey) int {
	return slices.Compare(a, b)
}

// nsKey is the key of an object in a namespace-and-ID indexed table.
func nsKey(ns, id string) pageKey { return pageKey{ns, id} }

// idKey is the key of an object in an ID indexed table.
func idKey(id string) pageKey { return pageKey{id} }

// newFilter compiles a ?filter= expression; nil when there is none. A bad
// expression is the caller's mistake (HTTP 400) and keeps bexpr's message,
// which says where the expression stopped parsing.
func newFilter(expr string) (*bexpr.Evaluator, error) {
	if expr == "" {
		return nil, nil
	}
	eval, err := bexpr.CreateEvaluator(expr)
	if err != nil {
		return nil, structs.NewError(structs.CodeInvalid, "invalid filter %q: %v", expr, err)
	}
	return eval, nil
}

// page is one page of a list query.
type page[S any] struct {
	Items     []S
	NextToken string
}

// paginate reads iter (objects of type T, in index order) into list stubs
// of type S, applying q's filter, next token, page size and direction.
// key gives each object's index position; stub makes its list view, which
// is what the filter sees. Items is never nil, so an empty list encodes
// as [] rather than null.
func paginate[T, S any](iter memdb.ResultIterator, q *structs.QueryOptions, key func(T) pageKey, stub func(T) S) (page[S], error) {
	out := page[S]{Items: []S{}}
	filter, err := newFilter(q.Filter)
	if err != nil {
		return out, err
	}
	var objs []T
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		objs = append(objs, raw.(T))
	}
	// memdb iterators only go forwards; lists are small enough in memory
	// (the store already holds them) that reversing a slice is cheaper
	// than a second index.
	if q.Reverse {
		slices.Reverse(objs)
	}
	var start pageKey
	for _, obj := range objs {
		k := key(obj)
		if start == nil && q.NextToken != "" {
			start = parseToken(q.NextToken, len(k))
		}
		if start != nil {
			c := compareKeys(k, start)
			if (!q.Reverse && c < 0) || (q.Reverse && c > 0) {
				continue
			}
		}
		s := stub(obj)
		if filter != nil {
			ok, err := filter.Evaluate(s)
			if err != nil {
				return out, structs.NewError(structs.CodeInvalid, "invalid filter %q: %v", q.Filter, err)
			}
			if !ok {
				continue
			}
		}
		if q.PerPage > 0 && len(out.Items) == int(q.PerPage) {
			out.NextToken = k.token()
			break
		}
		out.Items = append(out.Items, s)
	}
	return out, nil
}

// lookupExact finds one object by its exact ID, as Nomad's single-object
// GETs do: a prefix names nothing here (the CLI resolves prefixes through
// ?prefix= on the lists), so a caller that asks whether "vol" still exists
// never gets "vol-2" back. exact looks the ID up in the request's
// namespace; byPrefix iterates over the objects whose ID starts with it,
// for a request across all namespaces (?namespace=*), where only objects
// whose ID equals id count. It returns nil when nothing matches, and
// CodeInvalid naming the namespaces when the same ID exists in several.
func lookupExact[T any](kind, id string, exact func() (T, error), byPrefix func() (memdb.ResultIterator, error), idOf func(T) string) (T, error) {
	var zero T
	obj, err := exact()
	if err != nil || !isNil(obj) {
		return obj, err
	}
	iter, err := byPrefix()
	if err != nil {
		return zero, err
	}
	var (
		found   T
		matches []string
	)
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		o := raw.(T)
		if idOf(o) != id {
			continue
		}
		if len(matches) == 0 {
			found = o
		}
		matches = append(matches, idOf(o))
	}
	switch len(matches) {
	case 0:
		return zero, nil
	case 1:
		return found, nil
	}
	return zero, structs.NewError(structs.CodeInvalid,
		"%s ID %q exists in %d namespaces; name the namespace (?namespace=)", kind, id, len(matches))
}

// isNil reports whether a pointer-typed T is nil.
func isNil[T any](v T) bool {
	var zero T
	return any(v) == any(zero)
}

// measureRPC records one endpoint call's latency as the summary
// berth_rpc_request{method="Job.Register"} (milliseconds). Endpoints
// defer it first thing: measureRPC("Job.Register", time.Now()).
func measureRPC(method string, start time.Time) {
	metrics.MeasureSinceWithLabels([]string{"rpc", "request"}, start, []metrics.Label{{Name: "method", Value: method}})
}
