package allocrunner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/client/allocrunner/taskrunner"
	"github.com/berth-io/berth/client/internal/fakedriver"
	"github.com/berth-io/berth/client/internal/testlog"
	"github.com/berth-io/berth/client/state"
	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

// fakeUpdater records every alloc update.
type fakeUpdater struct {
	// lock guards updates.
	lock    sync.Mutex
	updates []*structs.Allocation
}

func (u *fakeUpdater) AllocStateUpdated(a *structs.Allocation) {
	u.lock.Lock()
	defer u.lock.Unlock()
	u.updates = append(u.updates, a)
}

func (u *fakeUpdater) last() *structs.Allocation {
	u.lock.Lock()
	defer u.lock.Unlock()
	return u.updates[len(u.updates)-1]
}

func (u *fakeUpdater) statuses() []string {
	u.lock.Lock()
	defer u.lock.Unlock()
	var out []string
	for _, a := range u.updates {
		if len(out) == 0 || out[len(out)-1] != a.ClientStatus {
			out = append(out, a.ClientStatus)
		}
	}
	return out
}

// events is a shared, ordered record of what hooks and tasks did.
type events struct {
	// lock guards list.
	lock sync.Mutex
	list []string
}

func (e *events) add(s string) {
	e.lock.Lock()
	defer e.lock.Unlock()
	e.list = append(e.list, s)
}

func (e *events) get() []string {
	e.lock.Lock()
	defer e.lock.Unlock()
	return slices.Clone(e.list)
}

// testHook records its phases into events. Postrun notes which tasks were
// still running, which must be none.
type testHook struct {
	name        string
	ev          *events
	host        *fakedriver.Host
	taskIDs     []string
	restored    bool
	prerunErr   error
	postrunErrs int
	hangPrerun  chan struct{} // when set, Prerun blocks on it, ignoring ctx
	onPrerun    func()        // when set, Prerun calls it first
	claimsDone  func()        // HookConfig.ClaimsDone
}

func (h *testHook) Name() string { return h.name }

func (h *testHook) Prerun(ctx context.Context) error {
	if h.onPrerun != nil {
		h.onPrerun()
	}
	h.ev.add(fmt.Sprintf("%s.prerun(restored=%v)", h.name, h.restored))
	if h.hangPrerun != nil {
		<-h.hangPrerun
	}
	return h.prerunErr
}

func (h *testHook) Postrun(context.Context) error {
	for _, id := range h.taskIDs {
		if h.host.Running(id) {
			h.ev.add(h.name + ".postrun-while-" + id + "-runs")
		}
	}
	if h.postrunErrs > 0 {
		h.postrunErrs--
		h.ev.add(h.name + ".postrun-failed")
		return errors.New("unpublish failed")
	}
	h.ev.add(h.name + ".postrun")
	return nil
}

func (h *testHook) Destroy(context.Context) error { h.ev.add(h.name + ".destroy"); return nil }
func (h *testHook) Shutdown(context.Context)      { h.ev.add(h.name + ".shutdown") }
func (h *testHook) Update(_ context.Context, req *UpdateRequest) error {
	h.ev.add(h.name + ".update(" + req.Alloc.DesiredStatus + ")")
	return nil
}

type harness struct {
	t       *testing.T
	host    *fakedriver.Host
	db      state.DB
	root    string
	updater *fakeUpdater
	ev      *events
	alloc   *structs.Allocation
}

func newHarness(t *testing.T, jobType string, policy *structs.RestartPolicy, tasks ...*structs.Task) *harness {
	for _, task := range tasks {
		task.Driver = "mock"
	}
	return &harness{
		t: t, host: fakedriver.NewHost(), db: state.NewMemDB(), root: filepath.Join(t.TempDir(), "alloc"),
		updater: &fakeUpdater{}, ev: &events{},
		alloc: &structs.Allocation{
			ID: "0f0f0f0f-0000-0000-0000-000000000001", Name: "web.g[0]", Namespace: "default", JobID: "web", TaskGroup: "g",
			DesiredStatus: structs.AllocDesiredStatusRun,
			Job: &structs.Job{ID: "web", Name: "web", Type: jobType, TaskGroups: []*structs.TaskGroup{{
				Name: "g", RestartPolicy: policy, Tasks: tasks,
			}}},
		},
	}
}

