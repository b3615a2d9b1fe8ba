package nomad

import (
	"context"
	"encoding"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/berth-io/berth/nomad/msgpack"
	"github.com/berth-io/berth/nomad/raftguard"
	"github.com/berth-io/berth/nomad/raftlog"
	"github.com/berth-io/berth/nomad/structs"
)

// raftState is where Raft keeps its files under data_dir.
const raftDirName = "raft"

// setupRaft builds Raft with the WAL log store (one fsync per append) or,
// in dev mode, the in-memory store.
func (s *Server) setupRaft() error {
	rc := *s.config.RaftConfig
	rc.LocalID = raft.ServerID(s.config.NodeID)
	rc.Logger = s.config.Logger.Named("raft")
	notify := make(chan bool, 10)
	rc.NotifyCh = notify
	s.leaderNotify = notify

	s.raftTrans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  s.raftLayer,
		MaxPool: 3,
		Timeout: 10 * time.Second,
		Logger:  s.config.Logger.Named("raft-net"),
	})

	var (
		logs   raft.LogStore
		stable raft.StableStore
		snaps  raft.SnapshotStore
	)
	if s.config.DevMode {
		store := raft.NewInmemStore()
		logs, stable, snaps = store, store, raft.NewInmemSnapshotStore()
	} else {
		dir := filepath.Join(s.config.DataDir, "server", raftDirName)
		walDir := filepath.Join(dir, "wal")
		if err := os.MkdirAll(walDir, 0o700); err != nil {
			return fmt.Errorf("server: creating raft dir %s: %w", walDir, err)
		}
		// raftlog opens raft-wal after repairing what its v0.4.0 breaks on
		// a suffix truncation (the package doc says how).
		store, err := raftlog.Open(walDir, s.config.Logger.Named("raft-wal"))
		if err != nil {
			return fmt.Errorf("server: opening raft log in %s: %w", walDir, err)
		}
		s.raftStoreClose = store.Close
		wal := store.WAL
		fss, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, s.config.Logger.Named("raft-snap"))
		if err != nil {
			return fmt.Errorf("server: opening raft snapshots in %s: %w", dir, err)
		}
		logs, stable, snaps = wal, wal, fss
	}

	// The guard screens inbound Raft RPCs (raftguard's doc says why).
	guard := raftguard.New(s.raftTrans, raft.ServerID(s.config.NodeID), s.config.Logger)
	var trans raft.Transport = guard
	if s.config.RaftTransportWrap != nil {
		trans = s.config.RaftTransportWrap(guard)
	}
	r, err := raft.NewRaft(&rc, s.fsm, logs, stable, snaps, trans)
	if err != nil {
		guard.Close()
		return fmt.Errorf("server: starting raft: %w", err)
	}
	s.raft = r
	guard.Start(func() raft.Configuration { return r.GetConfiguration().Configuration() })

	if s.config.BootstrapExpect == 1 {
		if err := s.bootstrap(map[string]string{s.config.NodeID: s.rpcAdvert}); err != nil {
			return err
		}
	}
	return nil
}

// bootstrap configures Raft with the given servers (ID → address) unless
// Raft already has state: a restarted server must never re-bootstrap.
func (s *Server) bootstrap(peers map[string]string) error {
	hasState, err := s.hasExistingState()
	if err != nil {
		return err
	}
	if hasState {
		return nil
	}
	var cfg raft.Configuration
	for id, addr := range peers {
		cfg.Servers = append(cfg.Servers, raft.Server{
			ID: raft.ServerID(id), Address: raft.ServerAddress(addr), Suffrage: raft.Voter,
		})
	}
	s.logger.Info("bootstrapping cluster", "servers", len(cfg.Servers))
	if err := s.raft.BootstrapCluster(cfg).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("server: bootstrapping raft: %w", err)
	}
	return nil
}

// hasExistingState reports whether Raft has a configuration already.
func (s *Server) hasExistingState() (bool, error) {
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return false, fmt.Errorf("server: reading raft configuration: %w", err)
	}
	return len(f.Configuration().Servers) > 0, nil
}

// joinLoop dials the configured peers until BootstrapExpect servers
// (counting this one) know each other, then bootstraps once. Every server
// computes the same configuration from the same peers, so bootstrapping on
// all of them is safe.
func (s *Server) joinLoop(ctx context.Context) {
	defer s.wg.Done()
	if s.config.BootstrapExpect <= 1 {
		return
	}
	interval := s.config.ServerJoinInterval
	if interval <= 0 {
		interval = 2 * time.Second
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if has, err := s.hasExistingState(); err == nil && has {
			return
		}
		peers := map[string]string{s.config.NodeID: s.rpcAdvert}
		for _, addr := range s.config.ServerJoin {
			if addr == s.rpcAdvert {
				continue
			}
			var resp structs.PingResponse
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := s.pool.RPC(pctx, addr, "Status.Ping", &structs.GenericRequest{}, &resp)
			cancel()
			if err != nil {
				s.logger.Debug("peer not reachable yet", "addr", addr, "error", err)
				continue
			}
			peers[resp.ServerID] = resp.Addr
		}
		if len(peers) >= s.config.BootstrapExpect {
			if err := s.bootstrap(peers); err != nil {
				s.logger.Error("bootstrapping cluster", "error", err)
			} else {
				return
			}
		} else {
			s.logger.Info("waiting for peers to bootstrap", "known", len(peers), "expect", s.config.BootstrapExpect)
		}
		t.Reset(interval)
	}
}

