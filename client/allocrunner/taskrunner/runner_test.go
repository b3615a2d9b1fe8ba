package taskrunner

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/client/allocdir"
	"github.com/berth-io/berth/client/allocrunner/shared"
	"github.com/berth-io/berth/client/internal/fakedriver"
	"github.com/berth-io/berth/client/internal/testlog"
	"github.com/berth-io/berth/client/state"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

// harness is one alloc with one task on a fake host.
type harness struct {
	t     *testing.T
	host  *fakedriver.Host
	db    state.DB
	alloc *structs.Allocation
	dir   *allocdir.AllocDir
}

func newHarness(t *testing.T, jobType string, policy *structs.RestartPolicy, task *structs.Task) *harness {
	t.Helper()
	if task.Driver == "" {
		task.Driver = "mock"
	}
	alloc := &structs.Allocation{
		ID: "a1b2c3d4-0000-0000-0000-000000000001", Name: "web.g[0]", Namespace: "default", JobID: "web", TaskGroup: "g",
		DesiredStatus: structs.AllocDesiredStatusRun,
		Job: &structs.Job{ID: "web", Name: "web", Type: jobType, TaskGroups: []*structs.TaskGroup{{
			Name: "g", RestartPolicy: policy, Tasks: []*structs.Task{task},
		}}},
	}
	h := &harness{t: t, host: fakedriver.NewHost(), db: state.NewMemDB(), alloc: alloc,
		dir: allocdir.New(filepath.Join(t.TempDir(), "alloc"), alloc.ID)}
	must.NoError(t, h.db.PutAlloc(alloc))
	must.NoError(t, h.dir.Build([]string{task.Name}))
	return h
}

func (h *harness) task() *structs.Task { return h.alloc.Job.TaskGroups[0].Tasks[0] }

func (h *harness) taskID() string { return h.alloc.ID + "/" + h.task().Name }

// runner builds a runner with a new driver instance (a new client process).
func (h *harness) runner(restore bool, hooks ...HookFactory) *Runner {
	h.t.Helper()
	r, err := New(&Config{
		Alloc: h.alloc, Task: h.task(), Driver: h.host.Driver(), AllocDir: h.dir, DB: h.db,
		Logger: testlog.Logger(h.t), Resources: shared.NewHookResources(), Hooks: hooks, Restore: restore,
	})
	must.NoError(h.t, err)
	return r
}

func eventTypes(ts *structs.TaskState) []string {
	var out []string
	for _, e := range ts.Events {
		out = append(out, e.Type)
	}
	return out
}

func lastEvent(ts *structs.TaskState) *structs.TaskEvent { return ts.Events[len(ts.Events)-1] }

func TestRunner_BatchTaskCompletes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeBatch, nil, &structs.Task{Name: "t", Config: map[string]any{"run_for": "1s"},
			Env: map[string]string{"FOO": "bar", "NOMAD_TASK_NAME": "overridden"}})
		r := h.runner(false)
		go r.Run()
		<-r.WaitCh()

		st := r.State()
		must.Eq(t, structs.TaskStateDead, st.State)
		must.False(t, st.Failed)
		must.Eq(t, []string{EventReceived, EventSetup, EventStarted, EventTerminated, EventNotRestarting}, eventTypes(st))
		must.Eq(t, int64(time.Second), st.FinishedAt-st.StartedAt)

		cfg := h.host.Config(h.taskID())
		must.Nil(t, cfg, must.Sprint("the driver was told to forget the exited task"))
		stored, err := h.db.GetTaskState(h.alloc.ID, "t")
		must.NoError(t, err)
		must.Eq(t, st, stored)
		handle, err := h.db.GetTaskHandle(h.alloc.ID, "t")
		must.NoError(t, err)
		must.Nil(t, handle)
	})
}

