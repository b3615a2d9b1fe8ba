package client

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/berth-io/berth/client/allocrunner"
	"github.com/berth-io/berth/client/allocrunner/taskrunner"
	"github.com/berth-io/berth/helper/steptrace"
	"github.com/berth-io/berth/nomad/structs"
)

// allocEntry is one alloc the client knows.
type allocEntry struct {
	runner allocrunner.AllocRunner
	// index is the AllocModifyIndex last applied.
	index uint64
	// destroying is set once Destroy started.
	destroying bool
}

func (c *Client) runnersLocked() []allocrunner.AllocRunner {
	out := make([]allocrunner.AllocRunner, 0, len(c.allocs))
	for _, e := range c.allocs {
		if e.runner != nil {
			out = append(out, e.runner)
		}
	}
	return out
}

// AllocStateUpdated implements allocrunner.StateUpdater.
func (c *Client) AllocStateUpdated(a *structs.Allocation) { c.syncer.queue(a) }

func (c *Client) runnerConfig(a *structs.Allocation, restore bool) *allocrunner.Config {
	return &allocrunner.Config{
		Alloc: a, AllocRoot: filepath.Join(c.dataDir, "alloc"), DB: c.db, Drivers: c.cfg.Drivers,
		StateUpdater: c, Logger: c.logger, Restore: restore, Hooks: c.cfg.AllocHooks, TaskHooks: c.cfg.TaskHooks,
		Logs: c.cfg.Logs, KillGrace: c.cfg.KillGrace, Node: c.Node(),
	}
}

// restoreAllocs rebuilds the runners a previous client process left in
// the client state; their task runners re-attach to running tasks.
func (c *Client) restoreAllocs() {
	allocs, err := c.db.GetAllocs()
	if err != nil {
		c.logger.Error("some allocs could not be read from the client state", "error", err)
	}
	for _, a := range allocs {
		r, err := c.newRunner(c.runnerConfig(a, true))
		if err != nil {
			c.logger.Error("restoring alloc failed; forgetting it", "alloc_id", a.ID, "error", err)
			if err := c.db.DeleteAlloc(a.ID); err != nil {
				c.logger.Error("forgetting alloc failed", "alloc_id", a.ID, "error", err)
			}
			continue
		}
		c.allocs[a.ID] = &allocEntry{runner: r, index: a.AllocModifyIndex}
		c.goRunner(r)
		c.logger.Info("restored alloc", "alloc_id", a.ID)
	}
}

func (c *Client) newRunner(cfg *allocrunner.Config) (allocrunner.AllocRunner, error) {
	return c.cfg.AllocRunnerFactory(cfg)
}

func (c *Client) goRunner(r allocrunner.AllocRunner) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		r.Run()
	}()
}

// applyAllocs adds, updates and destroys runners to match the servers.
func (c *Client) applyAllocs(pulled []*structs.Allocation) {
	c.allocLock.Lock()
	defer c.allocLock.Unlock()
	if c.closing {
		return
	}
	known := make(map[string]uint64, len(c.allocs))
	for id, e := range c.allocs {
		known[id] = e.index
	}
	d := diffAllocs(known, pulled)
	// New runners are built, and updates handed over, in parallel: each
	// persists its alloc (an fsync of state.db), and concurrent writes
	// share one group commit, so K new or stopped allocs wait for about
	// one fsync instead of K in a row (issue 20: the tenth alloc of a job
	// started ~30 ms after the first, the hundredth stop signalled ~100
	// fsyncs late). Each runner still persists its alloc before it runs,
	// and runs as soon as it did, not once the slowest of its batch did:
	// the first of a job's K allocs claimed ~6 ms late waiting for the
	// others' commits (issue 20's K=10 step trace). Nothing can see a
	// runner before it is in c.allocs below: everything that looks holds
	// allocLock, which this holds until then.
	//
	// The goroutine that builds a runner goes on to run it: a new
	// goroutine for Run waited behind the one this call wakes when the
	// build is done (the waker's slot goes to the woken), and behind the
	// next alloc query this goroutine then sends (alloc persisted →
	// prerun started 0.13–0.15 ms in the K=1 step trace).
	runners := make([]allocrunner.AllocRunner, len(d.added))
	errs := make([]error, len(d.added))
	var built, wg sync.WaitGroup
	for i, a := range d.added {
		steptrace.Mark(a.ID, steptrace.AllocReceived)
		built.Add(1)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			r, err := c.newRunner(c.runnerConfig(a, false))
			runners[i], errs[i] = r, err
			built.Done()
			if err == nil {
				r.Run()
			}
		}()
	}
	for _, a := range d.updated {
		e := c.allocs[a.ID]
		e.index = a.AllocModifyIndex
		if e.runner != nil && !e.destroying {
			wg.Go(func() { e.runner.Update(a) })
		}
	}
	built.Wait()
	wg.Wait()
	for i, a := range d.added {
		r, err := runners[i], errs[i]
		if err != nil {
			c.logger.Error("cannot run alloc", "alloc_id", a.ID, "error", err)
			c.failAlloc(a, err)
			c.allocs[a.ID] = &allocEntry{index: a.AllocModifyIndex, destroying: true}
			continue
		}
		c.allocs[a.ID] = &allocEntry{runner: r, index: a.AllocModifyIndex}
		c.logger.Debug("added alloc", "alloc_id", a.ID)
	}
	for _, id := range d.removed {
		e := c.allocs[id]
		if e.runner == nil {
			delete(c.allocs, id)
			continue
		}
		if e.destroying {
			continue
		}
		e.destroying = true
		c.destroy(id, e.runner)
	}
}

