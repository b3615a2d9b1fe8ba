package taskrunner

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

// TestRunner_FailingKillDuringRestartDelay: a kill whose event fails the
// task records that event and fails it even when no task was running.
func TestRunner_FailingKillDuringRestartDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		policy := &structs.RestartPolicy{Attempts: 5, Interval: time.Hour, Delay: time.Hour, Mode: structs.RestartPolicyModeFail}
		h := newHarness(t, structs.JobTypeService, policy, &structs.Task{Name: "t", Config: map[string]any{"run_for": "1s", "exit_code": 1}})
		r := h.runner(false)
		go r.Run()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		must.Eq(t, structs.TaskStatePending, r.State().State)

		ev := failing(KillingEvent("Stopped: lost contact with the servers"))
		must.NoError(t, r.Kill(context.Background(), ev))
		st := r.State()
		must.True(t, st.Failed)
		must.Eq(t, structs.TaskStateDead, st.State)
		must.Eq(t, EventKilled, lastEvent(st).Type)
		must.Eq(t, ev.Message, st.Events[len(st.Events)-2].Message)
		must.Eq(t, 1, h.host.Starts(h.taskID()))
	})
}

func TestRunner_FailingKillBeforeStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, structs.JobTypeService, nil, &structs.Task{Name: "t"})
		r := h.runner(false)
		ev := failing(KillingEvent("Stopped: lost contact with the servers"))
		done := make(chan error, 1)
		go func() { done <- r.Kill(context.Background(), ev) }()
		synctest.Wait()
		go r.Run()
		must.NoError(t, <-done)
		st := r.State()
		must.True(t, st.Failed)
		must.Eq(t, []string{EventReceived, EventKilling, EventKilled}, eventTypes(st))
		must.Eq(t, 0, h.host.Starts(h.taskID()))
	})
}