func TestRunner_TaskConfigAndEnv(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeService, nil, &structs.Task{Name: "t",
			Env: map[string]string{"FOO": "bar", "NOMAD_TASK_NAME": "overridden"}})
		r := h.runner(false)
		go r.Run()
		synctest.Wait()

		cfg := h.host.Config(h.taskID())
		must.NotNil(t, cfg)
		must.Eq(t, h.taskID(), cfg.ID)
		must.Eq(t, "bar", cfg.Env["FOO"])
		must.Eq(t, "overridden", cfg.Env["NOMAD_TASK_NAME"], must.Sprint("the task's env wins"))
		must.Eq(t, h.alloc.ID, cfg.Env["NOMAD_ALLOC_ID"])
		must.Eq(t, "0", cfg.Env["NOMAD_ALLOC_INDEX"])
		must.Eq(t, h.dir.TaskDir("t").LocalDir, cfg.Env["NOMAD_TASK_DIR"])
		must.Eq(t, filepath.Join(h.dir.LogDir, "t.stdout.0"), cfg.StdoutPath)
		must.Eq(t, filepath.Join(h.dir.LogDir, "t.stderr.0"), cfg.StderrPath)
		must.FileExists(t, cfg.StdoutPath)

		handle, err := h.db.GetTaskHandle(h.alloc.ID, "t")
		must.NoError(t, err)
		must.NotNil(t, handle, must.Sprint("the handle of a running task is persisted"))
		must.Eq(t, h.taskID(), handle.Config.ID)

		must.NoError(t, r.Kill(context.Background(), nil))
	})
}

func TestRunner_FailingTaskRestartsThenFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		policy := &structs.RestartPolicy{Attempts: 2, Interval: time.Hour, Delay: 10 * time.Second, Mode: structs.RestartPolicyModeFail}
		h := newHarness(t, structs.JobTypeService, policy, &structs.Task{Name: "t", Config: map[string]any{"run_for": "1s", "exit_code": 1}})
		r := h.runner(false)
		start := time.Now()
		go r.Run()
		<-r.WaitCh()

		st := r.State()
		must.Eq(t, 3, h.host.Starts(h.taskID()))
		must.Eq(t, uint64(2), st.Restarts)
		must.True(t, st.Failed)
		must.Eq(t, structs.TaskStateDead, st.State)
		last := lastEvent(st)
		must.Eq(t, EventNotRestarting, last.Type)
		must.True(t, last.FailsTask)
		must.StrContains(t, last.Message, "Exceeded allowed attempts 2")
		// Three runs of 1s and two delays of 10s, on the bubble's clock.
		must.Eq(t, 23*time.Second, time.Since(start))
	})
}

func TestRunner_DelayModeWaitsForTheInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		policy := &structs.RestartPolicy{Attempts: 1, Interval: time.Minute, Delay: time.Second, Mode: structs.RestartPolicyModeDelay}
		h := newHarness(t, structs.JobTypeService, policy, &structs.Task{Name: "t", Config: map[string]any{"run_for": "1s", "exit_code": 2}})
		r := h.runner(false)
		start := time.Now()
		go r.Run()
		// Exits at 1s (restart after 1s), 3s (over the limit: wait until
		// the window that opened at 1s ends, at 61s), 62s (new window).
		time.Sleep(61*time.Second + time.Millisecond)
		must.Eq(t, 3, h.host.Starts(h.taskID()))
		must.NoError(t, r.Kill(context.Background(), nil))
		must.False(t, r.State().Failed)
		must.Eq(t, 61*time.Second+time.Millisecond, time.Since(start))
	})
}

func TestRunner_KillStopsWithinKillTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeService, nil, &structs.Task{Name: "t", KillTimeout: 3 * time.Second,
			Config: map[string]any{"ignore_sigterm": true}})
		r := h.runner(false)
		go r.Run()
		synctest.Wait()
		must.Eq(t, structs.TaskStateRunning, r.State().State)

		start := time.Now()
		must.NoError(t, r.Kill(context.Background(), KillingEvent("alloc was stopped")))
		must.Eq(t, 3*time.Second, time.Since(start), must.Sprint("the driver force-kills after the task's kill timeout"))

		st := r.State()
		must.Eq(t, structs.TaskStateDead, st.State)
		must.False(t, st.Failed)
		must.Eq(t, []string{EventReceived, EventSetup, EventStarted, EventKilling, EventTerminated, EventKilled}, eventTypes(st))
		must.Eq(t, "alloc was stopped", st.Events[3].Message)
		must.Eq(t, 9, st.Events[4].Signal)
		must.Eq(t, 1, h.host.Stops(h.taskID()))
		must.NoError(t, r.Kill(context.Background(), nil), must.Sprint("kill is idempotent"))
	})
}