func (h *harness) taskID(name string) string { return h.alloc.ID + "/" + name }

func (h *harness) taskIDs() []string {
	var out []string
	for _, t := range h.alloc.Job.TaskGroups[0].Tasks {
		out = append(out, h.taskID(t.Name))
	}
	return out
}

// runner builds a runner as a new client process would, with hooks a and b.
func (h *harness) runner(restore bool, tweak ...func(*testHook)) *Runner {
	h.t.Helper()
	var hooks []HookFactory
	for _, name := range []string{"a", "b"} {
		hooks = append(hooks, func(c *HookConfig) Hook {
			th := &testHook{name: name, ev: h.ev, host: h.host, taskIDs: h.taskIDs(), restored: c.Restored, claimsDone: c.ClaimsDone}
			for _, f := range tweak {
				if name == "b" {
					f(th)
				}
			}
			return th
		})
	}
	r, err := New(&Config{
		Alloc: h.alloc, AllocRoot: h.root, DB: h.db, Drivers: map[string]drivers.Driver{"mock": h.host.Driver()},
		StateUpdater: h.updater, Logger: testlog.Logger(h.t), Restore: restore, Hooks: hooks,
		PostrunBackoff: helper.Backoff{Base: time.Second, Max: time.Second, NoJitter: true},
	})
	must.NoError(h.t, err)
	return r
}

// run starts r.Run in a goroutine and returns a func that waits for it.
func run(r *Runner) (wait func()) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.Run()
	}()
	return wg.Wait
}

func TestClientStatus(t *testing.T) {
	running := &structs.TaskState{State: structs.TaskStateRunning}
	pending := &structs.TaskState{State: structs.TaskStatePending}
	dead := &structs.TaskState{State: structs.TaskStateDead}
	failed := &structs.TaskState{State: structs.TaskStateDead, Failed: true}
	cases := []struct {
		name   string
		states map[string]*structs.TaskState
		want   string
	}{
		{"no tasks", nil, structs.AllocClientStatusPending},
		{"all pending", map[string]*structs.TaskState{"a": pending, "b": nil}, structs.AllocClientStatusPending},
		{"one running", map[string]*structs.TaskState{"a": running, "b": pending}, structs.AllocClientStatusRunning},
		{"one done one running", map[string]*structs.TaskState{"a": dead, "b": running}, structs.AllocClientStatusRunning},
		{"one done one restarting", map[string]*structs.TaskState{"a": dead, "b": pending}, structs.AllocClientStatusPending},
		{"all done", map[string]*structs.TaskState{"a": dead, "b": dead}, structs.AllocClientStatusComplete},
		{"one failed wins over running", map[string]*structs.TaskState{"a": failed, "b": running}, structs.AllocClientStatusFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, desc := ClientStatus(tc.states)
			must.Eq(t, tc.want, got)
			must.NotEq(t, "", desc)
		})
	}
}

func TestRunner_RunsTasksToCompletion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeBatch, nil,
			&structs.Task{Name: "short", Config: map[string]any{"run_for": "1s"}},
			&structs.Task{Name: "long", Config: map[string]any{"run_for": "5s"}})
		r := h.runner(false)
		wait := run(r)
		synctest.Wait()
		must.Eq(t, structs.AllocClientStatusRunning, h.updater.last().ClientStatus)
		must.DirExists(t, filepath.Join(h.root, h.alloc.ID, "alloc", "logs"))
		must.DirExists(t, filepath.Join(h.root, h.alloc.ID, "long", "secrets"))

		time.Sleep(5 * time.Second)
		synctest.Wait()
		last := h.updater.last()
		must.Eq(t, structs.AllocClientStatusComplete, last.ClientStatus)
		must.True(t, last.TasksExited)
		must.Eq(t, []string{structs.AllocClientStatusPending, structs.AllocClientStatusRunning, structs.AllocClientStatusComplete}, h.updater.statuses())
		must.Eq(t, []string{"a.prerun(restored=false)", "b.prerun(restored=false)", "b.postrun", "a.postrun"}, h.ev.get())
		st, err := h.db.GetAllocState(h.alloc.ID)
		must.NoError(t, err)
		must.True(t, st.TasksExited)

		must.NoError(t, r.Destroy(context.Background()))
		wait()
		must.Eq(t, []string{"a.prerun(restored=false)", "b.prerun(restored=false)", "b.postrun", "a.postrun", "b.destroy", "a.destroy"}, h.ev.get())
		_, err = os.Stat(filepath.Join(h.root, h.alloc.ID))
		must.True(t, os.IsNotExist(err), must.Sprint("destroy removes the alloc dir"))
		allocs, err := h.db.GetAllocs()
		must.NoError(t, err)
		must.Len(t, 0, allocs)
	})
}

