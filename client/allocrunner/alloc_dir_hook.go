package allocrunner

import (
	"context"

	"github.com/berth-io/berth/client/allocdir"
)

// allocDirHook builds the alloc dir before anything else and, being the
// first hook, removes it after every other Destroy hook.
type allocDirHook struct {
	dir   *allocdir.AllocDir
	tasks []string
}

func (*allocDirHook) Name() string { return "alloc_dir" }

func (h *allocDirHook) Prerun(context.Context) error { return h.dir.Build(h.tasks) }

func (h *allocDirHook) Destroy(context.Context) error { return h.dir.Destroy() }
