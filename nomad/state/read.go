package state

import (
	"fmt"

	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/nomad/structs"
)

// Read helpers. Each opens its own read transaction and adds to ws (which
// may be nil) the watch channel that closes on any write that could change
// the result: the radix node of the key for a get (also when the key is
// absent, so an insert wakes it), and the prefix node for a list.

func (s *StateStore) first(ws memdb.WatchSet, table, index string, args ...any) (any, error) {
	ch, raw, err := s.db.Txn(false).FirstWatch(table, index, args...)
	if err != nil {
		return nil, fmt.Errorf("reading %s by %s: %w", table, index, err)
	}
	ws.Add(ch)
	return raw, nil
}

func (s *StateStore) list(ws memdb.WatchSet, table, index string, args ...any) (memdb.ResultIterator, error) {
	iter, err := s.db.Txn(false).Get(table, index, args...)
	if err != nil {
		return nil, fmt.Errorf("listing %s by %s: %w", table, index, err)
	}
	ws.Add(iter.WatchCh())
	return iter, nil
}

// inNamespace filters an iterator down to objects in ns; AllNamespaces
// ("*") keeps everything.
func inNamespace[T any](iter memdb.ResultIterator, ns string, nsOf func(T) string) memdb.ResultIterator {
	if ns == structs.AllNamespaces {
		return iter
	}
	return memdb.NewFilterIterator(iter, func(raw any) bool {
		return nsOf(raw.(T)) != ns
	})
}

// collect drains an iterator into a slice.
func collect[T any](iter memdb.ResultIterator) []T {
	var out []T
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		out = append(out, raw.(T))
	}
	return out
}