// TestRunner_StopKillsTasksThenPostrun: postrun hooks run only once every
// task exited, however long one takes to die.
func TestRunner_StopKillsTasksThenPostrun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeService, nil,
			&structs.Task{Name: "quick"},
			&structs.Task{Name: "stubborn", KillTimeout: 10 * time.Second, Config: map[string]any{"ignore_sigterm": true}})
		r := h.runner(false)
		wait := run(r)
		synctest.Wait()
		must.Eq(t, structs.AllocClientStatusRunning, h.updater.last().ClientStatus)

		stopped := h.alloc.Copy()
		stopped.DesiredStatus = structs.AllocDesiredStatusStop
		stopped.DesiredDescription = "job stopped"
		start := time.Now()
		r.Update(stopped)
		synctest.Wait()
		must.False(t, h.host.Running(h.taskID("quick")))
		must.True(t, h.host.Running(h.taskID("stubborn")), must.Sprint("still within its kill timeout"))
		must.SliceNotContains(t, h.ev.get(), "b.postrun")
		must.False(t, h.updater.last().TasksExited)

		time.Sleep(10 * time.Second)
		synctest.Wait()
		must.Eq(t, 10*time.Second, time.Since(start))
		must.Eq(t, []string{"a.prerun(restored=false)", "b.prerun(restored=false)", "a.update(stop)", "b.update(stop)", "b.postrun", "a.postrun"}, h.ev.get(),
			must.Sprint("no postrun-while-<task>-runs entries: postrun saw every task dead"))
		last := h.updater.last()
		must.Eq(t, structs.AllocClientStatusComplete, last.ClientStatus)
		must.True(t, last.TasksExited)
		ks := last.TaskStates["stubborn"]
		must.Eq(t, taskrunner.EventKilling, ks.Events[3].Type)
		must.Eq(t, "Alloc was stopped: job stopped", ks.Events[3].Message)
		must.Eq(t, taskrunner.EventKilled, ks.Events[len(ks.Events)-1].Type)

		must.NoError(t, r.Destroy(context.Background()))
		wait()
	})
}

func TestRunner_PrerunFailureFailsAllocAndStillRunsPostrun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeService, nil, &structs.Task{Name: "t"})
		r := h.runner(false, func(th *testHook) { th.prerunErr = errors.New("volume busy") })
		wait := run(r)
		synctest.Wait()
		last := h.updater.last()
		must.Eq(t, structs.AllocClientStatusFailed, last.ClientStatus)
		ev := last.TaskStates["t"].Events[len(last.TaskStates["t"].Events)-1]
		must.Eq(t, taskrunner.EventSetupFailure, ev.Type)
		must.StrContains(t, ev.Message, `prerun hook "b" failed: volume busy`)
		must.Eq(t, 0, h.host.Starts(h.taskID("t")))
		must.Eq(t, []string{"a.prerun(restored=false)", "b.prerun(restored=false)", "b.postrun", "a.postrun"}, h.ev.get())
		must.True(t, last.TasksExited)
		must.NoError(t, r.Destroy(context.Background()))
		wait()
	})
}