// raftApply commits one message and returns the FSM's response and index.
// An error returned by the FSM comes back as the error.
func (s *Server) raftApply(t structs.MessageType, msg any) (any, uint64, error) {
	buf, err := encodeEntry(t, msg)
	if err != nil {
		return nil, 0, err
	}
	return s.applied(s.propose(buf))
}

// propose hands an encoded entry to Raft and returns its future. Apply
// readies Raft's leader loop, which takes the entry, into this
// goroutine's scheduling slot (the P's runnext); the wait that follows
// starts a goroutine (raftWait), which would take that slot and push the
// leader loop to the back of the run queue, behind whatever else the
// process has runnable, before it appends the entry to the WAL. The
// yield lets the leader loop run first. K=1 step trace, one agent at
// load 8–13: a Claim's write took 0.88–1.86 ms (median of 30) from the
// handoff to the WAL append's start, 0.04 ms with the yield.
func (s *Server) propose(buf []byte) raft.ApplyFuture {
	f := s.raft.Apply(buf, s.config.RaftTimeout)
	runtime.Gosched()
	return f
}

// raftApplyHandOff is raftApply for a message the FSM may store as it is
// instead of decoding the entry (handOff): the caller made every object
// in it for this write alone (none is stored, none shared with anyone
// else) and only reads it once applied. The FSM fills in what it owns
// (indexes, claims) on those very objects, so a message holding a stored
// object would change the store outside a transaction. Only the FSM
// cases that take the hand-off use it (applyCSIVolumeRegister, and
// applyPlanResults, whose store copies what it keeps).
// proposed runs once the entry is encoded, right before Raft's Apply
// (the register's step trace).
func (s *Server) raftApplyHandOff(t structs.MessageType, msg any, proposed func()) (any, uint64, error) {
	buf, err := encodeEntry(t, msg)
	if err != nil {
		return nil, 0, err
	}
	if len(buf) > 1 {
		// Taken back here if Raft never applies it on this server.
		s.fsm.decoded.put(buf[1:], msg)
		defer s.fsm.decoded.take(buf[1:])
	}
	proposed()
	return s.applied(s.propose(buf))
}

// applied waits for f (raftWait) and answers as raftApply does.
func (s *Server) applied(f raft.ApplyFuture) (any, uint64, error) {
	if err := s.raftWait(f); err != nil {
		// A server shutting down is, to its caller, one that is not the
		// leader: the call is retried against the next one.
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrRaftShutdown) {
			return nil, 0, structs.NewError(structs.CodeNoLeader, "raft apply: %v", err)
		}
		return nil, 0, fmt.Errorf("raft apply: %w", err)
	}
	if err, ok := f.Response().(error); ok {
		return nil, f.Index(), err
	}
	return f.Response(), f.Index(), nil
}

// raftWait waits for the outcome of a Raft future, or until this server
// shuts down (raft.ErrRaftShutdown then). hashicorp/raft does not answer
// every future it took when it shuts down (hashicorp/raft#498, open): an
// Apply or Barrier entry committed and queued for the FSM when Shutdown
// stops the FSM goroutine is dropped, and the future's Error() blocks
// forever. A call waiting on one held Shutdown's wait for in-flight RPCs
// forever: the simulator's seed 2793 hung 60+ min in a leader restart,
// a GetClientAllocs in waitCaughtUp's barrier. If raft dropped the future,
// the goroutine left waiting on it is all that is lost. Every wait on an
// Apply or Barrier future goes through it (raftApply, raftSubmit's applied).
func (s *Server) raftWait(f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-s.ctx.Done():
		return raft.ErrRaftShutdown
	}
}

// maxEntrySize bounds one Raft entry. Raft holds entries in memory and
// sends them to every follower; HTTP bodies are capped well below it.
const maxEntrySize = 16 << 20