func TestRunner_KillDuringRestartDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		policy := &structs.RestartPolicy{Attempts: 5, Interval: time.Hour, Delay: time.Hour, Mode: structs.RestartPolicyModeFail}
		h := newHarness(t, structs.JobTypeService, policy, &structs.Task{Name: "t", Config: map[string]any{"run_for": "1s", "exit_code": 1}})
		r := h.runner(false)
		go r.Run()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		must.Eq(t, structs.TaskStatePending, r.State().State)

		must.NoError(t, r.Kill(context.Background(), nil))
		st := r.State()
		must.Eq(t, EventKilled, lastEvent(st).Type)
		must.False(t, st.Failed)
		must.Eq(t, 1, h.host.Starts(h.taskID()))
	})
}

func TestRunner_MissingDriverFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeService, nil, &structs.Task{Name: "t", Driver: "nope"})
		r, err := New(&Config{Alloc: h.alloc, Task: h.task(), AllocDir: h.dir, DB: h.db, Logger: testlog.Logger(t)})
		must.NoError(t, err)
		go r.Run()
		<-r.WaitCh()
		st := r.State()
		must.True(t, st.Failed)
		must.Eq(t, EventDriverFailure, lastEvent(st).Type)
		must.StrContains(t, lastEvent(st).Message, `Driver "nope" is not available on this node`)
	})
}

func TestRunner_InvalidConfigFailsWithoutRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeService, nil, &structs.Task{Name: "t", Config: map[string]any{"invalid": true}})
		r := h.runner(false)
		go r.Run()
		<-r.WaitCh()
		st := r.State()
		must.True(t, st.Failed)
		must.Eq(t, []string{EventReceived, EventSetup, EventDriverFailure, EventNotRestarting}, eventTypes(st))
		must.StrContains(t, st.Events[2].Message, "invalid task driver config")
	})
}

// recordingHook records the phases it sees.
type recordingHook struct {
	// lock guards calls and failPrestart.
	lock         sync.Mutex
	calls        []string
	failPrestart int
}

func (h *recordingHook) Name() string { return "recorder" }

func (h *recordingHook) record(s string) {
	h.lock.Lock()
	defer h.lock.Unlock()
	h.calls = append(h.calls, s)
}

func (h *recordingHook) Calls() []string {
	h.lock.Lock()
	defer h.lock.Unlock()
	return append([]string(nil), h.calls...)
}

func (h *recordingHook) Prestart(_ context.Context, req *PrestartRequest, resp *PrestartResponse) error {
	h.lock.Lock()
	fail := h.failPrestart > 0
	h.failPrestart--
	h.lock.Unlock()
	if fail {
		h.record("prestart-fail")
		return errors.New("not yet")
	}
	h.record("prestart")
	resp.Env = map[string]string{"FROM_HOOK": req.Env["NOMAD_TASK_NAME"]}
	resp.Mounts = []*drivers.MountConfig{{TaskPath: "/data", HostPath: "/host/data"}}
	return nil
}

func (h *recordingHook) Poststart(_ context.Context, req *PoststartRequest) error {
	if req.Recovered {
		h.record("poststart-recovered")
	} else {
		h.record("poststart")
	}
	return nil
}

func (h *recordingHook) Exited(_ context.Context, req *ExitedRequest) error {
	h.record("exited")
	return nil
}

func (h *recordingHook) Stop(_ context.Context, req *StopRequest) error {
	h.record("stop")
	return nil
}

func (h *recordingHook) Shutdown(context.Context) { h.record("shutdown") }