func TestRunner_FailedTaskKillsSiblings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		policy := &structs.RestartPolicy{Attempts: 1, Interval: time.Hour, Delay: 5 * time.Second, Mode: structs.RestartPolicyModeFail}
		h := newHarness(t, structs.JobTypeService, policy,
			&structs.Task{Name: "crashy", Config: map[string]any{"run_for": "1s", "exit_code": 2}},
			&structs.Task{Name: "server"})
		r := h.runner(false)
		wait := run(r)
		time.Sleep(7 * time.Second) // 1s run, 5s delay, 1s run: fails
		synctest.Wait()
		must.Eq(t, 2, h.host.Starts(h.taskID("crashy")))
		must.False(t, h.host.Running(h.taskID("server")))
		last := h.updater.last()
		must.Eq(t, structs.AllocClientStatusFailed, last.ClientStatus)
		server := last.TaskStates["server"]
		must.False(t, server.Failed)
		must.SliceContains(t, eventTypesOf(server), taskrunner.EventSiblingFailed)
		must.True(t, last.TasksExited)
		must.NoError(t, r.Destroy(context.Background()))
		wait()
	})
}

func eventTypesOf(ts *structs.TaskState) []string {
	var out []string
	for _, e := range ts.Events {
		out = append(out, e.Type)
	}
	return out
}

func TestRunner_PostrunRetriesUntilItSucceeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeBatch, nil, &structs.Task{Name: "t", Config: map[string]any{"run_for": "1s"}})
		r := h.runner(false, func(th *testHook) { th.postrunErrs = 2 })
		wait := run(r)
		time.Sleep(time.Second)
		synctest.Wait()
		must.False(t, h.updater.last().TasksExited, must.Sprint("TasksExited waits for postrun to succeed"))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		must.True(t, h.updater.last().TasksExited)
		must.Eq(t, []string{"a.prerun(restored=false)", "b.prerun(restored=false)",
			"b.postrun-failed", "a.postrun", "b.postrun-failed", "b.postrun"}, h.ev.get())
		must.NoError(t, r.Destroy(context.Background()))
		wait()
	})
}

func TestRunner_RestoreReattachesAndReusesSetup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeService, nil, &structs.Task{Name: "t"})
		r1 := h.runner(false)
		wait1 := run(r1)
		synctest.Wait()
		pid := h.host.PID(h.taskID("t"))
		must.NoError(t, r1.Shutdown(context.Background()))
		wait1()
		must.True(t, h.host.Running(h.taskID("t")))

		r2 := h.runner(true)
		wait2 := run(r2)
		synctest.Wait()
		must.Eq(t, 1, h.host.Starts(h.taskID("t")))
		must.Eq(t, pid, h.host.PID(h.taskID("t")))
		must.Eq(t, structs.AllocClientStatusRunning, h.updater.last().ClientStatus)
		must.Eq(t, []string{"a.prerun(restored=false)", "b.prerun(restored=false)", "a.shutdown", "b.shutdown",
			"a.prerun(restored=true)", "b.prerun(restored=true)"}, h.ev.get())

		must.NoError(t, h.host.Exit(h.taskID("t"), 0))
		stopped := h.alloc.Copy()
		stopped.DesiredStatus = structs.AllocDesiredStatusStop
		r2.Update(stopped)
		synctest.Wait()
		must.True(t, h.updater.last().TasksExited)
		must.NoError(t, r2.Shutdown(context.Background()))
		wait2()

		// A third process finds the alloc finished: no prerun, no postrun.
		r3 := h.runner(true)
		wait3 := run(r3)
		synctest.Wait()
		must.Eq(t, structs.AllocClientStatusComplete, h.updater.last().ClientStatus)
		must.True(t, h.updater.last().TasksExited)
		r3.Update(stopped)
		must.NoError(t, r3.Destroy(context.Background()))
		wait3()
		got := h.ev.get()
		must.Eq(t, []string{"b.destroy", "a.destroy"}, got[len(got)-2:])
		must.SliceNotContains(t, got[8:], "a.prerun(restored=true)")
	})
}

