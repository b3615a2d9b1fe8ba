package allocrunner

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/client/allocrunner/taskrunner"
	"github.com/berth-io/berth/client/internal/testlog"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

func eventOf(ts *structs.TaskState, typ string) *structs.TaskEvent {
	for _, e := range ts.Events {
		if e.Type == typ {
			return e
		}
	}
	return nil
}

// TestRunner_StopFailedFailsEveryTask: a running task and one waiting to
// restart both fail with the event, and nothing runs again after, even
// when the servers still want the alloc to run.
func TestRunner_StopFailedFailsEveryTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		policy := &structs.RestartPolicy{Attempts: 5, Interval: time.Hour, Delay: time.Hour, Mode: structs.RestartPolicyModeFail}
		h := newHarness(t, structs.JobTypeService, policy,
			&structs.Task{Name: "server"},
			&structs.Task{Name: "crashy", Config: map[string]any{"run_for": "1s", "exit_code": 1}})
		r := h.runner(false)
		wait := run(r)
		time.Sleep(2 * time.Second) // crashy waits an hour to restart
		synctest.Wait()
		must.True(t, h.host.Running(h.taskID("server")))

		ev := taskrunner.KillingEvent("Stopped: lost contact with the servers for 4m29s (disconnect deadline 5m0s)")
		must.NoError(t, r.StopFailed(context.Background(), ev))
		must.False(t, ev.FailsTask, must.Sprint("the caller's event is not changed"))
		last := h.updater.last()
		must.Eq(t, structs.AllocClientStatusFailed, last.ClientStatus)
		must.True(t, last.TasksExited)
		for _, name := range []string{"server", "crashy"} {
			ts := last.TaskStates[name]
			must.True(t, ts.Failed, must.Sprint(name))
			must.Eq(t, structs.TaskStateDead, ts.State)
			got := eventOf(ts, taskrunner.EventKilling)
			must.NotNil(t, got, must.Sprint(name))
			must.Eq(t, ev.Message, got.Message)
			must.True(t, got.FailsTask)
		}
		must.SliceNotContains(t, eventTypesOf(last.TaskStates["server"]), taskrunner.EventSiblingFailed)

		h.alloc.AllocModifyIndex++
		r.Update(h.alloc)
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		must.Eq(t, 1, h.host.Starts(h.taskID("server")))
		must.Eq(t, 1, h.host.Starts(h.taskID("crashy")))
		must.NoError(t, r.Destroy(context.Background()))
		wait()
	})
}

// ctxPrerun blocks in Prerun until its ctx ends (a claim that cannot reach
// the servers).
type ctxPrerun struct{}

func (ctxPrerun) Name() string { return "ctx-prerun" }

func (ctxPrerun) Prerun(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestRunner_StopFailedDuringPrerun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeService, nil, &structs.Task{Name: "t"})
		r, err := New(&Config{
			Alloc: h.alloc, AllocRoot: h.root, DB: h.db, Drivers: map[string]drivers.Driver{"mock": h.host.Driver()},
			StateUpdater: h.updater, Logger: testlog.Logger(t), Hooks: []HookFactory{func(*HookConfig) Hook { return ctxPrerun{} }},
		})
		must.NoError(t, err)
		wait := run(r)
		synctest.Wait()
		must.Eq(t, structs.AllocClientStatusPending, h.updater.last().ClientStatus)

		must.NoError(t, r.StopFailed(context.Background(), taskrunner.KillingEvent("Stopped: lost contact")))
		last := h.updater.last()
		must.Eq(t, structs.AllocClientStatusFailed, last.ClientStatus)
		must.True(t, last.TasksExited)
		ts := last.TaskStates["t"]
		must.True(t, ts.Failed)
		must.Eq(t, "Stopped: lost contact", eventOf(ts, taskrunner.EventKilling).Message)
		must.Eq(t, 0, h.host.Starts(h.taskID("t")))
		must.NoError(t, r.Destroy(context.Background()))
		wait()
	})
}

// TestRunner_StopAfterStopFailedKeepsTheFirst: a later plain Stop changes
// nothing, and a StopFailed after a plain Stop fails nothing.
func TestRunner_StopAfterStopFailedKeepsTheFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeService, nil, &structs.Task{Name: "t"})
		r := h.runner(false)
		wait := run(r)
		synctest.Wait()
		must.NoError(t, r.Stop(context.Background(), "Client is shutting down (dev mode)"))
		must.NoError(t, r.StopFailed(context.Background(), taskrunner.KillingEvent("Stopped: lost contact")))
		last := h.updater.last()
		must.Eq(t, structs.AllocClientStatusComplete, last.ClientStatus)
		must.False(t, last.TaskStates["t"].Failed)
		must.NoError(t, r.Destroy(context.Background()))
		wait()
	})
}
