package state

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

// schemaVersion is bumped on incompatible layout changes; a client refuses
// a store written by a newer schema rather than misreading it. Version 2
// moved task handles, task states, hook data and CSI usage to the
// node-local file (version 1 kept them in state.db; opening one moves
// them, see migrateLocal). A version 1 binary refuses a version 2 file
// instead of missing its task handles and starting tasks twice.
const (
	schemaVersion = "2"
	schemaV1      = "1"
)

// Bucket and key names (see the layout in doc.go).
const (
	bucketMeta   = "meta"
	bucketNode   = "node"
	bucketAllocs = "allocs"
	bucketKV     = "kv"
	bucketTasks  = "tasks"
	bucketHooks  = "hooks"

	keyVersion  = "version"
	keyIdentity = "identity"
	keyAlloc    = "alloc"
	keyRunner   = "runner"
	keyHandle   = "handle"
	keyState    = "state"
)

// store implements DB over two backends (see doc.go, "Two files"):
// durable holds what must outlive the machine, local what only needs to
// outlive the process. Both have the same top-level layout; an alloc
// exists in local as the bucket allocs/<id> with keyAlloc set to
// localMarker, written by PutAlloc after the durable record and removed
// by DeleteAlloc after it, so per-alloc local writes refuse a deleted
// alloc without reading the other file. PutAllocLocal writes a new alloc
// to local alone, keyAlloc holding the whole alloc until PutAlloc made it
// durable. newStore repairs the two after a crash between those writes
// (writing to durable an alloc local holds whole), and after a reboot
// emptied local.
type store struct {
	durable backend
	local   backend
}

// localMarker is the value of keyAlloc in the local file.
var localMarker = []byte{1}

// localKV lists the generic buckets kept in the local file.
var localKV = map[string]bool{BucketCSIUsage: true}

