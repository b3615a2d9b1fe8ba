package stream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
)

// DefaultBufferSize is how many batches (Raft indexes with events) the
// broker keeps when the config says nothing: enough for a reader to
// resume after a short disconnect, small because every batch only points
// at objects the store already holds.
const DefaultBufferSize = 1024

// ErrDropped is what Next returns to a subscriber that fell further
// behind than the buffer holds, or whose stream was cut by a snapshot
// restore. It resumes by subscribing again with the last index it saw.
var ErrDropped = errors.New("event subscriber dropped")

// Broker holds the newest batches in a ring and hands them to
// subscribers. Publish never blocks on a subscriber.
type Broker struct {
	mu sync.Mutex
	// ring[seq % len(ring)] is the batch with sequence number seq, for
	// seq in [next-len(ring), next) and seq >= first.
	ring  []Batch
	next  uint64 // sequence number of the next batch published
	first uint64 // the oldest sequence number still valid (after a reset)
	// wake is closed and replaced on every publish.
	wake chan struct{}
	// epoch counts resets; a subscription of an older epoch is dropped.
	epoch uint64

	subscribers atomic.Int64
	drops       atomic.Uint64
}

// NewBroker returns a broker keeping size batches (DefaultBufferSize when
// size <= 0).
func NewBroker(size int) *Broker {
	if size <= 0 {
		size = DefaultBufferSize
	}
	return &Broker{ring: make([]Batch, size), wake: make(chan struct{})}
}

// Publish appends b (skipped when it has no events). It takes the lock
// only to store the batch and swap the wake channel.
func (br *Broker) Publish(b Batch) {
	if len(b.Events) == 0 {
		return
	}
	br.mu.Lock()
	br.ring[br.next%uint64(len(br.ring))] = b
	br.next++
	close(br.wake)
	br.wake = make(chan struct{})
	br.mu.Unlock()
}

// Reset forgets every batch and drops every subscriber: the state was
// replaced by a snapshot, so what came before does not lead to what comes
// next.
func (br *Broker) Reset() {
	br.mu.Lock()
	clear(br.ring)
	br.first = br.next
	br.epoch++
	close(br.wake)
	br.wake = make(chan struct{})
	br.mu.Unlock()
}

// Subscribers is how many subscriptions are open now.
func (br *Broker) Subscribers() int64 { return br.subscribers.Load() }

// Drops is how many subscribers were dropped for falling behind.
func (br *Broker) Drops() uint64 { return br.drops.Load() }

// Request says what a subscriber wants.
type Request struct {
	// Topics maps a topic (or TopicAll) to the keys wanted in it; an
	// empty list or "*" among them means every key. A key matches an
	// event's Key or one of its FilterKeys. Empty: every topic.
	Topics map[string][]string
	// Namespace filters namespaced events; "*" or empty with AllNamespaces
	// means all. Events without a namespace (Node, CSIPlugin) always pass.
	Namespace string
	// Index: start after the batch at this Raft index; 0 starts with the
	// next batch published.
	Index uint64
}

// ValidateTopics checks the topic names of a request, naming the unknown
// one and the known ones.
func ValidateTopics(topics map[string][]string) error {
	for t := range topics {
		if t == TopicAll {
			continue
		}
		known := false
		for _, k := range Topics {
			known = known || k == t
		}
		if !known {
			return fmt.Errorf("unknown event topic %q: want one of %s or *", t, strings.Join(Topics, ", "))
		}
	}
	return nil
}

// Subscription reads batches in order. It is not safe for concurrent use.
type Subscription struct {
	br     *Broker
	req    Request
	seq    uint64
	epoch  uint64
	closed bool
}

// Subscribe starts a subscription. Close it when done.
func (br *Broker) Subscribe(req Request) *Subscription {
	br.mu.Lock()
	defer br.mu.Unlock()
	s := &Subscription{br: br, req: req, seq: br.next, epoch: br.epoch}
	if req.Index > 0 {
		// The first kept batch after req.Index; the oldest kept when the
		// index is older than the buffer.
		for seq := br.oldestLocked(); seq < br.next; seq++ {
			if br.ring[seq%uint64(len(br.ring))].Index > req.Index {
				s.seq = seq
				break
			}
		}
	}
	br.subscribers.Add(1)
	return s
}

func (br *Broker) oldestLocked() uint64 {
	oldest := br.first
	if n := uint64(len(br.ring)); br.next > n && br.next-n > oldest {
		oldest = br.next - n
	}
	return oldest
}

// Close ends the subscription.
func (s *Subscription) Close() {
	if !s.closed {
		s.closed = true
		s.br.subscribers.Add(-1)
	}
}

// Next returns the next batch with events this subscription wants (only
// those events), waiting until one is published or ctx ends. It returns
// ErrDropped once the subscriber fell more than the buffer behind or the
// buffer was reset.
func (s *Subscription) Next(ctx context.Context) (Batch, error) {
	for {
		br := s.br
		br.mu.Lock()
		if s.epoch != br.epoch || s.seq < br.oldestLocked() {
			br.mu.Unlock()
			if s.epoch == br.epoch {
				br.drops.Add(1)
			}
			return Batch{}, ErrDropped
		}
		if s.seq < br.next {
			b := br.ring[s.seq%uint64(len(br.ring))]
			br.mu.Unlock()
			s.seq++
			if out := s.filter(b); len(out.Events) > 0 {
				return out, nil
			}
			continue
		}
		wake := br.wake
		br.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return Batch{}, ctx.Err()
		}
	}
}

func (s *Subscription) filter(b Batch) Batch {
	out := Batch{Index: b.Index}
	for _, e := range b.Events {
		if s.wants(e) {
			out.Events = append(out.Events, e)
		}
	}
	return out
}

func (s *Subscription) wants(e Event) bool {
	ns := s.req.Namespace
	if e.Namespace != "" && ns != "*" && ns != "" && e.Namespace != ns {
		return false
	}
	if len(s.req.Topics) == 0 {
		return true
	}
	return keyMatch(s.req.Topics, TopicAll, e) || keyMatch(s.req.Topics, e.Topic, e)
}

// keyMatch reports whether the keys asked for topic select e: a topic not
// asked for selects nothing, one asked with no keys selects everything.
func keyMatch(topics map[string][]string, topic string, e Event) bool {
	keys, ok := topics[topic]
	if !ok {
		return false
	}
	if len(keys) == 0 {
		return true
	}
	for _, k := range keys {
		if k == "*" || k == "" || k == e.Key {
			return true
		}
		for _, f := range e.FilterKeys {
			if k == f {
				return true
			}
		}
	}
	return false
}
