package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// openTimeout bounds waiting for the file lock: a second client process on
// the same data dir fails fast instead of hanging. A var for tests.
var openTimeout = 5 * time.Second

// NewBoltDB opens (creating if needed) the bbolt store at path.
func NewBoltDB(path string) (DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating client state dir: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: openTimeout})
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("opening client state %s: locked by another process (is another client running on this data_dir?)", path)
		}
		return nil, fmt.Errorf("opening client state %s: %w", path, err)
	}
	s, err := newStore(&boltBackend{db: db})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("opening client state %s: %w", path, err)
	}
	return s, nil
}

type boltBackend struct{ db *bolt.DB }

func (b *boltBackend) view(fn func(txn) error) error {
	err := b.db.View(func(tx *bolt.Tx) error { return fn(boltTxn{tx}) })
	return closedErr(err)
}

func (b *boltBackend) update(fn func(txn) error) error {
	err := b.db.Update(func(tx *bolt.Tx) error { return fn(boltTxn{tx}) })
	return closedErr(err)
}

func (b *boltBackend) close() error { return b.db.Close() }

func closedErr(err error) error {
	if errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

type boltTxn struct{ tx *bolt.Tx }

func (t boltTxn) bucket(name string) bucket {
	if b := t.tx.Bucket([]byte(name)); b != nil {
		return boltBucket{b}
	}
	return nil
}

func (t boltTxn) createBucket(name string) (bucket, error) {
	b, err := t.tx.CreateBucketIfNotExists([]byte(name))
	if err != nil {
		return nil, err
	}
	return boltBucket{b}, nil
}

type boltBucket struct{ b *bolt.Bucket }

func (b boltBucket) get(key string) []byte              { return b.b.Get([]byte(key)) }
func (b boltBucket) put(key string, value []byte) error { return b.b.Put([]byte(key), value) }
func (b boltBucket) del(key string) error               { return b.b.Delete([]byte(key)) }

func (b boltBucket) bucket(name string) bucket {
	if nb := b.b.Bucket([]byte(name)); nb != nil {
		return boltBucket{nb}
	}
	return nil
}

func (b boltBucket) createBucket(name string) (bucket, error) {
	nb, err := b.b.CreateBucketIfNotExists([]byte(name))
	if err != nil {
		return nil, err
	}
	return boltBucket{nb}, nil
}

func (b boltBucket) deleteBucket(name string) error {
	err := b.b.DeleteBucket([]byte(name))
	if errors.Is(err, bolterrors.ErrBucketNotFound) {
		return nil
	}
	return err
}

func (b boltBucket) forEach(fn func(string, []byte) error) error {
	return b.b.ForEach(func(k, v []byte) error {
		if v == nil { // nested bucket
			return nil
		}
		return fn(string(k), v)
	})
}

func (b boltBucket) forEachBucket(fn func(string) error) error {
	return b.b.ForEachBucket(func(k []byte) error { return fn(string(k)) })
}