// TestRunner_RestoreCarriesOutAStoredStop: a client killed after it
// stored a stop (Update persists the stopped alloc) but before its tasks
// were killed leaves them running; the servers have nothing newer to send.
// The restored runner kills them and runs postrun, which releases the
// alloc's CSI volumes (seeds 40071, 40859: the volume stayed published).
func TestRunner_RestoreCarriesOutAStoredStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeService, nil, &structs.Task{Name: "t"})
		r1 := h.runner(false)
		wait1 := run(r1)
		synctest.Wait()
		must.NoError(t, r1.Shutdown(context.Background()))
		wait1()
		h.alloc = h.alloc.Copy()
		h.alloc.DesiredStatus = structs.AllocDesiredStatusStop
		must.NoError(t, h.db.PutAlloc(h.alloc)) // as Update does, before the kill
		must.True(t, h.host.Running(h.taskID("t")))

		r2 := h.runner(true)
		wait2 := run(r2)
		synctest.Wait()
		must.False(t, h.host.Running(h.taskID("t")), must.Sprint("the restored runner left the stopped alloc's task running"))
		must.True(t, h.updater.last().TasksExited)
		got := h.ev.get()
		must.SliceContains(t, got, "a.postrun")
		must.SliceContains(t, got, "b.postrun")
		for _, e := range got {
			must.StrNotContains(t, e, "postrun-while")
		}
		must.NoError(t, r2.Destroy(context.Background()))
		wait2()
	})
}

// TestRunner_RestoreKillsATaskStoredPendingWithItsHandle: a client that
// died after it persisted a new task's handle but before it recorded the
// task running leaves the task running with a pending state. When the
// restored alloc is stopped and its prerun does not get through, that task
// must be killed like one stored running, not marked dead and left to run
// while postrun releases its volumes.
func TestRunner_RestoreKillsATaskStoredPendingWithItsHandle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeService, nil, &structs.Task{Name: "t"})
		r1 := h.runner(false)
		wait1 := run(r1)
		synctest.Wait()
		must.NoError(t, r1.Shutdown(context.Background()))
		wait1()
		must.True(t, h.host.Running(h.taskID("t")))
		// The state as the crash left it: the handle is stored, the
		// Started event and running state are not.
		must.NoError(t, h.db.PutTaskState(h.alloc.ID, "t", &structs.TaskState{State: structs.TaskStatePending}))
		h.alloc = h.alloc.Copy()
		h.alloc.DesiredStatus = structs.AllocDesiredStatusStop
		must.NoError(t, h.db.PutAlloc(h.alloc))

		// A hook that gives up on the stopped context, as the CSI hook
		// does before it claims.
		r2 := h.runner(true, func(th *testHook) { th.prerunErr = context.Canceled })
		wait2 := run(r2)
		synctest.Wait()
		must.False(t, h.host.Running(h.taskID("t")), must.Sprint("the restored runner left the stopped alloc's task running"))
		must.True(t, h.updater.last().TasksExited)
		for _, e := range h.ev.get() {
			must.StrNotContains(t, e, "postrun-while")
		}
		must.NoError(t, r2.Destroy(context.Background()))
		wait2()
	})
}

// TestMinimal_RestoreCarriesOutAStoredStop: the same for berth-nodesim's
// runner, whose "workload" waits for the stop.
func TestMinimal_RestoreCarriesOutAStoredStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeService, nil, &structs.Task{Name: "t"})
		h.alloc.DesiredStatus = structs.AllocDesiredStatusStop
		must.NoError(t, h.db.PutAlloc(h.alloc))
		hook := &testHook{name: "a", ev: h.ev, host: h.host}
		m, err := NewMinimal(&Config{
			Alloc: h.alloc, AllocRoot: h.root, DB: h.db, StateUpdater: h.updater, Logger: testlog.Logger(t), Restore: true,
			Hooks: []HookFactory{func(*HookConfig) Hook { return hook }},
		})
		must.NoError(t, err)
		done := make(chan struct{})
		go func() { defer close(done); m.Run() }()
		synctest.Wait()
		must.SliceContains(t, h.ev.get(), "a.postrun")
		must.True(t, h.updater.last().TasksExited)
		must.Eq(t, structs.AllocClientStatusComplete, h.updater.last().ClientStatus)
		must.NoError(t, m.Destroy(context.Background()))
		<-done
	})
}

func TestRunner_ShutdownWithHungPrerunIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeService, nil, &structs.Task{Name: "t"})
		hang := make(chan struct{})
		r := h.runner(false, func(th *testHook) { th.hangPrerun = hang })
		wait := run(r)
		synctest.Wait()

		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start := time.Now()
		err := r.Shutdown(ctx)
		must.ErrorIs(t, err, context.DeadlineExceeded)
		must.Eq(t, 2*time.Second, time.Since(start), must.Sprint("shutdown gives up on a hook that ignores ctx"))
		must.Eq(t, 0, h.host.Starts(h.taskID("t")))

		close(hang) // let the hung goroutine end so the bubble can
		wait()
	})
}