func newStore(durable, local backend) (*store, error) {
	s := &store{durable: durable, local: local}
	var fromV1 bool
	err := durable.update(func(tx txn) error {
		v, err := initBuckets(tx)
		fromV1 = v == schemaV1
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := local.update(func(tx txn) error { _, err := initBuckets(tx); return err }); err != nil {
		return nil, fmt.Errorf("node-local file: %w", err)
	}
	if fromV1 {
		if err := s.migrateLocal(); err != nil {
			return nil, fmt.Errorf("moving node-local records out of a version 1 state: %w", err)
		}
	}
	if err := s.reconcileLocal(); err != nil {
		return nil, fmt.Errorf("node-local file: %w", err)
	}
	return s, nil
}

// initBuckets creates the top-level buckets and checks (or writes) the
// schema version; it returns the version found ("" for a new file).
func initBuckets(tx txn) (string, error) {
	for _, name := range []string{bucketMeta, bucketNode, bucketAllocs, bucketKV} {
		if _, err := tx.createBucket(name); err != nil {
			return "", err
		}
	}
	meta := tx.bucket(bucketMeta)
	switch v := string(meta.get(keyVersion)); v {
	case "":
		return v, meta.put(keyVersion, []byte(schemaVersion))
	case schemaV1, schemaVersion: // version 1 is upgraded by migrateLocal
		return v, nil
	default:
		return v, fmt.Errorf("client state schema version %q is not supported (want %q); was it written by a newer berth?", v, schemaVersion)
	}
}

// reconcileLocal makes the local file's alloc markers match the durable
// allocs: a marker for each (missing after a reboot, or after a crash
// between PutAlloc's two writes), none for an alloc that is gone (a crash
// between DeleteAlloc's two writes left its local records). An alloc that
// local holds whole and durable lacks (a crash between PutAllocLocal and
// PutAlloc) is written to durable first: the process that died may have
// claimed its volumes already, and only a client that knows the alloc
// releases them.
func (s *store) reconcileLocal() error {
	ids := map[string]bool{}
	err := s.durable.view(func(tx txn) error {
		allocs := tx.bucket(bucketAllocs)
		return allocs.forEachBucket(func(id string) error {
			if allocs.bucket(id).get(keyAlloc) != nil {
				ids[id] = true
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	whole := map[string][]byte{}
	err = s.local.view(func(tx txn) error {
		allocs := tx.bucket(bucketAllocs)
		return allocs.forEachBucket(func(id string) error {
			raw := allocs.bucket(id).get(keyAlloc)
			if !ids[id] && raw != nil && !bytes.Equal(raw, localMarker) {
				whole[id] = bytes.Clone(raw)
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	for id, raw := range whole {
		var a structs.Allocation
		if err := decode(raw, &a); err != nil || a.ID != id {
			continue // torn or foreign: dropped with the other stale records
		}
		err := s.durable.update(func(tx txn) error {
			b, err := tx.bucket(bucketAllocs).createBucket(id)
			if err != nil {
				return err
			}
			return b.put(keyAlloc, raw)
		})
		if err != nil {
			return fmt.Errorf("writing alloc %s from the node-local file to the durable one: %w", id, err)
		}
		ids[id] = true
	}
	return s.local.update(func(tx txn) error {
		allocs := tx.bucket(bucketAllocs)
		var stale []string
		if err := allocs.forEachBucket(func(id string) error {
			if !ids[id] {
				stale = append(stale, id)
			}
			return nil
		}); err != nil {
			return err
		}
		for _, id := range stale {
			if err := allocs.deleteBucket(id); err != nil {
				return err
			}
		}
		for id := range ids {
			b, err := allocs.createBucket(id)
			if err != nil {
				return err
			}
			if err := b.put(keyAlloc, localMarker); err != nil {
				return err
			}
		}
		return nil
	})
}

// migrateLocal moves what version 1 kept in state.db and now lives in the
// local file (each alloc's tasks and hooks buckets, the local generic
// buckets), so that an upgraded client still finds its task handles.
// Local first, then the durable copy is deleted: a crash in between
// leaves both, and the next open moves them again (the durable version is
// only written as 2 by the same update that deletes them).
func (s *store) migrateLocal() error {
	type moved struct {
		path []string
		tree *memBucket
	}
	var found []moved
	err := s.durable.view(func(tx txn) error {
		allocs := tx.bucket(bucketAllocs)
		if err := allocs.forEachBucket(func(id string) error {
			for _, name := range []string{bucketTasks, bucketHooks} {
				if b := allocs.bucket(id).bucket(name); b != nil {
					tree, err := copyTree(b)
					if err != nil {
						return err
					}
					found = append(found, moved{[]string{bucketAllocs, id, name}, tree})
				}
			}
			return nil
		}); err != nil {
			return err
		}
		for name := range localKV {
			if b := tx.bucket(bucketKV).bucket(name); b != nil {
				tree, err := copyTree(b)
				if err != nil {
					return err
				}
				found = append(found, moved{[]string{bucketKV, name}, tree})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = s.local.update(func(tx txn) error {
		for _, m := range found {
			b := tx.bucket(m.path[0])
			for _, p := range m.path[1:] {
				var err error
				if b, err = b.createBucket(p); err != nil {
					return err
				}
			}
			if err := pasteTree(b, m.tree); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.durable.update(func(tx txn) error {
		for _, m := range found {
			if parent := walk(tx, m.path[:len(m.path)-1]); parent != nil {
				if err := parent.deleteBucket(m.path[len(m.path)-1]); err != nil {
					return err
				}
			}
		}
		return tx.bucket(bucketMeta).put(keyVersion, []byte(schemaVersion))
	})
}

// copyTree copies a bucket with its nested buckets into memory.
func copyTree(b bucket) (*memBucket, error) {
	out := newMemBucket()
	if err := b.forEach(func(k string, v []byte) error { return out.put(k, v) }); err != nil {
		return nil, err
	}
	err := b.forEachBucket(func(name string) error {
		sub, err := copyTree(b.bucket(name))
		if err != nil {
			return err
		}
		out.buckets[name] = sub
		return nil
	})
	return out, err
}

// pasteTree writes a copied tree into b.
func pasteTree(b bucket, tree *memBucket) error {
	for k, v := range tree.keys {
		if err := b.put(k, v); err != nil {
			return err
		}
	}
	for name, sub := range tree.buckets {
		nb, err := b.createBucket(name)
		if err != nil {
			return err
		}
		if err := pasteTree(nb, sub); err != nil {
			return err
		}
	}
	return nil
}

func (s *store) Close() error {
	return errors.Join(s.local.close(), s.durable.close())
}

// kv returns the backend of a generic bucket.
func (s *store) kv(bucketName string) backend {
	if localKV[bucketName] {
		return s.local
	}
	return s.durable
}

// getValue decodes key of the bucket at path into out; found is false when
// any part of the path or the key is missing.
func (s *store) getValue(be backend, out any, key string, path ...string) (found bool, err error) {
	err = be.view(func(tx txn) error {
		b := walk(tx, path)
		if b == nil {
			return nil
		}
		raw := b.get(key)
		if raw == nil {
			return nil
		}
		found = true
		return decode(raw, out)
	})
	return found, err
}

// walk follows path from the root; nil when a bucket is missing.
func walk(tx txn, path []string) bucket {
	if len(path) == 0 {
		return nil
	}
	b := tx.bucket(path[0])
	for _, p := range path[1:] {
		if b == nil {
			return nil
		}
		b = b.bucket(p)
	}
	return b
}

// allocBucket returns the alloc's bucket, or ErrUnknownAlloc.
func allocBucket(tx txn, allocID string) (bucket, error) {
	b := tx.bucket(bucketAllocs).bucket(allocID)
	if b == nil || b.get(keyAlloc) == nil {
		return nil, fmt.Errorf("alloc %q: %w", allocID, ErrUnknownAlloc)
	}
	return b, nil
}

// putAllocValue writes key under the alloc's bucket, then nested buckets.
func (s *store) putAllocValue(be backend, allocID string, v any, key string, nested ...string) error {
	raw, err := encode(v)
	if err != nil {
		return err
	}
	return be.update(func(tx txn) error {
		b, err := allocBucket(tx, allocID)
		if err != nil {
			return err
		}
		for _, n := range nested {
			if b, err = b.createBucket(n); err != nil {
				return err
			}
		}
		return b.put(key, raw)
	})
}

func (s *store) GetNodeIdentity() (*NodeIdentity, error) {
	var id NodeIdentity
	found, err := s.getValue(s.durable, &id, keyIdentity, bucketNode)
	if err != nil || !found {
		return nil, err
	}
	return &id, nil
}

func (s *store) PutNodeIdentity(id *NodeIdentity) error {
	raw, err := encode(id)
	if err != nil {
		return err
	}
	return s.durable.update(func(tx txn) error { return tx.bucket(bucketNode).put(keyIdentity, raw) })
}

func (s *store) GetAllocs() ([]*structs.Allocation, error) {
	var (
		out  []*structs.Allocation
		errs []error
	)
	err := s.durable.view(func(tx txn) error {
		allocs := tx.bucket(bucketAllocs)
		return allocs.forEachBucket(func(id string) error {
			raw := allocs.bucket(id).get(keyAlloc)
			if raw == nil {
				return nil
			}
			var a structs.Allocation
			if err := decode(raw, &a); err != nil {
				errs = append(errs, fmt.Errorf("alloc %q: %w", id, err))
				return nil
			}
			out = append(out, &a)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, errors.Join(errs...)
}

func (s *store) PutAlloc(a *structs.Allocation) error {
	raw, err := encode(a)
	if err != nil {
		return err
	}
	put := func(value []byte) func(tx txn) error {
		return func(tx txn) error {
			b, err := tx.bucket(bucketAllocs).createBucket(a.ID)
			if err != nil {
				return err
			}
			return b.put(keyAlloc, value)
		}
	}
	// Durable first: a local marker without the alloc is what reconcileLocal
	// removes, so a crash in between loses nothing.
	if err := s.durable.update(put(raw)); err != nil {
		return err
	}
	return s.local.update(put(localMarker))
}

// PutAllocLocal writes a new alloc to the node-local file alone (no
// fsync): a process crash keeps it, and the next start writes it to the
// durable file if PutAlloc did not (reconcileLocal). The alloc runner
// claims once this returned, while PutAlloc's fsync is in flight.
//
// The tasks' first states ride the same commit: each is a commit of its
// own otherwise (four page writes of the local file, on the path from a
// new alloc to its Claim RPC).
func (s *store) PutAllocLocal(a *structs.Allocation, tasks map[string]*structs.TaskState) error {
	raw, err := encode(a)
	if err != nil {
		return err
	}
	states := make(map[string][]byte, len(tasks))
	for name, ts := range tasks {
		if states[name], err = encode(ts); err != nil {
			return err
		}
	}
	return s.local.update(func(tx txn) error {
		b, err := tx.bucket(bucketAllocs).createBucket(a.ID)
		if err != nil {
			return err
		}
		if err := b.put(keyAlloc, raw); err != nil {
			return err
		}
		for name, st := range states {
			tb, err := b.createBucket(bucketTasks)
			if err != nil {
				return err
			}
			if tb, err = tb.createBucket(name); err != nil {
				return err
			}
			if err := tb.put(keyState, st); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *store) DeleteAlloc(allocID string) error {
	del := func(tx txn) error { return tx.bucket(bucketAllocs).deleteBucket(allocID) }
	// A whole alloc left in the local file (its PutAlloc failed) would
	// come back at the next start: make it a marker first.
	err := s.local.update(func(tx txn) error {
		b := tx.bucket(bucketAllocs).bucket(allocID)
		if b == nil {
			return nil
		}
		if raw := b.get(keyAlloc); raw == nil || bytes.Equal(raw, localMarker) {
			return nil
		}
		return b.put(keyAlloc, localMarker)
	})
	if err != nil {
		return err
	}
	// Durable first, so that from then on the alloc is gone for a restarted
	// client too, which then drops what is left of it in the local file.
	if err := s.durable.update(del); err != nil {
		return err
	}
	return s.local.update(del)
}

func (s *store) GetAllocState(allocID string) (*AllocState, error) {
	var st AllocState
	found, err := s.getValue(s.durable, &st, keyRunner, bucketAllocs, allocID)
	if err != nil || !found {
		return nil, err
	}
	return &st, nil
}

func (s *store) PutAllocState(allocID string, st *AllocState) error {
	return s.putAllocValue(s.durable, allocID, st, keyRunner)
}

func (s *store) GetTaskState(allocID, task string) (*structs.TaskState, error) {
	var ts structs.TaskState
	found, err := s.getValue(s.local, &ts, keyState, bucketAllocs, allocID, bucketTasks, task)
	if err != nil || !found {
		return nil, err
	}
	return &ts, nil
}

func (s *store) PutTaskState(allocID, task string, ts *structs.TaskState) error {
	return s.putAllocValue(s.local, allocID, ts, keyState, bucketTasks, task)
}

func (s *store) GetTaskHandle(allocID, task string) (*drivers.TaskHandle, error) {
	var h drivers.TaskHandle
	found, err := s.getValue(s.local, &h, keyHandle, bucketAllocs, allocID, bucketTasks, task)
	if err != nil || !found {
		return nil, err
	}
	return &h, nil
}

func (s *store) PutTaskHandle(allocID, task string, h *drivers.TaskHandle) error {
	return s.putAllocValue(s.local, allocID, h, keyHandle, bucketTasks, task)
}

func (s *store) DeleteTaskHandle(allocID, task string) error {
	return s.local.update(func(tx txn) error {
		b := walk(tx, []string{bucketAllocs, allocID, bucketTasks, task})
		if b == nil {
			return nil
		}
		return b.del(keyHandle)
	})
}

func (s *store) GetHookData(allocID, hook string) ([]byte, error) {
	var out []byte
	err := s.local.view(func(tx txn) error {
		if b := walk(tx, []string{bucketAllocs, allocID, bucketHooks}); b != nil {
			out = slices.Clone(b.get(hook))
		}
		return nil
	})
	return out, err
}

func (s *store) PutHookData(allocID, hook string, data []byte) error {
	return s.local.update(func(tx txn) error {
		b, err := allocBucket(tx, allocID)
		if err != nil {
			return err
		}
		hb, err := b.createBucket(bucketHooks)
		if err != nil {
			return err
		}
		return hb.put(hook, data)
	})
}

func (s *store) DeleteHookData(allocID, hook string) error {
	return s.local.update(func(tx txn) error {
		if b := walk(tx, []string{bucketAllocs, allocID, bucketHooks}); b != nil {
			return b.del(hook)
		}
		return nil
	})
}

func (s *store) Get(bucketName, key string) ([]byte, error) {
	var out []byte
	err := s.kv(bucketName).view(func(tx txn) error {
		if b := tx.bucket(bucketKV).bucket(bucketName); b != nil {
			out = slices.Clone(b.get(key))
		}
		return nil
	})
	return out, err
}

func (s *store) Put(bucketName, key string, value []byte) error {
	return s.kv(bucketName).update(func(tx txn) error {
		b, err := tx.bucket(bucketKV).createBucket(bucketName)
		if err != nil {
			return err
		}
		return b.put(key, value)
	})
}

func (s *store) Delete(bucketName, key string) error {
	return s.kv(bucketName).update(func(tx txn) error {
		if b := tx.bucket(bucketKV).bucket(bucketName); b != nil {
			return b.del(key)
		}
		return nil
	})
}

func (s *store) List(bucketName string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := s.kv(bucketName).view(func(tx txn) error {
		b := tx.bucket(bucketKV).bucket(bucketName)
		if b == nil {
			return nil
		}
		return b.forEach(func(k string, v []byte) error {
			out[k] = slices.Clone(v)
			return nil
		})
	})
	return out, err
}
