package state

import (
	"errors"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

// DB is the client state store. Getters return (nil, nil) when nothing is
// stored; every value returned is the caller's to keep (decoded afresh).
type DB interface {
	// GetNodeIdentity returns the node's persisted identity, or nil.
	GetNodeIdentity() (*NodeIdentity, error)
	PutNodeIdentity(id *NodeIdentity) error

	// GetAllocs returns every stored alloc. An alloc that fails to decode
	// is skipped and reported in the joined error, so one corrupt entry
	// does not hide the others.
	GetAllocs() ([]*structs.Allocation, error)
	// PutAlloc creates or replaces an alloc (the server's view of it).
	PutAlloc(alloc *structs.Allocation) error
	// PutAllocLocal writes a new alloc where a process crash (not a
	// machine crash) keeps it, without an fsync; PutAlloc must follow. A
	// client restarted before PutAlloc finished still has the alloc.
	// tasks are its tasks' first states (task name → state; nil: none),
	// written in the same commit (as PutTaskState would after it).
	PutAllocLocal(alloc *structs.Allocation, tasks map[string]*structs.TaskState) error
	// DeleteAlloc removes an alloc with everything stored under it. It is
	// idempotent.
	DeleteAlloc(allocID string) error

	GetAllocState(allocID string) (*AllocState, error)
	PutAllocState(allocID string, s *AllocState) error

	GetTaskState(allocID, task string) (*structs.TaskState, error)
	PutTaskState(allocID, task string, s *structs.TaskState) error
	GetTaskHandle(allocID, task string) (*drivers.TaskHandle, error)
	PutTaskHandle(allocID, task string, h *drivers.TaskHandle) error
	DeleteTaskHandle(allocID, task string) error

	// Hook data is opaque bytes per alloc and hook name.
	GetHookData(allocID, hook string) ([]byte, error)
	PutHookData(allocID, hook string, data []byte) error
	DeleteHookData(allocID, hook string) error

	// Generic keyed buckets, for state that is not per alloc. Bucket names
	// are constants of their owners (see the Bucket* constants).
	Get(bucket, key string) ([]byte, error)
	Put(bucket, key string, value []byte) error
	Delete(bucket, key string) error
	// List returns every key and value in a bucket.
	List(bucket string) (map[string][]byte, error)

	// Close releases the store; later calls fail.
	Close() error
}

// NodeIdentity is what makes a restarted client the same node.
type NodeIdentity struct {
	ID       string
	SecretID string
}

// AllocState is the alloc runner's own progress, beyond task states.
type AllocState struct {
	// TasksExited is set once every task exited and postrun hooks (CSI
	// unpublish) finished; a restored runner does not run them again.
	TasksExited bool
}

// Generic bucket names.
const (
	// BucketDynamicPlugins holds the dynamic plugin registry.
	BucketDynamicPlugins = "dynamic_plugins"
	// BucketCSIUsage holds CSI staging usage counts.
	BucketCSIUsage = "csi_usage"
)

// Sentinel errors.
var (
	// ErrUnknownAlloc: a per-alloc write named an alloc that is not stored
	// (never put, or already deleted).
	ErrUnknownAlloc = errors.New("alloc not in client state")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("client state is closed")
)
