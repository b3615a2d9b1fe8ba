package state

import (
	"errors"
	"fmt"
	"slices"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

// schemaVersion is bumped on incompatible layout changes; a client refuses
// a store written by a newer schema rather than misreading it.
const schemaVersion = "1"

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

// store implements DB over a backend.
type store struct {
	b backend
}

func newStore(b backend) (*store, error) {
	s := &store{b: b}
	err := b.update(func(tx txn) error {
		for _, name := range []string{bucketMeta, bucketNode, bucketAllocs, bucketKV} {
			if _, err := tx.createBucket(name); err != nil {
				return err
			}
		}
		meta := tx.bucket(bucketMeta)
		switch v := string(meta.get(keyVersion)); v {
		case "":
			return meta.put(keyVersion, []byte(schemaVersion))
		case schemaVersion:
			return nil
		default:
			return fmt.Errorf("client state schema version %q is not supported (want %q); was it written by a newer berth?", v, schemaVersion)
		}
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (s *store) Close() error { return s.b.close() }

// getValue decodes key of the bucket at path into out; found is false when
// any part of the path or the key is missing.
func (s *store) getValue(out any, key string, path ...string) (found bool, err error) {
	err = s.b.view(func(tx txn) error {
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
func (s *store) putAllocValue(allocID string, v any, key string, nested ...string) error {
	raw, err := encode(v)
	if err != nil {
		return err
	}
	return s.b.update(func(tx txn) error {
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
	found, err := s.getValue(&id, keyIdentity, bucketNode)
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
	return s.b.update(func(tx txn) error { return tx.bucket(bucketNode).put(keyIdentity, raw) })
}

func (s *store) GetAllocs() ([]*structs.Allocation, error) {
	var (
		out  []*structs.Allocation
		errs []error
	)
	err := s.b.view(func(tx txn) error {
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
	return s.b.update(func(tx txn) error {
		b, err := tx.bucket(bucketAllocs).createBucket(a.ID)
		if err != nil {
			return err
		}
		return b.put(keyAlloc, raw)
	})
}

func (s *store) DeleteAlloc(allocID string) error {
	return s.b.update(func(tx txn) error { return tx.bucket(bucketAllocs).deleteBucket(allocID) })
}

func (s *store) GetAllocState(allocID string) (*AllocState, error) {
	var st AllocState
	found, err := s.getValue(&st, keyRunner, bucketAllocs, allocID)
	if err != nil || !found {
		return nil, err
	}
	return &st, nil
}

func (s *store) PutAllocState(allocID string, st *AllocState) error {
	return s.putAllocValue(allocID, st, keyRunner)
}

func (s *store) GetTaskState(allocID, task string) (*structs.TaskState, error) {
	var ts structs.TaskState
	found, err := s.getValue(&ts, keyState, bucketAllocs, allocID, bucketTasks, task)
	if err != nil || !found {
		return nil, err
	}
	return &ts, nil
}

func (s *store) PutTaskState(allocID, task string, ts *structs.TaskState) error {
	return s.putAllocValue(allocID, ts, keyState, bucketTasks, task)
}

func (s *store) GetTaskHandle(allocID, task string) (*drivers.TaskHandle, error) {
	var h drivers.TaskHandle
	found, err := s.getValue(&h, keyHandle, bucketAllocs, allocID, bucketTasks, task)
	if err != nil || !found {
		return nil, err
	}
	return &h, nil
}

func (s *store) PutTaskHandle(allocID, task string, h *drivers.TaskHandle) error {
	return s.putAllocValue(allocID, h, keyHandle, bucketTasks, task)
}

func (s *store) DeleteTaskHandle(allocID, task string) error {
	return s.b.update(func(tx txn) error {
		b := walk(tx, []string{bucketAllocs, allocID, bucketTasks, task})
		if b == nil {
			return nil
		}
		return b.del(keyHandle)
	})
}

func (s *store) GetHookData(allocID, hook string) ([]byte, error) {
	var out []byte
	err := s.b.view(func(tx txn) error {
		if b := walk(tx, []string{bucketAllocs, allocID, bucketHooks}); b != nil {
			out = slices.Clone(b.get(hook))
		}
		return nil
	})
	return out, err
}

func (s *store) PutHookData(allocID, hook string, data []byte) error {
	return s.b.update(func(tx txn) error {
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
	return s.b.update(func(tx txn) error {
		if b := walk(tx, []string{bucketAllocs, allocID, bucketHooks}); b != nil {
			return b.del(hook)
		}
		return nil
	})
}

func (s *store) Get(bucketName, key string) ([]byte, error) {
	var out []byte
	err := s.b.view(func(tx txn) error {
		if b := tx.bucket(bucketKV).bucket(bucketName); b != nil {
			out = slices.Clone(b.get(key))
		}
		return nil
	})
	return out, err
}

func (s *store) Put(bucketName, key string, value []byte) error {
	return s.b.update(func(tx txn) error {
		b, err := tx.bucket(bucketKV).createBucket(bucketName)
		if err != nil {
			return err
		}
		return b.put(key, value)
	})
}

func (s *store) Delete(bucketName, key string) error {
	return s.b.update(func(tx txn) error {
		if b := tx.bucket(bucketKV).bucket(bucketName); b != nil {
			return b.del(key)
		}
		return nil
	})
}

func (s *store) List(bucketName string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := s.b.view(func(tx txn) error {
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
