package scheduler

import (
	"time"

	"github.com/berth-io/berth/nomad/structs"
)

// Delay functions of a reschedule policy.
const (
	delayConstant    = "constant"
	delayExponential = "exponential"
	delayFibonacci   = "fibonacci"
)

// Default reschedule policies, as Nomad documents them: services retry
// forever with an exponential delay from 30s up to 1h; batch jobs retry
// once a day after 5s. System jobs are not rescheduled.
var (
	defaultServiceReschedule = structs.ReschedulePolicy{
		Delay: 30 * time.Second, DelayFunction: delayExponential, MaxDelay: time.Hour, Unlimited: true,
	}
	defaultBatchReschedule = structs.ReschedulePolicy{
		Attempts: 1, Interval: 24 * time.Hour, Delay: 5 * time.Second, DelayFunction: delayConstant,
	}
)

// reschedulePolicy returns the group's policy, or its job type's default;
// nil means never reschedule.
func reschedulePolicy(jobType string, tg *structs.TaskGroup) *structs.ReschedulePolicy {
	if tg.ReschedulePolicy != nil {
		return tg.ReschedulePolicy
	}
	switch jobType {
	case structs.JobTypeService:
		p := defaultServiceReschedule
		return &p
	case structs.JobTypeBatch:
		p := defaultBatchReschedule
		return &p
	}
	return nil
}

// rescheduleWhen is the decision for one failed alloc.
type rescheduleWhen int

const (
	rescheduleNever rescheduleWhen = iota // attempts used up, or no policy
	rescheduleNow                         // replace it in this eval
	rescheduleLater                       // replace it at the returned time
)

// rescheduleDecision decides when failed alloc a is replaced under policy
// at time now, and with which delay. Attempts count the reschedule
// events within the policy's interval (all of them when it is zero). The
// delay runs from when the alloc failed.
func rescheduleDecision(a *structs.Allocation, policy *structs.ReschedulePolicy, now time.Time) (rescheduleWhen, time.Time, time.Duration) {
	if policy == nil {
		return rescheduleNever, time.Time{}, 0
	}
	var events []*structs.RescheduleEvent
	if a.RescheduleTracker != nil {
		events = a.RescheduleTracker.Events
	}
	if !policy.Unlimited {
		if policy.Attempts <= 0 {
			return rescheduleNever, time.Time{}, 0
		}
		recent := 0
		for _, e := range events {
			if policy.Interval <= 0 || e.RescheduleTime > now.Add(-policy.Interval).UnixNano() {
				recent++
			}
		}
		if recent >= policy.Attempts {
			return rescheduleNever, time.Time{}, 0
		}
	}
	delay := rescheduleDelay(policy, len(events))
	at := failTime(a, now).Add(delay)
	if !at.After(now) {
		return rescheduleNow, now, delay
	}
	return rescheduleLater, at, delay
}

// rescheduleDelay is the delay before reschedule number n+1 (n done).
func rescheduleDelay(policy *structs.ReschedulePolicy, n int) time.Duration {
	d := policy.Delay
	capped := func(d time.Duration) bool { return policy.MaxDelay > 0 && d >= policy.MaxDelay }
	switch policy.DelayFunction {
	case delayExponential:
		for i := 0; i < n && !capped(d) && d > 0; i++ {
			d *= 2
		}
	case delayFibonacci:
		prev := policy.Delay
		for i := 1; i < n && !capped(d) && d > 0; i++ {
			prev, d = d, d+prev
		}
	}
	if capped(d) {
		d = policy.MaxDelay
	}
	return d
}

// failTime is when alloc a failed: its last task's finish, else its last
// client update, else now.
func failTime(a *structs.Allocation, now time.Time) time.Time {
	var last int64
	for _, ts := range a.TaskStates {
		if ts != nil && ts.FinishedAt > last {
			last = ts.FinishedAt
		}
	}
	if last == 0 {
		last = a.ModifyTime
	}
	if last == 0 {
		return now
	}
	return time.Unix(0, last)
}

// maxTrackedEvents bounds the reschedule history an alloc carries.
const maxTrackedEvents = 16

// nextTracker is the reschedule history of the alloc replacing failed
// alloc prev: prev's history plus this reschedule.
func nextTracker(prev *structs.Allocation, policy *structs.ReschedulePolicy, now time.Time, delay time.Duration) *structs.RescheduleTracker {
	var events []*structs.RescheduleEvent
	if prev.RescheduleTracker != nil {
		events = append(events, prev.RescheduleTracker.Events...)
	}
	events = append(events, &structs.RescheduleEvent{
		RescheduleTime: now.UnixNano(),
		PrevAllocID:    prev.ID,
		PrevNodeID:     prev.NodeID,
		Delay:          int64(delay),
	})
	keep := maxTrackedEvents
	if policy != nil && policy.Attempts > keep {
		keep = policy.Attempts
	}
	if len(events) > keep {
		events = events[len(events)-keep:]
	}
	return &structs.RescheduleTracker{Events: events}
}

// copyTracker copies the history of an alloc replaced for another reason
// (lost, migrated, updated): the new alloc keeps it, adding nothing.
func copyTracker(prev *structs.Allocation) *structs.RescheduleTracker {
	if prev == nil || prev.RescheduleTracker == nil {
		return nil
	}
	return &structs.RescheduleTracker{Events: append([]*structs.RescheduleEvent(nil), prev.RescheduleTracker.Events...)}
}
