package taskrunner

import (
	"fmt"
	"strconv"
	"time"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

// Task event types (the same strings as Nomad's, which the api package and
// UIs know).
const (
	EventReceived        = "Received"
	EventSetup           = "Task Setup"
	EventSetupFailure    = "Setup Failure"
	EventDriverFailure   = "Driver Failure"
	EventStarted         = "Started"
	EventTerminated      = "Terminated"
	EventKilling         = "Killing"
	EventKilled          = "Killed"
	EventRestarting      = "Restarting"
	EventNotRestarting   = "Not Restarting"
	EventSiblingFailed   = "Sibling Task Failed"
	EventRestartSignal   = "Restart Signaled"
	EventSignaling       = "Signaling"
	EventPluginHealthy   = "Plugin became healthy"
	EventPluginUnhealthy = "Plugin became unhealthy"
)

// maxEvents is how many events a task state keeps (the newest).
const maxEvents = 10

// NewEvent returns an event of type typ with msg, stamped now.
func NewEvent(typ, msg string) *structs.TaskEvent {
	return &structs.TaskEvent{Type: typ, Time: time.Now().UnixNano(), Message: msg, DisplayMessage: msg}
}

func withDetail(ev *structs.TaskEvent, k, v string) *structs.TaskEvent {
	if ev.Details == nil {
		ev.Details = map[string]string{}
	}
	ev.Details[k] = v
	return ev
}

func failing(ev *structs.TaskEvent) *structs.TaskEvent {
	ev.FailsTask = true
	return ev
}

func terminatedEvent(res *drivers.ExitResult) *structs.TaskEvent {
	msg := fmt.Sprintf("Exit Code: %d", res.ExitCode)
	if res.Signal != 0 {
		msg += fmt.Sprintf(", Signal: %d", res.Signal)
	}
	if res.Err != nil {
		msg = "Exit Code: unknown, " + res.Err.Error()
	}
	ev := NewEvent(EventTerminated, msg)
	ev.ExitCode = res.ExitCode
	ev.Signal = res.Signal
	return withDetail(ev, "exit_code", strconv.Itoa(res.ExitCode))
}

func restartingEvent(delay time.Duration, reason string) *structs.TaskEvent {
	ev := NewEvent(EventRestarting, fmt.Sprintf("Task restarting in %v: %s", delay, reason))
	return withDetail(ev, "start_delay", strconv.FormatInt(int64(delay), 10))
}

// KillingEvent is the event for a kill with the task's kill timeout;
// reason says why (alloc stopped, sibling failed, ...).
func KillingEvent(reason string) *structs.TaskEvent {
	return NewEvent(EventKilling, reason)
}
