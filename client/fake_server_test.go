package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/berth-io/berth/nomad/structs"
)

// fakeServer plays the servers for a client: the four Node RPCs over an
// in-memory node and alloc table, with a blocking alloc query. NextErr
// injects errors per method; calls are recorded with their (bubble) time.
type fakeServer struct {
	ttl time.Duration
	// nodeIndex makes the alloc query's index the highest ModifyIndex of
	// the node's allocs, as the real server's is (it can go down on GC).
	nodeIndex bool
	// noBlock makes the alloc query answer at once, never blocking.
	noBlock bool

	// lock guards everything below.
	lock      sync.Mutex
	nodes     map[string]*structs.Node
	allocs    map[string]*structs.Allocation
	index     uint64
	changed   chan struct{} // closed and replaced on every change
	nextErr   map[string][]error
	calls     map[string][]time.Time
	updates   [][]*structs.Allocation
	registers []*structs.Node
}

func newFakeServer(ttl time.Duration) *fakeServer {
	return &fakeServer{
		ttl: ttl, nodes: map[string]*structs.Node{}, allocs: map[string]*structs.Allocation{},
		index: 1, changed: make(chan struct{}), nextErr: map[string][]error{}, calls: map[string][]time.Time{},
	}
}

var _ ContextRPCer = (*fakeServer)(nil)

func (s *fakeServer) RPC(method string, args, reply any) error {
	return s.RPCContext(context.Background(), method, args, reply)
}

func (s *fakeServer) RPCContext(ctx context.Context, method string, args, reply any) error {
	s.lock.Lock()
	s.calls[method] = append(s.calls[method], time.Now())
	if errs := s.nextErr[method]; len(errs) > 0 {
		s.nextErr[method] = errs[1:]
		s.lock.Unlock()
		return errs[0]
	}
	s.lock.Unlock()

	switch method {
	case "Node.Register":
		req, resp := args.(*structs.NodeRegisterRequest), reply.(*structs.NodeUpdateResponse)
		s.lock.Lock()
		defer s.lock.Unlock()
		n := req.Node.Copy()
		s.nodes[n.ID] = n
		s.registers = append(s.registers, n.Copy())
		resp.HeartbeatTTL = s.ttl
		return nil
	case "Node.UpdateStatus":
		req, resp := args.(*structs.NodeUpdateStatusRequest), reply.(*structs.NodeUpdateResponse)
		s.lock.Lock()
		defer s.lock.Unlock()
		n, ok := s.nodes[req.NodeID]
		if !ok {
			return structs.NotFound("node", req.NodeID)
		}
		n.Status = req.Status
		resp.HeartbeatTTL = s.ttl
		return nil
	case "Node.GetClientAllocs":
		return s.getClientAllocs(ctx, args.(*structs.NodeSpecificRequest), reply.(*structs.NodeAllocsResponse))
	case "Node.UpdateAlloc":
		req := args.(*structs.AllocUpdateRequest)
		s.lock.Lock()
		defer s.lock.Unlock()
		var batch []*structs.Allocation
		for _, u := range req.Alloc {
			batch = append(batch, u.Copy())
			if a, ok := s.allocs[u.ID]; ok {
				a = a.Copy()
				a.ClientStatus, a.ClientDescription, a.TasksExited = u.ClientStatus, u.ClientDescription, u.TasksExited
				a.TaskStates = u.Copy().TaskStates
				a.ModifyIndex = s.index + 1
				s.allocs[u.ID] = a
			}
		}
		s.updates = append(s.updates, batch)
		s.bumpLocked()
		return nil
	}
	return fmt.Errorf("fake server: unknown method %s", method)
}

