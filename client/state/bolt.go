package state

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/berth-io/berth/helper/groupcommit"
)

// openTimeout bounds waiting for the file lock: a second client process on
// the same data dir fails fast instead of hanging. A var for tests.
var openTimeout = 5 * time.Second

// NewBoltDB opens (creating if needed) the bbolt store at path, and its
// node-local file next to it (see doc.go, "Two files").
func NewBoltDB(path string) (DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating client state dir: %w", err)
	}
	durable, err := openBolt(path, false)
	if err != nil {
		return nil, err
	}
	localPath, bootScoped := localFile(path)
	local, err := openBolt(localPath, bootScoped)
	if err != nil {
		durable.Close()
		return nil, err
	}
	if bootScoped {
		removeOtherBoots(path, localPath)
	}
	s, err := newStore(newBoltBackend(durable), newBoltBackend(local))
	if err != nil {
		local.Close()
		durable.Close()
		return nil, fmt.Errorf("opening client state %s: %w", path, err)
	}
	return s, nil
}

// openBolt opens one bbolt file. noSync skips every fsync: see doc.go for
// why the node-local file may.
func openBolt(path string, noSync bool) (*bolt.DB, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:        openTimeout,
		NoSync:         noSync,
		NoGrowSync:     noSync,
		NoFreelistSync: noSync,
	})
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("opening client state %s: locked by another process (is another client running on this data_dir?)", path)
		}
		return nil, fmt.Errorf("opening client state %s: %w", path, err)
	}
	return db, nil
}

// bootIDPath is the kernel's ID of the current boot. A var for tests.
var bootIDPath = "/proc/sys/kernel/random/boot_id"

// localFile returns the node-local file of the store at path:
// <stem>-local-<boot id>.db, boot-scoped. Without a boot ID (not Linux)
// it is <stem>-local.db and not boot-scoped: it is then synced like the
// durable file, since nothing would tell a reboot from a restart.
func localFile(path string) (string, bool) {
	stem := strings.TrimSuffix(path, ".db")
	raw, err := os.ReadFile(bootIDPath)
	boot := strings.TrimSpace(string(raw))
	if err != nil || boot == "" || strings.ContainsAny(boot, `/\`) {
		return stem + "-local.db", false
	}
	return stem + "-local-" + boot + ".db", true
}

// removeOtherBoots removes the node-local files of earlier boots: their
// mounts and processes ended with that boot, and an unsynced file a
// machine crash cut short may be torn, so it is never read.
func removeOtherBoots(path, keep string) {
	others, _ := filepath.Glob(strings.TrimSuffix(path, ".db") + "-local-*.db")
	for _, f := range others {
		if f != keep {
			_ = os.Remove(f) // best effort: a stale file is never opened anyway
		}
	}
}

// boltBackend is the client state in bbolt. Updates are committed in
// groups (helper/groupcommit): an update that arrives while a commit is in
// flight joins the next one, so a hundred allocs stopping at once cost a
// few fsyncs rather than a hundred (each commit fsyncs, 0.1-3 ms here). A
// lone update commits at once. Why not bbolt's Batch: it waits
// MaxBatchDelay for company, which every lone update (most of them) would
// pay in full.
type boltBackend struct {
	db      *bolt.DB
	batcher *groupcommit.Batcher[func(txn) error]
	// commits counts bbolt transactions that wrote, for tests.
	commits atomic.Int64
}

func newBoltBackend(db *bolt.DB) *boltBackend {
	b := &boltBackend{db: db}
	// No limit on a group: every update is small, and what is queued
	// is all waiting for the same fsync.
	b.batcher = groupcommit.New(b.commitGroup, nil, groupcommit.Limits{MaxRequests: math.MaxInt, MaxWeight: math.MaxInt})
	return b
}

func (b *boltBackend) view(fn func(txn) error) error {
	err := b.db.View(func(tx *bolt.Tx) error { return fn(boltTxn{tx}) })
	return closedErr(err)
}

func (b *boltBackend) update(fn func(txn) error) error {
	return b.batcher.Do(fn).Err
}

// commitGroup commits the updates in one transaction. When one of them
// fails, the transaction holds none of them: each is then committed on
// its own, so that each caller gets its own answer.
func (b *boltBackend) commitGroup(group []func(txn) error) []groupcommit.Result {
	res := make([]groupcommit.Result, len(group))
	b.commits.Add(1)
	err := b.db.Update(func(tx *bolt.Tx) error {
		for _, fn := range group {
			if err := fn(boltTxn{tx}); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil || len(group) == 1 {
		for i := range res {
			res[i].Err = closedErr(err)
		}
		return res
	}
	for i, fn := range group {
		b.commits.Add(1)
		res[i].Err = closedErr(b.db.Update(func(tx *bolt.Tx) error { return fn(boltTxn{tx}) }))
	}
	return res
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
