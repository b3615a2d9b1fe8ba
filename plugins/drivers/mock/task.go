package mock

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/berth-io/berth/plugins/drivers"
)

// task is one mock task. It lives in the registry from StartTask to
// DestroyTask, whichever Driver holds it.
type task struct {
	cfg       *drivers.TaskConfig
	killAfter time.Duration
	startedAt time.Time
	// done is closed when the task exits.
	done chan struct{}

	// mu guards the fields below.
	mu          sync.Mutex
	timer       *time.Timer // run_for's; nil if none
	result      *drivers.ExitResult
	completedAt time.Time
	signals     []string // sent by SignalTask
}

func newTask(cfg *drivers.TaskConfig, sc *scriptConfig) *task {
	return &task{
		cfg:       cfg,
		killAfter: sc.killAfter,
		startedAt: time.Now().UTC(),
		done:      make(chan struct{}),
	}
}

// run arms run_for's timer.
func (t *task) run(sc *scriptConfig) {
	if sc.runFor <= 0 {
		return
	}
	code := sc.exitCode
	t.mu.Lock()
	defer t.mu.Unlock()
	t.timer = time.AfterFunc(sc.runFor, func() { t.exit(&drivers.ExitResult{ExitCode: code}) })
}

// exit ends the task with r unless it has ended; it reports whether it
// did.
func (t *task) exit(r *drivers.ExitResult) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.result != nil {
		return false
	}
	if t.timer != nil {
		t.timer.Stop()
	}
	t.result = r
	t.completedAt = time.Now().UTC()
	close(t.done)
	return true
}

func (t *task) exited() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.result != nil
}

func (t *task) exitResult() *drivers.ExitResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := *t.result
	return &r
}

func (t *task) status() *drivers.TaskStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := &drivers.TaskStatus{ID: t.cfg.ID, State: drivers.TaskStateRunning, StartedAt: t.startedAt}
	if t.result != nil {
		r := *t.result
		s.State = drivers.TaskStateExited
		s.CompletedAt = t.completedAt
		s.ExitResult = &r
	}
	return s
}

// registry holds every mock task of the process by ID.
var registry = struct {
	// mu guards tasks.
	mu    sync.Mutex
	tasks map[string]*task
}{tasks: map[string]*task{}}

func register(t *task) error {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.tasks[t.cfg.ID] != nil {
		return fmt.Errorf("starting task %q: a task with this ID exists; destroy it first", t.cfg.ID)
	}
	registry.tasks[t.cfg.ID] = t
	return nil
}

func unregister(t *task) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.tasks[t.cfg.ID] == t {
		delete(registry.tasks, t.cfg.ID)
	}
}

func lookup(id string) *task {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return registry.tasks[id]
}

// ExitTask makes a running task exit with code, whichever Driver holds it.
func ExitTask(taskID string, code int) error {
	t := lookup(taskID)
	if t == nil {
		return fmt.Errorf("exiting mock task %q: %w", taskID, drivers.ErrTaskNotFound)
	}
	if !t.exit(&drivers.ExitResult{ExitCode: code}) {
		return fmt.Errorf("exiting mock task %q: %w", taskID, errExited)
	}
	return nil
}

// Forget removes a task from the registry as if its process had vanished
// without a trace while the client was down: a later RecoverTask returns
// drivers.ErrTaskNotFound. Drivers that hold it keep it.
func Forget(taskID string) {
	if t := lookup(taskID); t != nil {
		unregister(t)
	}
}

// StartedConfig returns the config a task was started with (its Mounts,
// Env, ...), for tests to check what the client asked for.
func StartedConfig(taskID string) (*drivers.TaskConfig, bool) {
	t := lookup(taskID)
	if t == nil {
		return nil, false
	}
	return t.cfg, true
}

// Running returns the IDs of the tasks in the registry whose ID starts
// with prefix (e.g. "<alloc id>/") and that have not exited: the witness
// of which tasks run, for checkers such as testutil/sim's.
func Running(prefix string) []string {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	var ids []string
	for id, t := range registry.tasks {
		if strings.HasPrefix(id, prefix) && !t.exited() {
			ids = append(ids, id)
		}
	}
	return ids
}