// gatedUpdater counts updates as they arrive and holds the first until
// release is closed.
type gatedUpdater struct {
	release chan struct{}
	// lock guards n.
	lock sync.Mutex
	n    int
}

func (u *gatedUpdater) AllocStateUpdated(*structs.Allocation) {
	u.lock.Lock()
	u.n++
	first := u.n == 1
	u.lock.Unlock()
	if first {
		<-u.release
	}
}

func (u *gatedUpdater) calls() int {
	u.lock.Lock()
	defer u.lock.Unlock()
	return u.n
}

// Two tasks reporting at once: the later snapshot is not handed over
// before the earlier one is delivered (the client keeps only the latest,
// so an overtaken report would leave a stale status, e.g. pending after
// running; TestRunner_RunsTasksToCompletion saw that under load).
func TestRunner_ReportsAreNotOvertaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeBatch, nil, &structs.Task{Name: "a", Config: map[string]any{"run_for": "1s"}})
		r := h.runner(false)
		u := &gatedUpdater{release: make(chan struct{})}
		r.updater = u

		var wg sync.WaitGroup
		wg.Go(r.taskStateUpdated) // held inside the updater
		synctest.Wait()
		wg.Go(r.taskStateUpdated)
		synctest.Wait()
		must.Eq(t, 1, u.calls())
		close(u.release)
		wg.Wait()
		must.Eq(t, 2, u.calls())
	})
}

// The alloc dir is built beside the other hooks' Prerun, not before them
// (the Claim RPC no longer waits for its mkdirs), and the tasks still
// start only once it is built.
func TestRunner_AllocDirIsBuiltBesideTheOtherPreruns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeService, nil, &structs.Task{Name: "t"})
		hooksRan := make(chan struct{})
		var once sync.Once
		r := h.runner(false, func(th *testHook) { th.onPrerun = func() { once.Do(func() { close(hooksRan) }) } })
		dir := r.hooks[0].(*allocDirHook)
		built := false
		dir.build = func() error {
			select {
			case <-hooksRan:
			case <-time.After(time.Minute):
				return errors.New("built alone: the other hooks waited for the alloc dir")
			}
			time.Sleep(time.Second) // a slow build: the task must wait for it
			built = true
			return dir.dir.Build([]string{"t"})
		}
		wait := run(r)
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		must.Eq(t, 0, h.host.Starts(h.taskID("t")), must.Sprint("no task starts before its alloc dir is built"))
		time.Sleep(time.Second)
		synctest.Wait()
		must.True(t, built)
		must.Eq(t, 1, h.host.Starts(h.taskID("t")))
		must.Eq(t, structs.AllocClientStatusRunning, h.updater.last().ClientStatus)
		must.NoError(t, r.Destroy(context.Background()))
		wait()
	})
}

// The alloc dir's build starts once the claims are answered
// (HookConfig.ClaimsDone), not with prerun: where the servers' Raft log
// shares the client's file system, the Claim's fsync would commit the
// build's mkdirs with it. It still runs beside the hook that signalled
// (the mounts), and the tasks still wait for it.
func TestRunner_AllocDirIsBuiltOnceTheClaimsAreAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeService, nil, &structs.Task{Name: "t"})
		answer, mounted := make(chan struct{}), make(chan struct{})
		r := h.runner(false, func(th *testHook) {
			th.onPrerun = func() {
				<-answer // the Claim RPC in flight
				th.claimsDone()
				<-mounted // staging and publishing
			}
		})
		dir := r.hooks[0].(*allocDirHook)
		var started atomic.Bool
		dir.build = func() error {
			started.Store(true)
			return dir.dir.Build([]string{"t"})
		}
		wait := run(r)
		synctest.Wait()
		must.False(t, started.Load(), must.Sprint("the alloc dir was built while the claims were in flight"))
		close(answer)
		synctest.Wait()
		must.True(t, started.Load(), must.Sprint("the build waited for the mounts too"))
		must.Eq(t, 0, h.host.Starts(h.taskID("t")), must.Sprint("no task starts before every prerun hook is done"))
		close(mounted)
		synctest.Wait()
		must.Eq(t, 1, h.host.Starts(h.taskID("t")))
		must.NoError(t, r.Destroy(context.Background()))
		wait()
	})
}