func TestRunner_HookPhasesInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		policy := &structs.RestartPolicy{Attempts: 3, Interval: time.Hour, Delay: time.Second, Mode: structs.RestartPolicyModeFail}
		h := newHarness(t, structs.JobTypeBatch, policy, &structs.Task{Name: "t", Config: map[string]any{"run_for": "1s"}})
		rec := &recordingHook{failPrestart: 1}
		r := h.runner(false, func(*HookConfig) Hook { return rec })
		go r.Run()
		<-r.WaitCh()

		must.Eq(t, []string{"prestart-fail", "prestart", "poststart", "exited", "stop"}, rec.Calls())
		must.Eq(t, []string{EventReceived, EventSetup, EventSetupFailure, EventRestarting, EventStarted, EventTerminated, EventNotRestarting},
			eventTypes(r.State()))
		must.False(t, r.State().Failed)
		cfg := h.host.Config(h.taskID())
		must.Nil(t, cfg)
	})
}

func TestRunner_PrestartOutputReachesTheDriver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeService, nil, &structs.Task{Name: "t"})
		r := h.runner(false, func(*HookConfig) Hook { return &recordingHook{} })
		go r.Run()
		synctest.Wait()
		cfg := h.host.Config(h.taskID())
		must.Eq(t, "t", cfg.Env["FROM_HOOK"], must.Sprint("a hook sees the env earlier hooks set"))
		must.Eq(t, []*drivers.MountConfig{{TaskPath: "/data", HostPath: "/host/data"}}, cfg.Mounts)
		must.NoError(t, r.Kill(context.Background(), nil))
	})
}

func TestRunner_RestartRequestedByAHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		policy := &structs.RestartPolicy{Attempts: 0, Interval: time.Hour, Delay: time.Second, Mode: structs.RestartPolicyModeFail}
		h := newHarness(t, structs.JobTypeService, policy, &structs.Task{Name: "t"})
		var lc Lifecycle
		r := h.runner(false, func(c *HookConfig) Hook { lc = c.Lifecycle; return &recordingHook{} })
		go r.Run()
		synctest.Wait()

		must.NoError(t, lc.Restart(context.Background(), nil, false))
		synctest.Wait()
		st := r.State()
		must.Eq(t, structs.TaskStateRunning, st.State, must.Sprint("a requested restart does not count against the policy"))
		must.Eq(t, 2, h.host.Starts(h.taskID()))
		must.Eq(t, uint64(1), st.Restarts)
		must.Eq(t, []string{EventReceived, EventSetup, EventStarted, EventRestartSignal, EventTerminated, EventRestarting, EventStarted}, eventTypes(st))

		must.NoError(t, lc.Restart(context.Background(), nil, true))
		<-r.WaitCh()
		must.True(t, r.State().Failed, must.Sprint("a failure restart counts: attempts 0 fails the task"))
		must.ErrorIs(t, lc.Restart(context.Background(), nil, false), ErrTaskNotRunning)
	})
}

func TestRunner_ShutdownLeavesTaskRunningAndRestoreReattaches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		policy := &structs.RestartPolicy{Attempts: 0, Interval: time.Hour, Delay: time.Second, Mode: structs.RestartPolicyModeFail}
		h := newHarness(t, structs.JobTypeService, policy, &structs.Task{Name: "t"})
		rec1 := &recordingHook{}
		r1 := h.runner(false, func(*HookConfig) Hook { return rec1 })
		go r1.Run()
		synctest.Wait()
		pid := h.host.PID(h.taskID())
		must.Positive(t, pid)

		must.NoError(t, r1.Shutdown(context.Background()))
		must.True(t, h.host.Running(h.taskID()), must.Sprint("shutdown leaves the task running"))
		must.Eq(t, []string{"prestart", "poststart", "shutdown"}, rec1.Calls())
		must.Eq(t, structs.TaskStateRunning, r1.State().State)

		// A new client process: new driver instance, same host and DB.
		rec2 := &recordingHook{}
		r2 := h.runner(true, func(*HookConfig) Hook { return rec2 })
		go r2.Run()
		synctest.Wait()
		must.Eq(t, 1, h.host.Starts(h.taskID()), must.Sprint("re-attached, not restarted"))
		must.Eq(t, pid, h.host.PID(h.taskID()))
		must.Eq(t, structs.TaskStateRunning, r2.State().State)
		must.Eq(t, []string{"poststart-recovered"}, rec2.Calls())

		must.NoError(t, h.host.Exit(h.taskID(), 3))
		<-r2.WaitCh()
		st := r2.State()
		must.True(t, st.Failed)
		var term *structs.TaskEvent
		for _, e := range st.Events {
			if e.Type == EventTerminated {
				term = e
			}
		}
		must.NotNil(t, term)
		must.Eq(t, 3, term.ExitCode)
	})
}