// destroy destroys a runner in a goroutine the client owns and forgets
// it once done. A shutdown cuts it short; the next client process will
// destroy the alloc again.
func (c *Client) destroy(id string, r allocrunner.AllocRunner) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := r.Destroy(c.ctx); err != nil {
			c.logger.Warn("destroying alloc failed", "alloc_id", id, "error", err)
			return
		}
		c.allocLock.Lock()
		delete(c.allocs, id)
		c.allocLock.Unlock()
		c.logger.Debug("destroyed alloc", "alloc_id", id)
	}()
}

// failAlloc tells the servers an alloc cannot run here.
func (c *Client) failAlloc(a *structs.Allocation, err error) {
	f := a.Copy()
	f.ClientStatus = structs.AllocClientStatusFailed
	f.ClientDescription = err.Error()
	f.TasksExited = true
	c.syncer.queue(f)
}

// stopAllocs stops every alloc, workloads in parallel and then the allocs
// running CSI plugins in parallel, bounded in all by the longest kill
// timeout plus ShutdownTimeout (DevMode shutdown).
func (c *Client) stopAllocs() {
	c.allocLock.RLock()
	runners := c.runnersLocked()
	c.allocLock.RUnlock()
	longest := taskrunner.DefaultKillTimeout
	for _, r := range runners {
		longest = max(longest, maxKillTimeout(r.Alloc()))
	}
	ctx, cancel := context.WithTimeout(context.Background(), longest+c.cfg.ShutdownTimeout)
	defer cancel()
	// Workloads first, then the CSI plugins they mount through: a plugin
	// stopped first would fail the workloads' unmounts and leave mounts.
	var workloads, plugins []allocrunner.AllocRunner
	for _, r := range runners {
		if runsCSIPlugin(r.Alloc()) {
			plugins = append(plugins, r)
		} else {
			workloads = append(workloads, r)
		}
	}
	for _, group := range [][]allocrunner.AllocRunner{workloads, plugins} {
		var wg sync.WaitGroup
		for _, r := range group {
			wg.Go(func() {
				if err := r.Stop(ctx, "Client is shutting down (dev mode)"); err != nil {
					c.logger.Warn("stopping alloc failed", "alloc_id", r.ID(), "error", err)
				}
			})
		}
		wg.Wait()
	}
}

// runsCSIPlugin reports whether an alloc has a task with a csi_plugin.
func runsCSIPlugin(a *structs.Allocation) bool {
	tg := allocGroup(a)
	if tg == nil {
		return false
	}
	for _, t := range tg.Tasks {
		if t.CSIPluginConfig != nil {
			return true
		}
	}
	return false
}

func maxKillTimeout(a *structs.Allocation) time.Duration {
	var longest time.Duration
	if tg := allocGroup(a); tg != nil {
		for _, t := range tg.Tasks {
			longest = max(longest, t.KillTimeout)
		}
	}
	return longest
}

// Alloc returns the client's view of an alloc it runs.
func (c *Client) Alloc(id string) (*structs.Allocation, error) {
	r, err := c.runner(id)
	if err != nil {
		return nil, err
	}
	return r.Alloc(), nil
}

// AllocIDs lists the allocs this client runs.
func (c *Client) AllocIDs() []string {
	c.allocLock.RLock()
	defer c.allocLock.RUnlock()
	var out []string
	for id, e := range c.allocs {
		if e.runner != nil {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

func (c *Client) runner(id string) (allocrunner.AllocRunner, error) {
	c.allocLock.RLock()
	defer c.allocLock.RUnlock()
	e, ok := c.allocs[id]
	if !ok || e.runner == nil {
		return nil, fmt.Errorf("alloc %s: %w", id, ErrUnknownAlloc)
	}
	return e.runner, nil
}
