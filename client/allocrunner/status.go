package allocrunner

import "github.com/berth-io/berth/nomad/structs"

// ClientStatus derives an alloc's client status and its description from
// its task states. It is pure.
//
//	any task failed         ─► failed
//	else any task running   ─► running
//	else any task pending   ─► pending
//	else (all dead)         ─► complete
func ClientStatus(states map[string]*structs.TaskState) (status, description string) {
	var failed, running, pending, dead int
	for _, ts := range states {
		switch {
		case ts == nil:
			pending++
		case ts.Failed:
			failed++
		case ts.State == structs.TaskStateRunning:
			running++
		case ts.State == structs.TaskStateDead:
			dead++
		default:
			pending++
		}
	}
	switch {
	case failed > 0:
		return structs.AllocClientStatusFailed, "Failed tasks"
	case running > 0:
		return structs.AllocClientStatusRunning, "Tasks are running"
	case pending > 0 || dead == 0:
		return structs.AllocClientStatusPending, "No tasks have started"
	default:
		return structs.AllocClientStatusComplete, "All tasks have completed"
	}
}
