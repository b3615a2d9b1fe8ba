package allocrunner

import (
	"context"
	"sync"
	"time"

	"github.com/berth-io/berth/client/allocrunner/taskrunner"
)

// CSISetups counts the CSI hook Preruns under way on the node (claim,
// stage, publish), so that task starts can let them finish first.
//
// Why: an exec task's start costs ~20 ms of CPU (executor, PID namespace
// init, the task), and on a small node the allocs of one job that publish
// their volumes at once otherwise queue their publishes behind the task
// starts of the allocs that published first (issue 20: the slowest of
// ten publishes took 120-220 ms, each only ~5 ms alone). A task start
// waits while any setup runs, but never longer than the bound its caller
// gives, so a setup that waits for a plugin or a blocked claim delays
// starts only by that bound. Safe for concurrent use; nil counts nothing.
type CSISetups struct {
	lock sync.Mutex
	n    int
	// idle is closed when n drops to 0, and replaced by the next begin.
	idle chan struct{}
}

// NewCSISetups returns a counter with no setup under way.
func NewCSISetups() *CSISetups {
	idle := make(chan struct{})
	close(idle)
	return &CSISetups{idle: idle}
}

// begin counts a setup; the func it returns ends it (call it once).
func (s *CSISetups) begin() func() {
	if s == nil {
		return func() {}
	}
	s.lock.Lock()
	if s.n == 0 {
		s.idle = make(chan struct{})
	}
	s.n++
	s.lock.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.lock.Lock()
			defer s.lock.Unlock()
			if s.n--; s.n == 0 {
				close(s.idle)
			}
		})
	}
}

// underWay is how many setups are under way (for tests).
func (s *CSISetups) underWay() int {
	s.lock.Lock()
	defer s.lock.Unlock()
	return s.n
}

// WaitIdle waits until no setup is under way, for at most max, or for
// ctx; it returns ctx's error only.
func (s *CSISetups) WaitIdle(ctx context.Context, max time.Duration) error {
	if s == nil {
		return nil
	}
	s.lock.Lock()
	idle := s.idle
	s.lock.Unlock()
	select {
	case <-idle:
		return nil
	default:
	}
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// DefaultCSISetupsWait bounds how long a task start waits for the node's
// CSI setups: about what ten publishes take on a busy small node.
const DefaultCSISetupsWait = 100 * time.Millisecond

// TaskHookFactory returns the task hook that, last before a task starts,
// waits up to max for the node's CSI setups. A task that runs a CSI
// plugin does not wait: a setup may be waiting for it.
func (s *CSISetups) TaskHookFactory(max time.Duration) taskrunner.HookFactory {
	return func(hc *taskrunner.HookConfig) taskrunner.Hook {
		return &csiSetupsWait{setups: s, max: max, plugin: hc.Task != nil && hc.Task.CSIPluginConfig != nil}
	}
}

// csiSetupsWait is CSISetups' task hook.
type csiSetupsWait struct {
	setups *CSISetups
	max    time.Duration
	plugin bool
}

func (*csiSetupsWait) Name() string { return "csi_setups_wait" }

func (h *csiSetupsWait) Prestart(ctx context.Context, _ *taskrunner.PrestartRequest, _ *taskrunner.PrestartResponse) error {
	if h.plugin {
		return nil
	}
	return h.setups.WaitIdle(ctx, h.max)
}
