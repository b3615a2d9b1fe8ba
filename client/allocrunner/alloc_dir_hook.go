package allocrunner

import (
	"context"

	"github.com/berth-io/berth/client/allocdir"
)

// allocDirHook builds the alloc dir before any task starts and, being the
// first hook, removes it after every other Destroy hook. Its Prerun runs
// beside the other hooks' (Runner.prerun).
type allocDirHook struct {
	dir   *allocdir.AllocDir
	tasks []string
	// build replaces dir.Build in tests.
	build func() error
}

func (*allocDirHook) Name() string { return "alloc_dir" }

func (h *allocDirHook) Prerun(context.Context) error {
	if h.build != nil {
		return h.build()
	}
	return h.dir.Build(h.tasks)
}

func (h *allocDirHook) Destroy(context.Context) error { return h.dir.Destroy() }
