package taskrunner

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/client/logs"
)

// logsHook creates the task's log files and rotates them while the task
// runs (package logs says why rotation works from the outside). It owns
// the rotator goroutines: Poststart starts them once (also after a
// re-attach), Stop and Shutdown stop them and wait.
type logsHook struct {
	cfg    logs.Config
	dir    string
	task   string
	logger hclog.Logger

	// lock guards cancel.
	lock   sync.Mutex
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newLogsHook(cfg logs.Config, dir, task string, logger hclog.Logger) *logsHook {
	return &logsHook{cfg: cfg.WithDefaults(), dir: dir, task: task, logger: logger}
}

func (*logsHook) Name() string { return "logs" }

func (h *logsHook) Prestart(context.Context, *PrestartRequest, *PrestartResponse) error {
	if err := os.MkdirAll(h.dir, 0o755); err != nil {
		return fmt.Errorf("creating log dir: %w", err)
	}
	for _, s := range []string{logs.Stdout, logs.Stderr} {
		f, err := os.OpenFile(logs.Path(h.dir, h.task, s, 0), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
		if err != nil {
			return fmt.Errorf("creating log file: %w", err)
		}
		f.Close()
	}
	return nil
}

func (h *logsHook) Poststart(context.Context, *PoststartRequest) error {
	h.lock.Lock()
	defer h.lock.Unlock()
	if h.cancel != nil {
		return nil // already rotating (this is a restart)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	for _, s := range []string{logs.Stdout, logs.Stderr} {
		rot := logs.NewRotator(h.dir, h.task, s, h.cfg, h.logger)
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			rot.Run(ctx)
		}()
	}
	return nil
}

func (h *logsHook) Stop(context.Context, *StopRequest) error {
	h.stop()
	return nil
}

func (h *logsHook) Shutdown(context.Context) { h.stop() }

func (h *logsHook) stop() {
	h.lock.Lock()
	cancel := h.cancel
	h.cancel = nil
	h.lock.Unlock()
	if cancel != nil {
		cancel()
	}
	h.wg.Wait()
}
