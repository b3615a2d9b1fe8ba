// Package raftguard screens inbound Raft RPCs before hashicorp/raft sees
// them. The RPC port hands Raft connections over on one protocol byte with
// no authentication (mTLS will close that door); until then this guard
// makes sure a stranger cannot feed Raft something that would hurt it:
//
//   - an RPC from a server ID that is not in the cluster's configuration
//     (or that claims to be this server) is refused, so a single server —
//     every -dev agent — accepts no inbound Raft traffic at all;
//   - an AppendEntries carrying a command entry of a message type this
//     server does not know is refused whole, so it never reaches the log
//     and never reaches the FSM.
//
// A refused RPC gets an error reply; Raft never sees its term, so a forged
// higher term cannot make the leader step down either.
package raftguard

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/structs"
)

// Transport wraps a raft.NetworkTransport. Everything but the inbound path
// (Consumer and the heartbeat fast path) is the inner transport's.
//
// Call order: New, raft.NewRaft(..., t), Start(configuration), and Close
// (raft's shutdown calls it; a second call is harmless).
type Transport struct {
	*raft.NetworkTransport
	self   raft.ServerID
	logger hclog.Logger

	consumeCh chan raft.RPC
	doneCh    chan struct{}
	startOnce sync.Once
	closeOnce sync.Once
	wg        sync.WaitGroup

	// lock guards config and hb.
	lock   sync.Mutex
	config func() raft.Configuration
	hb     func(raft.RPC)

	limit *helper.LogLimiter

	// hbMu: the heartbeat handler runs under its read lock, and Close
	// takes the write lock, so once Close returns no heartbeat is being
	// handled or will be. Raft calls the handler from the transport's
	// connection goroutines, which outlive Raft's shutdown: a heartbeat
	// that passed Raft's own shutdown check could otherwise write the
	// term to a log store the server closed after Raft stopped, and
	// panic (the simulator hit it, restarting a leader under load).
	hbMu     sync.RWMutex
	hbClosed bool
}

// New wraps inner for the server self.
func New(inner *raft.NetworkTransport, self raft.ServerID, logger hclog.Logger) *Transport {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &Transport{
		NetworkTransport: inner,
		self:             self,
		logger:           logger.Named("raftguard"),
		consumeCh:        make(chan raft.RPC),
		doneCh:           make(chan struct{}),
		limit:            helper.NewLogLimiter(5 * time.Second),
	}
}

// Start begins passing screened RPCs to Raft. config returns Raft's latest
// configuration (raft.Raft.GetConfiguration); RPCs wait until Start so
// none is screened against a configuration not yet loaded from disk.
func (t *Transport) Start(config func() raft.Configuration) {
	t.lock.Lock()
	t.config = config
	t.lock.Unlock()
	t.startOnce.Do(func() {
		t.wg.Add(1)
		go t.run()
	})
}

// Consumer is the channel Raft reads inbound RPCs from.
func (t *Transport) Consumer() <-chan raft.RPC { return t.consumeCh }

// SetHeartbeatHandler keeps raft's heartbeat fast path, screened: a
// heartbeat carries a term too.
func (t *Transport) SetHeartbeatHandler(cb func(raft.RPC)) {
	t.lock.Lock()
	t.hb = cb
	t.lock.Unlock()
	if cb == nil {
		t.NetworkTransport.SetHeartbeatHandler(nil)
		return
	}
	t.NetworkTransport.SetHeartbeatHandler(func(rpc raft.RPC) {
		t.hbMu.RLock()
		defer t.hbMu.RUnlock()
		if t.hbClosed {
			rpc.Respond(nil, raft.ErrTransportShutdown)
			return
		}
		if err := t.Check(rpc.Command); err != nil {
			t.refuse(rpc, err)
			return
		}
		cb(rpc)
	})
}

// Close stops the guard and the inner transport.
func (t *Transport) Close() error {
	var err error
	t.closeOnce.Do(func() {
		t.hbMu.Lock()
		t.hbClosed = true
		t.hbMu.Unlock()
		err = t.NetworkTransport.Close()
		close(t.doneCh)
		t.wg.Wait()
	})
	return err
}

func (t *Transport) run() {
	defer t.wg.Done()
	in := t.NetworkTransport.Consumer()
	for {
		var rpc raft.RPC
		select {
		case rpc = <-in:
		case <-t.doneCh:
			return
		}
		if err := t.Check(rpc.Command); err != nil {
			t.refuse(rpc, err)
			continue
		}
		select {
		case t.consumeCh <- rpc:
		case <-t.doneCh:
			rpc.Respond(nil, raft.ErrTransportShutdown)
			return
		}
	}
}

func (t *Transport) refuse(rpc raft.RPC, err error) {
	if ok, held := t.limit.Allow(); ok {
		t.logger.Warn("refused inbound raft rpc", "error", err, "suppressed", held)
	}
	rpc.Respond(nil, err)
}

// Check says why Raft must not see cmd, or nil when it may.
func (t *Transport) Check(cmd any) error {
	h, ok := cmd.(raft.WithRPCHeader)
	if !ok {
		return fmt.Errorf("raft rpc %T has no header", cmd)
	}
	hdr := h.GetRPCHeader()
	t.lock.Lock()
	configFn := t.config
	t.lock.Unlock()
	var cfg raft.Configuration
	if configFn != nil {
		cfg = configFn()
	}
	if err := checkSender(t.self, cfg, hdr); err != nil {
		return err
	}
	if ae, ok := cmd.(*raft.AppendEntriesRequest); ok {
		return CheckEntries(ae.Entries)
	}
	return nil
}

// checkSender refuses a sender that is this server or, once the cluster
// has a configuration, not a member of it. A server with no configuration
// yet (being added to a cluster) must accept its first leader.
func checkSender(self raft.ServerID, cfg raft.Configuration, hdr raft.RPCHeader) error {
	id := raft.ServerID(hdr.ID)
	if id == self {
		return fmt.Errorf("raft rpc claims to come from this server (%s, addr %q): refused", id, hdr.Addr)
	}
	if len(cfg.Servers) == 0 {
		return nil
	}
	for _, s := range cfg.Servers {
		if s.ID == id {
			return nil
		}
	}
	return fmt.Errorf("raft rpc from server %q at %q: not a server in this cluster's configuration: refused", id, hdr.Addr)
}

// CheckEntries refuses a batch holding a command entry this server's FSM
// could not apply: empty, or of an unknown message type without
// structs.IgnoreUnknownTypeFlag.
func CheckEntries(entries []*raft.Log) error {
	for _, e := range entries {
		if e == nil || e.Type != raft.LogCommand {
			continue
		}
		if len(e.Data) == 0 {
			return fmt.Errorf("raft entry %d is empty: refused", e.Index)
		}
		if mt := structs.MessageType(e.Data[0]); !mt.Applicable() {
			return fmt.Errorf("raft entry %d has unknown message type %d: refused", e.Index, uint8(mt))
		}
	}
	return nil
}
