package client

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/structs"
)

// allocSyncer sends alloc status changes to the servers in batches: the
// first change opens a window of `window`; everything queued by its end
// goes in one Node.UpdateAlloc, the newest version of each alloc only.
// Failed sends are retried with backoff, unless a newer version of the
// alloc was queued meanwhile.
type allocSyncer struct {
	c       *Client
	window  time.Duration
	backoff helper.Backoff
	logger  hclog.Logger
	kick    chan struct{}

	// sendLock serialises take-and-send, so an older batch never lands
	// after a newer one.
	sendLock sync.Mutex

	// lock guards pending.
	lock    sync.Mutex
	pending map[string]*structs.Allocation
}

func newAllocSyncer(c *Client, window time.Duration, backoff helper.Backoff) *allocSyncer {
	return &allocSyncer{
		c: c, window: window, backoff: backoff, logger: c.logger.Named("alloc_sync"),
		kick: make(chan struct{}, 1), pending: map[string]*structs.Allocation{},
	}
}

// queue takes the client's view of an alloc; it never blocks.
func (s *allocSyncer) queue(a *structs.Allocation) {
	u := &structs.Allocation{
		ID: a.ID, Namespace: a.Namespace, NodeID: a.NodeID, JobID: a.JobID, TaskGroup: a.TaskGroup,
		ClientStatus: a.ClientStatus, ClientDescription: a.ClientDescription,
		TaskStates: a.TaskStates, TasksExited: a.TasksExited, ModifyTime: time.Now().UnixNano(),
	}
	s.lock.Lock()
	s.pending[a.ID] = u
	s.lock.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *allocSyncer) requeue(batch []*structs.Allocation) {
	s.lock.Lock()
	defer s.lock.Unlock()
	for _, a := range batch {
		if _, newer := s.pending[a.ID]; !newer {
			s.pending[a.ID] = a
		}
	}
}

// run sends batches until ctx ends.
func (s *allocSyncer) run(ctx context.Context) {
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		}
		if !helper.SleepCtx(ctx, s.window) {
			return
		}
		if err := s.flush(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			d := s.backoff.Delay(failures)
			failures++
			s.logger.Warn("sending alloc updates failed; retrying", "error", err, "retry_in", d)
			if !helper.SleepCtx(ctx, d) {
				return
			}
			select {
			case s.kick <- struct{}{}:
			default:
			}
			continue
		}
		failures = 0
	}
}

// flush sends everything pending now in one call.
func (s *allocSyncer) flush(ctx context.Context) error {
	s.sendLock.Lock()
	defer s.sendLock.Unlock()
	s.lock.Lock()
	batch := slices.Collect(maps.Values(s.pending))
	clear(s.pending)
	s.lock.Unlock()
	if len(batch) == 0 {
		return nil
	}
	slices.SortFunc(batch, func(a, b *structs.Allocation) int { return strings.Compare(a.ID, b.ID) })
	var resp structs.GenericResponse
	if err := s.c.rpc(ctx, "Node.UpdateAlloc", &structs.AllocUpdateRequest{Alloc: batch}, &resp); err != nil {
		s.requeue(batch)
		return err
	}
	return nil
}
