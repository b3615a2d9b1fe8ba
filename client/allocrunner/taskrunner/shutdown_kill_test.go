package taskrunner

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

// ctxWaitDriver closes a wait's channel without a result when the wait's
// ctx ends, as drivers.Driver allows and the mock and exec drivers do,
// and takes a moment to return from a StopTask whose ctx ended (a loaded
// machine), by which time the wait has closed.
type ctxWaitDriver struct{ drivers.Driver }

func (d ctxWaitDriver) StopTask(ctx context.Context, id string, timeout time.Duration, signal string) error {
	err := d.Driver.StopTask(ctx, id, timeout, signal)
	if ctx.Err() != nil {
		time.Sleep(time.Millisecond) // the driver's latency, in the bubble's time
	}
	return err
}

func (d ctxWaitDriver) WaitTask(ctx context.Context, id string) (<-chan *drivers.ExitResult, error) {
	inner, err := d.Driver.WaitTask(ctx, id)
	if err != nil {
		return nil, err
	}
	ch := make(chan *drivers.ExitResult, 1)
	go func() {
		defer close(ch)
		select {
		case res, ok := <-inner:
			if ok {
				ch <- res
			}
		case <-ctx.Done():
		}
	}()
	return ch, nil
}

// TestRunner_ShutdownDuringAKillLeavesTheTaskRunning: the client shuts
// down while a kill waits out the task's kill timeout. The wait's channel
// closes without a result; the runner used to record the task killed and
// dead, though it still ran, and the alloc runner then released its
// volumes under it (the simulator's seed 11 with partitions: check 2).
// Run several times: the runner's select sees the closed channel and the
// shutdown at once and picks either.
func TestRunner_ShutdownDuringAKillLeavesTheTaskRunning(t *testing.T) {
	for range 16 {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t, structs.JobTypeService, nil, &structs.Task{Name: "t", KillTimeout: 3 * time.Second,
				Config: map[string]any{"ignore_sigterm": true}})
			r := h.runner(false)
			r.driver = ctxWaitDriver{r.driver}
			go r.Run()
			synctest.Wait()
			must.Eq(t, structs.TaskStateRunning, r.State().State)

			go func() { _ = r.Kill(context.Background(), KillingEvent("alloc was stopped")) }()
			synctest.Wait() // the kill waits out the kill timeout
			must.NoError(t, r.Shutdown(context.Background()))

			st := r.State()
			must.NotEq(t, structs.TaskStateDead, st.State, must.Sprintf("events %v", eventTypes(st)))
			must.SliceNotContains(t, eventTypes(st), EventTerminated)
			must.True(t, h.host.Running(h.taskID()), must.Sprint("the task keeps running for the next client process"))
		})
	}
}
