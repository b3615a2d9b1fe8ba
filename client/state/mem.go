package state

import (
	"fmt"
	"maps"
	"slices"
	"sync"
)

// NewMemDB returns an in-memory DB with the same semantics as the bbolt
// one (values are encoded, so callers never share memory with the store).
func NewMemDB() DB {
	s, err := newStore(&memBackend{root: newMemBucket()}, &memBackend{root: newMemBucket()})
	if err != nil {
		panic(fmt.Sprintf("initialising in-memory client state: %v", err)) // cannot fail in memory
	}
	return s
}

// memBackend serialises transactions with one lock. An update works on a
// deep copy that replaces the tree only on success, so a failed update
// leaves nothing behind, as in bbolt.
type memBackend struct {
	// lock guards root and closed.
	lock   sync.RWMutex
	root   *memBucket
	closed bool
}

func (m *memBackend) view(fn func(txn) error) error {
	m.lock.RLock()
	defer m.lock.RUnlock()
	if m.closed {
		return ErrClosed
	}
	return fn(memTxn{m.root})
}

func (m *memBackend) update(fn func(txn) error) error {
	m.lock.Lock()
	defer m.lock.Unlock()
	if m.closed {
		return ErrClosed
	}
	work := m.root.clone()
	if err := fn(memTxn{work}); err != nil {
		return err
	}
	m.root = work
	return nil
}

func (m *memBackend) close() error {
	m.lock.Lock()
	defer m.lock.Unlock()
	m.closed = true
	return nil
}

type memTxn struct{ root *memBucket }

func (t memTxn) bucket(name string) bucket                { return t.root.bucket(name) }
func (t memTxn) createBucket(name string) (bucket, error) { return t.root.createBucket(name) }

type memBucket struct {
	keys    map[string][]byte
	buckets map[string]*memBucket
}

func newMemBucket() *memBucket {
	return &memBucket{keys: map[string][]byte{}, buckets: map[string]*memBucket{}}
}

func (b *memBucket) clone() *memBucket {
	out := &memBucket{keys: maps.Clone(b.keys), buckets: make(map[string]*memBucket, len(b.buckets))}
	for k, nb := range b.buckets {
		out.buckets[k] = nb.clone()
	}
	return out
}

func (b *memBucket) get(key string) []byte { return b.keys[key] }

func (b *memBucket) put(key string, value []byte) error {
	if _, ok := b.buckets[key]; ok {
		return fmt.Errorf("key %q is a bucket", key)
	}
	b.keys[key] = slices.Clone(value)
	return nil
}

func (b *memBucket) del(key string) error {
	delete(b.keys, key)
	return nil
}

func (b *memBucket) bucket(name string) bucket {
	if nb, ok := b.buckets[name]; ok {
		return nb
	}
	return nil
}

func (b *memBucket) createBucket(name string) (bucket, error) {
	if nb, ok := b.buckets[name]; ok {
		return nb, nil
	}
	if _, ok := b.keys[name]; ok {
		return nil, fmt.Errorf("bucket %q is a key", name)
	}
	nb := newMemBucket()
	b.buckets[name] = nb
	return nb, nil
}

func (b *memBucket) deleteBucket(name string) error {
	delete(b.buckets, name)
	return nil
}

func (b *memBucket) forEach(fn func(string, []byte) error) error {
	for _, k := range slices.Sorted(maps.Keys(b.keys)) {
		if err := fn(k, b.keys[k]); err != nil {
			return err
		}
	}
	return nil
}

func (b *memBucket) forEachBucket(fn func(string) error) error {
	for _, k := range slices.Sorted(maps.Keys(b.buckets)) {
		if err := fn(k); err != nil {
			return err
		}
	}
	return nil
}
