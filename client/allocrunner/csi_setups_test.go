package allocrunner

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/client/allocrunner/taskrunner"
	"github.com/berth-io/berth/nomad/structs"
)

// waitIdleFor runs WaitIdle in a goroutine and returns how long it took
// on the bubble's clock and its error.
func waitIdleFor(ctx context.Context, s *CSISetups, max time.Duration) (time.Duration, error) {
	start := time.Now()
	err := s.WaitIdle(ctx, max)
	return time.Since(start), err
}

func TestCSISetups_StartsWaitForSetupsUnderWayAtMostTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewCSISetups()
		took, err := waitIdleFor(t.Context(), s, time.Second)
		must.NoError(t, err)
		must.Eq(t, 0, took, must.Sprint("idle: no wait"))

		endA, endB := s.begin(), s.begin()
		go func() {
			time.Sleep(30 * time.Millisecond)
			endA()
			endA() // a second call must not count twice
			time.Sleep(20 * time.Millisecond)
			endB()
		}()
		took, err = waitIdleFor(t.Context(), s, time.Second)
		must.NoError(t, err)
		must.Eq(t, 50*time.Millisecond, took, must.Sprint("until the last setup ended"))
		must.Eq(t, 0, s.underWay())

		never := s.begin()
		defer never()
		took, err = waitIdleFor(t.Context(), s, 100*time.Millisecond)
		must.NoError(t, err)
		must.Eq(t, 100*time.Millisecond, took, must.Sprint("a setup that never ends delays a start by the bound only"))

		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
		defer cancel()
		took, err = waitIdleFor(ctx, s, time.Second)
		must.ErrorIs(t, err, context.DeadlineExceeded)
		must.Eq(t, 10*time.Millisecond, took)

		var none *CSISetups
		must.NoError(t, none.WaitIdle(t.Context(), time.Second))
		none.begin()()
	})
}

func TestCSISetups_TaskHookWaitsExceptForPluginTasks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewCSISetups()
		end := s.begin()
		defer end()
		f := s.TaskHookFactory(40 * time.Millisecond)
		for _, tc := range []struct {
			task *structs.Task
			want time.Duration
		}{
			{&structs.Task{Name: "work"}, 40 * time.Millisecond},
			{&structs.Task{Name: "plugin", CSIPluginConfig: &structs.TaskCSIPluginConfig{ID: "p"}}, 0},
		} {
			h := f(&taskrunner.HookConfig{Task: tc.task}).(taskrunner.PrestartHook)
			start := time.Now()
			must.NoError(t, h.Prestart(t.Context(), &taskrunner.PrestartRequest{}, &taskrunner.PrestartResponse{}))
			must.Eq(t, tc.want, time.Since(start), must.Sprintf("task %s", tc.task.Name))
		}
	})
}