func (s *fakeServer) getClientAllocs(ctx context.Context, req *structs.NodeSpecificRequest, resp *structs.NodeAllocsResponse) error {
	timer := time.NewTimer(req.MaxQueryTime)
	defer timer.Stop()
	for {
		s.lock.Lock()
		if _, ok := s.nodes[req.NodeID]; !ok {
			s.lock.Unlock()
			return structs.NotFound("node", req.NodeID)
		}
		idx := s.queryIndexLocked(req.NodeID)
		if idx > req.MinQueryIndex || s.noBlock {
			resp.Index = idx
			resp.Allocs = nil
			for _, a := range s.allocs {
				if a.NodeID == req.NodeID {
					resp.Allocs = append(resp.Allocs, a.Copy())
				}
			}
			s.lock.Unlock()
			return nil
		}
		ch := s.changed
		s.lock.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			s.lock.Lock()
			resp.Index = s.queryIndexLocked(req.NodeID)
			resp.Allocs = nil
			for _, a := range s.allocs {
				if a.NodeID == req.NodeID {
					resp.Allocs = append(resp.Allocs, a.Copy())
				}
			}
			s.lock.Unlock()
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *fakeServer) queryIndexLocked(nodeID string) uint64 {
	if !s.nodeIndex {
		return s.index
	}
	var idx uint64
	for _, a := range s.allocs {
		if a.NodeID == nodeID {
			idx = max(idx, a.ModifyIndex)
		}
	}
	return max(idx, 1)
}

func (s *fakeServer) bumpLocked() {
	s.index++
	close(s.changed)
	s.changed = make(chan struct{})
}

// placeAlloc adds or replaces an alloc, as a plan apply would.
func (s *fakeServer) placeAlloc(a *structs.Allocation) {
	s.lock.Lock()
	defer s.lock.Unlock()
	a = a.Copy()
	a.AllocModifyIndex = s.index + 1
	a.ModifyIndex = s.index + 1
	s.allocs[a.ID] = a
	s.bumpLocked()
}

func (s *fakeServer) stopAlloc(id string) {
	s.lock.Lock()
	defer s.lock.Unlock()
	a := s.allocs[id].Copy()
	a.DesiredStatus = structs.AllocDesiredStatusStop
	a.DesiredDescription = "alloc stopped by the test"
	a.AllocModifyIndex = s.index + 1
	a.ModifyIndex = s.index + 1
	s.allocs[id] = a
	s.bumpLocked()
}

func (s *fakeServer) gcAlloc(id string) {
	s.lock.Lock()
	defer s.lock.Unlock()
	delete(s.allocs, id)
	s.bumpLocked()
}

func (s *fakeServer) forgetNode(id string) {
	s.lock.Lock()
	defer s.lock.Unlock()
	delete(s.nodes, id)
}

func (s *fakeServer) failNext(method string, errs ...error) {
	s.lock.Lock()
	defer s.lock.Unlock()
	s.nextErr[method] = append(s.nextErr[method], errs...)
}

func (s *fakeServer) callTimes(method string) []time.Time {
	s.lock.Lock()
	defer s.lock.Unlock()
	return append([]time.Time(nil), s.calls[method]...)
}

func (s *fakeServer) alloc(id string) *structs.Allocation {
	s.lock.Lock()
	defer s.lock.Unlock()
	return s.allocs[id].Copy()
}

func (s *fakeServer) updateBatches() [][]*structs.Allocation {
	s.lock.Lock()
	defer s.lock.Unlock()
	return append([][]*structs.Allocation(nil), s.updates...)
}

// statuses lists the distinct client statuses the server received for an
// alloc, in order.
func (s *fakeServer) statuses(id string) []string {
	var out []string
	for _, b := range s.updateBatches() {
		for _, a := range b {
			if a.ID == id && (len(out) == 0 || out[len(out)-1] != a.ClientStatus) {
				out = append(out, a.ClientStatus)
			}
		}
	}
	return out
}

func (s *fakeServer) lastRegistered() *structs.Node {
	s.lock.Lock()
	defer s.lock.Unlock()
	if len(s.registers) == 0 {
		return nil
	}
	return s.registers[len(s.registers)-1].Copy()
}

// placeAllocs adds allocs in one change, as one plan apply placing them
// all would: the client's next alloc query sees every one.
func (s *fakeServer) placeAllocs(allocs ...*structs.Allocation) {
	s.lock.Lock()
	defer s.lock.Unlock()
	for _, a := range allocs {
		a = a.Copy()
		a.AllocModifyIndex = s.index + 1
		a.ModifyIndex = s.index + 1
		s.allocs[a.ID] = a
	}
	s.bumpLocked()
}

// stopAllocs stops allocs in one change.
func (s *fakeServer) stopAllocs(ids ...string) {
	s.lock.Lock()
	defer s.lock.Unlock()
	for _, id := range ids {
		a := s.allocs[id].Copy()
		a.DesiredStatus = structs.AllocDesiredStatusStop
		a.AllocModifyIndex = s.index + 1
		a.ModifyIndex = s.index + 1
		s.allocs[id] = a
	}
	s.bumpLocked()
}
