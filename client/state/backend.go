package state

// The typed store (store.go) is written once against these small
// interfaces; bbolt (bolt.go) and an in-memory tree (mem.go) implement
// them. Byte slices a bucket returns are only valid inside the
// transaction, as with bbolt.

// backend runs transactions.
type backend interface {
	view(fn func(tx txn) error) error
	update(fn func(tx txn) error) error
	close() error
}

// txn is a transaction's root: top-level buckets only.
type txn interface {
	bucket(name string) bucket
	createBucket(name string) (bucket, error)
}

// bucket is a keyed bucket that may hold nested buckets.
type bucket interface {
	get(key string) []byte
	put(key string, value []byte) error
	del(key string) error
	bucket(name string) bucket
	createBucket(name string) (bucket, error)
	deleteBucket(name string) error
	// forEach visits plain keys only (nested buckets are skipped).
	forEach(fn func(key string, value []byte) error) error
	// forEachBucket visits nested bucket names only.
	forEachBucket(fn func(name string) error) error
}
