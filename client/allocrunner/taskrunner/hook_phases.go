package taskrunner

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/berth-io/berth/plugins/drivers"
)

// prestartHooks runs prestart hooks in order and collects env and mounts.
func (r *Runner) prestartHooks(ctx context.Context) (map[string]string, []*drivers.MountConfig, error) {
	env := map[string]string{}
	var mounts []*drivers.MountConfig
	for _, h := range r.hooks {
		ph, ok := h.(PrestartHook)
		if !ok {
			continue
		}
		req := &PrestartRequest{Alloc: r.alloc, Task: r.task, AllocDir: r.allocDir, TaskDir: r.taskDir, Env: maps.Clone(env)}
		var resp PrestartResponse
		if err := ph.Prestart(ctx, req, &resp); err != nil {
			return nil, nil, fmt.Errorf("prestart hook %q: %w", h.Name(), err)
		}
		maps.Copy(env, resp.Env)
		mounts = append(mounts, resp.Mounts...)
	}
	return env, mounts, nil
}

func (r *Runner) poststartHooks(h *drivers.TaskHandle, recovered bool) {
	req := &PoststartRequest{Handle: h, Recovered: recovered}
	if st, err := r.driver.InspectTask(r.taskID); err == nil {
		req.Status = st
	}
	for _, hook := range r.hooks {
		ph, ok := hook.(PoststartHook)
		if !ok {
			continue
		}
		if err := ph.Poststart(r.killCtx, req); err != nil {
			r.logger.Warn("poststart hook failed", "hook", hook.Name(), "error", err)
		}
	}
}

func (r *Runner) exitedHooks(ctx context.Context, res *drivers.ExitResult) {
	for _, hook := range r.hooks {
		eh, ok := hook.(ExitedHook)
		if !ok {
			continue
		}
		if err := eh.Exited(ctx, &ExitedRequest{Result: res}); err != nil {
			r.logger.Warn("exited hook failed", "hook", hook.Name(), "error", err)
		}
	}
}

func (r *Runner) stopHooks(failed bool) {
	ctx, cancel := context.WithTimeout(r.shutdownCtx, hookTimeout)
	defer cancel()
	for _, hook := range r.hooks {
		sh, ok := hook.(StopHook)
		if !ok {
			continue
		}
		if err := sh.Stop(ctx, &StopRequest{Failed: failed}); err != nil {
			r.logger.Warn("stop hook failed", "hook", hook.Name(), "error", err)
		}
	}
}

// shutdownHookTimeout bounds the shutdown hooks together: a client
// shutdown must stay prompt.
const shutdownHookTimeout = 5 * time.Second

func (r *Runner) shutdownHooks() {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownHookTimeout)
	defer cancel()
	for _, hook := range r.hooks {
		if sh, ok := hook.(ShutdownHook); ok {
			sh.Shutdown(ctx)
		}
	}
}