func TestRunner_RestoreLearnsExitWhileClientWasDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeBatch, nil, &structs.Task{Name: "t"})
		r1 := h.runner(false)
		go r1.Run()
		synctest.Wait()
		must.NoError(t, r1.Shutdown(context.Background()))
		must.NoError(t, h.host.Exit(h.taskID(), 0))

		r2 := h.runner(true)
		go r2.Run()
		<-r2.WaitCh()
		st := r2.State()
		must.Eq(t, structs.TaskStateDead, st.State)
		must.False(t, st.Failed)
		must.Eq(t, 1, h.host.Starts(h.taskID()))
		must.Eq(t, EventNotRestarting, lastEvent(st).Type)

		// A third process finds the task dead and does nothing.
		r3 := h.runner(true)
		go r3.Run()
		<-r3.WaitCh()
		must.Eq(t, st, r3.State())
		must.Eq(t, 1, h.host.Starts(h.taskID()))
	})
}

func TestRunner_RestoreOfALostTaskAppliesTheRestartPolicy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		policy := &structs.RestartPolicy{Attempts: 1, Interval: time.Hour, Delay: time.Second, Mode: structs.RestartPolicyModeFail}
		h := newHarness(t, structs.JobTypeService, policy, &structs.Task{Name: "t"})
		r1 := h.runner(false)
		go r1.Run()
		synctest.Wait()
		must.NoError(t, r1.Shutdown(context.Background()))
		h.host.Forget(h.taskID()) // the machine rebooted

		r2 := h.runner(true)
		go r2.Run()
		time.Sleep(time.Second)
		synctest.Wait()
		must.Eq(t, 2, h.host.Starts(h.taskID()))
		st := r2.State()
		must.Eq(t, structs.TaskStateRunning, st.State)
		must.SliceContains(t, eventTypes(st), EventDriverFailure)
		must.NoError(t, r2.Kill(context.Background(), nil))
	})
}

func TestRunner_ShutdownBeforeRun(t *testing.T) {
	h := newHarness(t, structs.JobTypeService, nil, &structs.Task{Name: "t"})
	r := h.runner(false)
	must.NoError(t, r.Shutdown(context.Background()))
	r.Run() // returns at once
	must.Eq(t, 0, h.host.Starts(h.taskID()))
}

func TestRunner_MarkDead(t *testing.T) {
	h := newHarness(t, structs.JobTypeService, nil, &structs.Task{Name: "t"})
	r := h.runner(false)
	r.MarkDead(NewEvent(EventSetupFailure, "prerun hook \"csi\" failed"), true)
	<-r.WaitCh()
	must.NoError(t, r.Kill(context.Background(), nil))
	st := r.State()
	must.True(t, st.Failed)
	must.Eq(t, structs.TaskStateDead, st.State)
	must.Eq(t, 0, h.host.Starts(h.taskID()))
}

func TestRunner_ShutdownDuringHungStopIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeService, nil, &structs.Task{Name: "t", KillTimeout: time.Minute,
			Config: map[string]any{"stop_hangs": true}})
		r := h.runner(false)
		go r.Run()
		synctest.Wait()

		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		must.ErrorIs(t, r.Kill(ctx, nil), context.DeadlineExceeded, must.Sprint("kill gives up at its ctx, the driver still hangs"))

		start := time.Now()
		must.NoError(t, r.Shutdown(context.Background()))
		must.Eq(t, 0, time.Since(start), must.Sprint("shutdown cancels the hung StopTask at once"))
	})
}
