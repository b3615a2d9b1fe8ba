package taskrunner

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

func TestDecideRestart(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	failMode := &structs.RestartPolicy{Attempts: 2, Interval: 10 * time.Minute, Delay: 5 * time.Second, Mode: structs.RestartPolicyModeFail}
	delayMode := &structs.RestartPolicy{Attempts: 2, Interval: 10 * time.Minute, Delay: 5 * time.Second, Mode: structs.RestartPolicyModeDelay}
	noRestarts := &structs.RestartPolicy{Attempts: 0, Interval: time.Minute, Delay: time.Second, Mode: structs.RestartPolicyModeFail}
	failed := Attempt{Exit: &drivers.ExitResult{ExitCode: 1}}
	succeeded := Attempt{Exit: &drivers.ExitResult{}}

	cases := []struct {
		name    string
		policy  *structs.RestartPolicy
		jobType string
		tracker RestartTracker
		attempt Attempt
		now     time.Time
		want    RestartDecision
	}{
		{
			name: "first failure restarts after delay and opens a window", policy: failMode, jobType: structs.JobTypeService,
			attempt: failed, now: t0,
			want: RestartDecision{Action: ActionRestart, Delay: 5 * time.Second, Reason: "Restart within policy", Tracker: RestartTracker{Count: 1, WindowStart: t0}},
		},
		{
			name: "last attempt within the window still restarts", policy: failMode, jobType: structs.JobTypeService,
			tracker: RestartTracker{Count: 1, WindowStart: t0}, attempt: failed, now: t0.Add(time.Minute),
			want: RestartDecision{Action: ActionRestart, Delay: 5 * time.Second, Reason: "Restart within policy", Tracker: RestartTracker{Count: 2, WindowStart: t0}},
		},
		{
			name: "too many attempts in mode fail fails", policy: failMode, jobType: structs.JobTypeService,
			tracker: RestartTracker{Count: 2, WindowStart: t0}, attempt: failed, now: t0.Add(2 * time.Minute),
			want: RestartDecision{Action: ActionFail, Reason: `Exceeded allowed attempts 2 in interval 10m0s and mode is "fail"`, Tracker: RestartTracker{Count: 3, WindowStart: t0}},
		},
		{
			name: "too many attempts in mode delay waits for the interval end", policy: delayMode, jobType: structs.JobTypeService,
			tracker: RestartTracker{Count: 2, WindowStart: t0}, attempt: failed, now: t0.Add(4 * time.Minute),
			want: RestartDecision{Action: ActionRestart, Delay: 6 * time.Minute,
				Reason:  `Exceeded allowed attempts 2 in interval 10m0s and mode is "delay"; waiting for the interval to end`,
				Tracker: RestartTracker{Count: 3, WindowStart: t0}},
		},
		{
			name: "mode delay waits at least the delay", policy: delayMode, jobType: structs.JobTypeService,
			tracker: RestartTracker{Count: 2, WindowStart: t0}, attempt: failed, now: t0.Add(10*time.Minute - time.Second),
			want: RestartDecision{Action: ActionRestart, Delay: 5 * time.Second,
				Reason:  `Exceeded allowed attempts 2 in interval 10m0s and mode is "delay"; waiting for the interval to end`,
				Tracker: RestartTracker{Count: 3, WindowStart: t0}},
		},
		{
			name: "a new interval resets the count", policy: failMode, jobType: structs.JobTypeService,
			tracker: RestartTracker{Count: 3, WindowStart: t0}, attempt: failed, now: t0.Add(10 * time.Minute),
			want: RestartDecision{Action: ActionRestart, Delay: 5 * time.Second, Reason: "Restart within policy", Tracker: RestartTracker{Count: 1, WindowStart: t0.Add(10 * time.Minute)}},
		},
		{
			name: "successful batch task completes", policy: failMode, jobType: structs.JobTypeBatch,
			tracker: RestartTracker{Count: 1, WindowStart: t0}, attempt: succeeded, now: t0,
			want: RestartDecision{Action: ActionComplete, Reason: "Restart unnecessary as task terminated successfully", Tracker: RestartTracker{Count: 1, WindowStart: t0}},
		},
		{
			name: "successful service task restarts and counts", policy: failMode, jobType: structs.JobTypeService,
			attempt: succeeded, now: t0,
			want: RestartDecision{Action: ActionRestart, Delay: 5 * time.Second, Reason: "Restart within policy", Tracker: RestartTracker{Count: 1, WindowStart: t0}},
		},
		{
			name: "a killed batch task is not a success", policy: failMode, jobType: structs.JobTypeBatch,
			attempt: Attempt{Exit: &drivers.ExitResult{Signal: 9}}, now: t0,
			want: RestartDecision{Action: ActionRestart, Delay: 5 * time.Second, Reason: "Restart within policy", Tracker: RestartTracker{Count: 1, WindowStart: t0}},
		},
		{
			name: "zero attempts fails at once", policy: noRestarts, jobType: structs.JobTypeService,
			attempt: failed, now: t0,
			want: RestartDecision{Action: ActionFail, Reason: `Exceeded allowed attempts 0 in interval 1m0s and mode is "fail"`, Tracker: RestartTracker{Count: 1, WindowStart: t0}},
		},
		{
			name: "a start error counts like a failure", policy: failMode, jobType: structs.JobTypeService,
			attempt: Attempt{StartErr: errors.New("exec format error")}, now: t0,
			want: RestartDecision{Action: ActionRestart, Delay: 5 * time.Second, Reason: "Restart within policy", Tracker: RestartTracker{Count: 1, WindowStart: t0}},
		},
		{
			name: "invalid driver config is unrecoverable", policy: failMode, jobType: structs.JobTypeService,
			attempt: Attempt{StartErr: fmt.Errorf("bad: %w", drivers.ErrInvalidConfig)}, now: t0,
			want: RestartDecision{Action: ActionFail, Reason: "Error was unrecoverable"},
		},
		{
			name: "no policy uses the service default", jobType: structs.JobTypeService,
			tracker: RestartTracker{Count: 2, WindowStart: t0}, attempt: failed, now: t0.Add(29 * time.Minute),
			want: RestartDecision{Action: ActionFail, Reason: `Exceeded allowed attempts 2 in interval 30m0s and mode is "fail"`, Tracker: RestartTracker{Count: 3, WindowStart: t0}},
		},
		{
			name: "no policy uses the batch default", jobType: structs.JobTypeBatch,
			tracker: RestartTracker{Count: 2, WindowStart: t0}, attempt: failed, now: t0.Add(time.Hour),
			want: RestartDecision{Action: ActionRestart, Delay: 15 * time.Second, Reason: "Restart within policy", Tracker: RestartTracker{Count: 3, WindowStart: t0}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := DecideRestart(tc.policy, tc.jobType, tc.tracker, tc.attempt, tc.now)
			must.Eq(t, tc.want, got)
		})
	}
}
