package allocrunner

import (
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/client/allocdir"
	"github.com/berth-io/berth/client/allocrunner/shared"
	"github.com/berth-io/berth/nomad/structs"
)

// Hook is an alloc hook; it implements one or more phase interfaces
// below. The runner calls each phase's hooks one at a time, setup phases
// in registration order and teardown phases (Postrun, Destroy) in reverse.
// Hooks must honour ctx and return ctx.Err() once it is done. A hook that
// starts goroutines owns them: it stops and waits for them in Destroy and
// in Shutdown (either may be its last call).
type Hook interface {
	// Name names the hook in logs, errors and hook data.
	Name() string
}

// PrerunHook runs before any task starts. An error fails the alloc (every
// task is marked failed; Postrun still runs). After a client restart it
// runs again with HookConfig.Restored set, and must be idempotent. ctx is
// cancelled when the alloc is stopped or the client shuts down.
type PrerunHook interface {
	Hook
	Prerun(ctx context.Context) error
}

// PostrunHook runs once every task of the alloc has exited (and only
// then): the place to release what Prerun took, e.g. CSI unpublish. A hook
// that errors is called again with backoff until it succeeds or the runner
// is destroyed or shut down, so it must be idempotent. Allocation.
// TasksExited is reported only after every Postrun succeeded.
type PostrunHook interface {
	Hook
	Postrun(ctx context.Context) error
}

// DestroyHook runs when the alloc is destroyed, after Postrun (or after
// giving up on it). Errors are logged.
type DestroyHook interface {
	Hook
	Destroy(ctx context.Context) error
}

// ShutdownHook runs when the client shuts down and leaves tasks running;
// ctx bounds it.
type ShutdownHook interface {
	Hook
	Shutdown(ctx context.Context)
}

// UpdateHook runs when the servers send a new version of the alloc.
// Errors are logged.
type UpdateHook interface {
	Hook
	Update(ctx context.Context, req *UpdateRequest) error
}

// UpdateRequest carries the new alloc; hooks must not modify it.
type UpdateRequest struct {
	Alloc *structs.Allocation
}

// HookData persists opaque bytes per hook for this alloc in the client
// state, so that a restored hook finds what it stored (CSI mounts, ...).
type HookData interface {
	// Load returns what hook stored, or nil.
	Load(hook string) ([]byte, error)
	Save(hook string, data []byte) error
	Delete(hook string) error
}

// HookConfig is what a HookFactory gets.
type HookConfig struct {
	// Alloc as received; hooks must not modify it.
	Alloc     *structs.Allocation
	AllocDir  *allocdir.AllocDir
	Resources *shared.HookResources
	Data      HookData
	// Restored is set when the runner was rebuilt from the client state
	// after a client restart.
	Restored bool
	Logger   hclog.Logger
	// ClaimsDone, called by the hook that claims the alloc's volumes once
	// its Claim RPCs are answered (or it has none to make, or its Prerun
	// ends), lets the runner start building the alloc dir (Runner.prerun).
	// Safe to call more than once; nil in hooks built outside a runner.
	ClaimsDone func()
}

// HookFactory builds a hook for one alloc runner.
type HookFactory func(*HookConfig) Hook
