package allocrunner

import (
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/berth-io/berth/client/allocrunner/taskrunner"
	"github.com/berth-io/berth/nomad/structs"
)

// EventCSIVolume is the task event type the csi_hook records: what it is
// doing with a volume the task mounts (waiting for the plugin, claim
// blocked by another claim, mounted, releasing). `berth alloc status`
// shows it among the task's events; Details carry volume, source, plugin,
// access_mode, attachment_mode, claim_mode, destination and step.
const EventCSIVolume = "CSI Volume"

// Steps of a volume as the csi_hook reports them in task event details.
const (
	csiStepWaitingForPlugin = "waiting-for-plugin"
	csiStepClaimBlocked     = "claim-blocked"
	csiStepMounted          = "mounted"
	csiStepReused           = "reused"
	// csiStepReleasePending: the release has not finished; the event
	// says why (the node plugin is not running, NodeUnpublish failed, the
	// servers have not accepted the unpublish yet).
	csiStepReleasePending = "release-pending"
	// csiStepReleased: the node side is undone (NodeUnpublish, and
	// NodeUnstage for the last user, succeeded) and the servers were told.
	csiStepReleased = "released"
	// csiStepAbnormal: the node plugin says the volume's condition is
	// abnormal (its message is in the event).
	csiStepAbnormal = "abnormal"
)

// CSIEvents lets the csi_hook, an alloc hook without tasks of its own,
// record task events on its alloc's tasks. The client registers each task
// of an alloc with CSI volumes (AddTask, from a task hook factory, which
// runs before alloc hook factories); the csi_hook forgets the alloc on
// Shutdown and Destroy. Safe for concurrent use.
type CSIEvents struct {
	// lock guards tasks.
	lock sync.Mutex
	// tasks holds, by alloc ID and task name, where to record events.
	tasks map[string]map[string]taskrunner.Lifecycle
}

// NewCSIEvents returns an empty set.
func NewCSIEvents() *CSIEvents {
	return &CSIEvents{tasks: map[string]map[string]taskrunner.Lifecycle{}}
}

// AddTask registers a task's lifecycle for events about its alloc.
func (e *CSIEvents) AddTask(allocID, task string, lc taskrunner.Lifecycle) {
	if e == nil || lc == nil {
		return
	}
	e.lock.Lock()
	defer e.lock.Unlock()
	m, ok := e.tasks[allocID]
	if !ok {
		m = map[string]taskrunner.Lifecycle{}
		e.tasks[allocID] = m
	}
	m[task] = lc
}

func (e *CSIEvents) forget(allocID string) {
	if e == nil {
		return
	}
	e.lock.Lock()
	defer e.lock.Unlock()
	delete(e.tasks, allocID)
}

// emit records ev on a task of an alloc, if that task is registered.
func (e *CSIEvents) emit(allocID, task string, ev *structs.TaskEvent) {
	if e == nil {
		return
	}
	e.lock.Lock()
	lc := e.tasks[allocID][task]
	e.lock.Unlock()
	if lc != nil {
		lc.EmitEvent(ev)
	}
}

// EmitAll records ev on every registered task of an alloc.
func (e *CSIEvents) EmitAll(allocID string, ev *structs.TaskEvent) {
	if e == nil {
		return
	}
	e.lock.Lock()
	lcs := make([]taskrunner.Lifecycle, 0, len(e.tasks[allocID]))
	for _, lc := range e.tasks[allocID] {
		lcs = append(lcs, lc)
	}
	e.lock.Unlock()
	for _, lc := range lcs {
		cp := *ev
		cp.Details = maps.Clone(ev.Details)
		lc.EmitEvent(&cp)
	}
}

// VolumeAbnormalEvent is the task event for a volume whose node plugin
// reports its condition abnormal (NodeGetVolumeStats, VOLUME_CONDITION).
func VolumeAbnormalEvent(volumeID, message string) *structs.TaskEvent {
	text := fmt.Sprintf("CSI volume %q is abnormal: %s", volumeID, message)
	return &structs.TaskEvent{
		Type: EventCSIVolume, Time: time.Now().UnixNano(), Message: text, DisplayMessage: text,
		Details: map[string]string{"volume": volumeID, "step": csiStepAbnormal, "message": message},
	}
}