// encodeEntry frames msg as a Raft entry and checks that every FSM will
// take it: a known type, a bounded size, and a body that decodes again
// (the encoder has no depth limit but the decoder does; an entry that
// fails to decode would be committed and then fail on every server). The
// decode is skipped for a message type that cannot nest too deeply
// whatever it holds (decodesSurely): it was a sixth of a 1,000-volume
// register's time on the server.
func encodeEntry(t structs.MessageType, msg any) ([]byte, error) {
	if !t.Known() {
		return nil, structs.NewError(structs.CodeInternal, "raft apply: message type %d is unknown to this server: refused", uint8(t))
	}
	buf, err := msgpack.Encode(t, msg)
	if err != nil {
		return nil, structs.NewError(structs.CodeInvalid, "raft apply: %v", err)
	}
	if len(buf) > maxEntrySize {
		return nil, structs.NewError(structs.CodeInvalid,
			"request is %d bytes encoded, over the %d byte limit of one raft entry; split it", len(buf), maxEntrySize)
	}
	if rt := reflect.TypeOf(msg); rt != nil && rt.Kind() == reflect.Pointer && !decodesSurely(rt.Elem()) && !joblessPlan(msg) {
		if err := msgpack.Decode(buf[1:], reflect.New(rt.Elem()).Interface()); err != nil {
			return nil, structs.NewError(structs.CodeInvalid, "request cannot be stored (too deeply nested?): %v", err)
		}
	}
	return buf, nil
}

// joblessPlan reports whether msg is a plan none of whose allocs carries
// a job, which then decodes surely: a job is the one part of a plan that
// can nest without limit (its task config), and the applier strips it
// from every alloc that runs the stored version (the store attaches that
// one, which passed this check when it was registered). The decode check
// was a third of encoding a plan of 2,000 placements (3.7 MB).
func joblessPlan(msg any) bool {
	req, ok := msg.(*structs.ApplyPlanResultsRequest)
	if !ok || !planDecodesSurelyWithoutJobs() {
		return false
	}
	for _, a := range req.AllocsUpdated {
		if a != nil && a.Job != nil {
			return false
		}
	}
	return true
}

// planDecodesSurelyWithoutJobs is decodesSurely of a plan's entry with
// every job nil.
var planDecodesSurelyWithoutJobs = sync.OnceValue(func() bool {
	d, ok := staticDepth(reflect.TypeFor[structs.ApplyPlanResultsRequest](), map[reflect.Type]bool{}, reflect.TypeFor[structs.Job]())
	return ok && d < maxStaticDepth
})

// maxStaticDepth bounds the nesting of a type whose entries skip the
// decode check: far below go-msgpack's decoder limit (1024 levels).
const maxStaticDepth = 64

// surelyDecodes caches decodesSurely by type.
var surelyDecodes sync.Map // reflect.Type → bool

// decodesSurely reports whether every value of t decodes again from its
// msgpack encoding: t is made only of concrete types (no interface, which
// may hold maps nested without limit), is not recursive, nests fewer than
// maxStaticDepth levels, and has no custom (un)marshaling but time.Time's.
func decodesSurely(t reflect.Type) bool {
	if v, ok := surelyDecodes.Load(t); ok {
		return v.(bool)
	}
	d, ok := staticDepth(t, map[reflect.Type]bool{}, nil)
	ok = ok && d < maxStaticDepth
	surelyDecodes.Store(t, ok)
	return ok
}

var (
	timeType      = reflect.TypeFor[time.Time]()
	binaryUnmarsh = reflect.TypeFor[encoding.BinaryUnmarshaler]()
	textUnmarsh   = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// staticDepth is how deeply values of t can nest, and false when that is
// unbounded or unknown. Every field counts, exported or not. Values of
// type absent (when not nil) are taken to be nil.
func staticDepth(t reflect.Type, visiting map[reflect.Type]bool, absent reflect.Type) (int, bool) {
	if t == timeType {
		return 1, true
	}
	if t == absent {
		return 0, true
	}
	pt := reflect.PointerTo(t)
	// go-msgpack's own hook, by name: this package does not import it.
	_, selfer := pt.MethodByName("CodecDecodeSelf")
	if selfer || pt.Implements(binaryUnmarsh) || pt.Implements(textUnmarsh) {
		return 0, false
	}
	switch t.Kind() {
	case reflect.Interface, reflect.Func, reflect.Chan, reflect.UnsafePointer:
		return 0, false
	case reflect.Pointer:
		return staticDepth(t.Elem(), visiting, absent)
	case reflect.Slice, reflect.Array:
		d, ok := staticDepth(t.Elem(), visiting, absent)
		return d + 1, ok
	case reflect.Map:
		kd, kok := staticDepth(t.Key(), visiting, absent)
		vd, vok := staticDepth(t.Elem(), visiting, absent)
		return max(kd, vd) + 1, kok && vok
	case reflect.Struct:
		if visiting[t] {
			return 0, false // recursive
		}
		visiting[t] = true
		defer delete(visiting, t)
		deepest := 0
		for i := range t.NumField() {
			d, ok := staticDepth(t.Field(i).Type, visiting, absent)
			if !ok {
				return 0, false
			}
			deepest = max(deepest, d)
		}
		return deepest + 1, true
	}
	return 0, true
}