// gatedDB holds PutAlloc (the durable write) until the test sends its
// result on gate; every other call goes through.
type gatedDB struct {
	state.DB
	gate chan error
}

func (d *gatedDB) PutAlloc(a *structs.Allocation) error {
	if err := <-d.gate; err != nil {
		return err
	}
	return d.DB.PutAlloc(a)
}

// A new alloc's prerun (the CSI hook's claim and mounts) runs before its
// durable write: it needs only the node-local write, which a
// process crash keeps. The tasks wait for the durable write.
func TestRunner_PrerunRunsBeforeTheAllocsDurableWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeService, nil, &structs.Task{Name: "t"})
		db := &gatedDB{DB: h.db, gate: make(chan error)}
		h.db = db
		r := h.runner(false)
		wait := run(r)
		synctest.Wait()
		must.Eq(t, []string{"a.prerun(restored=false)", "b.prerun(restored=false)"}, h.ev.get())
		must.Eq(t, 0, h.host.Starts(h.taskID("t")), must.Sprint("a task started before its alloc was durable"))
		allocs, err := db.GetAllocs()
		must.NoError(t, err)
		must.SliceEmpty(t, allocs)

		db.gate <- nil
		synctest.Wait()
		must.Eq(t, 1, h.host.Starts(h.taskID("t")))
		allocs, err = db.GetAllocs()
		must.NoError(t, err)
		must.SliceLen(t, 1, allocs)

		stopped := h.alloc.Copy()
		stopped.DesiredStatus = structs.AllocDesiredStatusStop
		go func() { db.gate <- nil }() // the update's own write
		r.Update(stopped)
		synctest.Wait()
		must.NoError(t, r.Destroy(context.Background()))
		wait()
	})
}

// A durable write that fails fails the alloc like a failed prerun hook:
// no task starts, and postrun undoes what prerun did.
func TestRunner_FailedDurableWriteFailsTheAlloc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeService, nil, &structs.Task{Name: "t"})
		db := &gatedDB{DB: h.db, gate: make(chan error)}
		h.db = db
		r := h.runner(false)
		wait := run(r)
		synctest.Wait()
		db.gate <- errors.New("disk full")
		synctest.Wait()
		last := h.updater.last()
		must.Eq(t, structs.AllocClientStatusFailed, last.ClientStatus)
		ev := last.TaskStates["t"].Events[len(last.TaskStates["t"].Events)-1]
		must.Eq(t, taskrunner.EventSetupFailure, ev.Type)
		must.StrContains(t, ev.Message, "disk full")
		must.Eq(t, 0, h.host.Starts(h.taskID("t")))
		must.Eq(t, []string{"a.prerun(restored=false)", "b.prerun(restored=false)", "b.postrun", "a.postrun"}, h.ev.get())
		must.NoError(t, r.Destroy(context.Background()))
		wait()
	})
}

// TestRunner_NewAllocPersistsItsTasksReceived: New writes a new alloc and
// each task's first state (pending, Received) together, before Run; a
// client killed right after finds both.
func TestRunner_NewAllocPersistsItsTasksReceived(t *testing.T) {
	h := newHarness(t, structs.JobTypeBatch, nil,
		&structs.Task{Name: "one", Config: map[string]any{"run_for": "1s"}},
		&structs.Task{Name: "two", Config: map[string]any{"run_for": "1s"}})
	h.runner(false)
	for _, name := range []string{"one", "two"} {
		st, err := h.db.GetTaskState(h.alloc.ID, name)
		must.NoError(t, err)
		must.NotNil(t, st, must.Sprintf("task %q", name))
		must.Eq(t, structs.TaskStatePending, st.State)
		must.SliceLen(t, 1, st.Events)
		must.Eq(t, "Received", st.Events[0].Type)
	}
}
