package allocrunner

import (
	"context"

	"github.com/berth-io/berth/client/allocdir"
	"github.com/berth-io/berth/nomad/structs"
)

// AllocRunner is what the client needs of an alloc runner. The client
// builds its runners through a Factory, so a caller that only needs the
// node side of an alloc (a node simulator, NewMinimal) does not carry task
// runners and drivers along. Runner, the real one, and the minimal runner
// both implement it.
type AllocRunner interface {
	// ID is the alloc's ID.
	ID() string
	// Alloc is the client's view of the alloc (see Runner.Alloc).
	Alloc() *structs.Allocation
	// Run runs the alloc until Shutdown or Destroy; it is called once, in
	// a goroutine the client owns.
	Run()
	// Update takes a new version of the alloc from the servers without
	// blocking.
	Update(a *structs.Allocation)
	// Stop stops the alloc and waits for its postrun hooks (or ctx).
	Stop(ctx context.Context, reason string) error
	// StopFailed is Stop for an alloc the client gives up on by itself.
	StopFailed(ctx context.Context, ev *structs.TaskEvent) error
	// Destroy stops the alloc for good and forgets it in the client state.
	Destroy(ctx context.Context) error
	// Shutdown stops the runner and leaves the alloc's workload as it is.
	Shutdown(ctx context.Context) error
	// WaitCh is closed once Run returned.
	WaitCh() <-chan struct{}
	// HasTask reports whether the alloc runs a task of that name.
	HasTask(name string) bool
	// AllocDir is the alloc's directory tree.
	AllocDir() *allocdir.AllocDir
}

// Factory builds an alloc runner from its config.
type Factory func(cfg *Config) (AllocRunner, error)

// NewRunner is the Factory of the real runner.
func NewRunner(cfg *Config) (AllocRunner, error) {
	r, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return r, nil
}

var (
	_ Factory = NewRunner
	_ Factory = NewMinimal
)
