package taskrunner

import (
	"errors"
	"fmt"
	"time"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

// RestartTracker is a task's restart history within its policy's
// interval. It is plain data: the run loop keeps it, DecideRestart
// returns the next one.
type RestartTracker struct {
	// Count is how many restarts the current window has seen.
	Count int
	// WindowStart is when the current window began (zero: none yet).
	WindowStart time.Time
}

// RestartAction is what to do after an attempt ended.
type RestartAction int

const (
	// ActionRestart: start the task again after Delay.
	ActionRestart RestartAction = iota
	// ActionComplete: the task is done and did not fail.
	ActionComplete
	// ActionFail: the task is done and failed.
	ActionFail
)

func (a RestartAction) String() string {
	switch a {
	case ActionRestart:
		return "restart"
	case ActionComplete:
		return "complete"
	case ActionFail:
		return "fail"
	}
	return fmt.Sprintf("RestartAction(%d)", int(a))
}

// Attempt is how one run of a task ended: it exited (Exit), or it never
// started (StartErr).
type Attempt struct {
	Exit     *drivers.ExitResult
	StartErr error
}

// RestartDecision is DecideRestart's answer.
type RestartDecision struct {
	Action RestartAction
	Delay  time.Duration
	// Reason is for the task event.
	Reason string
	// Tracker is the history to pass to the next decision.
	Tracker RestartTracker
}

// ErrUnrecoverable marks a start error that no restart can fix (wrong
// driver config, driver missing): the task fails at once.
var ErrUnrecoverable = errors.New("unrecoverable")

// Default restart policies, used when a group sets none (Nomad's values).
var (
	DefaultServiceRestartPolicy = structs.RestartPolicy{Attempts: 2, Interval: 30 * time.Minute, Delay: 15 * time.Second, Mode: structs.RestartPolicyModeFail}
	DefaultBatchRestartPolicy   = structs.RestartPolicy{Attempts: 3, Interval: 24 * time.Hour, Delay: 15 * time.Second, Mode: structs.RestartPolicyModeFail}
)

// DecideRestart applies a group's restart policy to an ended attempt. It
// is pure: the clock is an argument.
//
// Every exit counts as a restart within the policy's interval (a service
// task is meant to run forever, so even exit 0 is one), except a batch
// task's successful exit, which completes it. Within Attempts restarts per
// Interval the task restarts after Delay; past that, mode "fail" fails the
// task and mode "delay" waits for the interval to end, then starts over.
func DecideRestart(p *structs.RestartPolicy, jobType string, tr RestartTracker, a Attempt, now time.Time) RestartDecision {
	if a.StartErr != nil && (errors.Is(a.StartErr, ErrUnrecoverable) || errors.Is(a.StartErr, drivers.ErrInvalidConfig)) {
		return RestartDecision{Action: ActionFail, Reason: "Error was unrecoverable", Tracker: tr}
	}
	if a.Exit != nil && a.Exit.Successful() && jobType == structs.JobTypeBatch {
		return RestartDecision{Action: ActionComplete, Reason: "Restart unnecessary as task terminated successfully", Tracker: tr}
	}
	pol := restartPolicyFor(p, jobType)
	if tr.WindowStart.IsZero() || (pol.Interval > 0 && !now.Before(tr.WindowStart.Add(pol.Interval))) {
		tr = RestartTracker{WindowStart: now}
	}
	tr.Count++
	if tr.Count <= pol.Attempts {
		return RestartDecision{Action: ActionRestart, Delay: pol.Delay, Reason: "Restart within policy", Tracker: tr}
	}
	if pol.Mode == structs.RestartPolicyModeDelay {
		wait := pol.Delay
		if pol.Interval > 0 {
			wait = max(tr.WindowStart.Add(pol.Interval).Sub(now), pol.Delay)
		}
		return RestartDecision{
			Action:  ActionRestart,
			Delay:   wait,
			Reason:  fmt.Sprintf("Exceeded allowed attempts %d in interval %v and mode is %q; waiting for the interval to end", pol.Attempts, pol.Interval, pol.Mode),
			Tracker: tr,
		}
	}
	return RestartDecision{
		Action:  ActionFail,
		Reason:  fmt.Sprintf("Exceeded allowed attempts %d in interval %v and mode is %q", pol.Attempts, pol.Interval, structs.RestartPolicyModeFail),
		Tracker: tr,
	}
}

// restartPolicyFor returns the group's policy, or the default for the job
// type.
func restartPolicyFor(p *structs.RestartPolicy, jobType string) structs.RestartPolicy {
	if p != nil {
		return *p
	}
	if jobType == structs.JobTypeBatch {
		return DefaultBatchRestartPolicy
	}
	return DefaultServiceRestartPolicy
}
