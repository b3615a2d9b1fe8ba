package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/berth-io/berth/api"
)

// csiVolumeEvent is the task event type of the client's csi_hook
// (client/allocrunner/csi_hook_events.go); its "step" detail is "mounted"
// once NodePublish returned.
const (
	csiVolumeEvent = "CSI Volume"
	csiStepMounted = "mounted"
	// taskTerminatedEvent is the task event the client records when the
	// driver reports the task's exit.
	taskTerminatedEvent = "Terminated"
)

func ptr[T any](v T) *T { return &v }

// benchVolume is a single-node-writer file-system volume of the hostpath
// plugin.
func benchVolume(id string) *api.CSIVolume {
	return &api.CSIVolume{
		ID: id, Name: id, PluginID: pluginID,
		RequestedCapabilities: []*api.CSIVolumeCapability{{
			AccessMode:     api.CSIVolumeAccessModeSingleNodeWriter,
			AttachmentMode: api.CSIVolumeAttachmentModeFilesystem,
		}},
	}
}

// pluginJob runs `berth plugin hostpath -mode node` as a raw_exec system
// job (examples/hostpath-plugin.hcl, with this binary and root).
func pluginJob(berth, root, nodeID string) *api.Job {
	return &api.Job{
		ID:   ptr(pluginJobID),
		Type: ptr(api.JobTypeSystem),
		TaskGroups: []*api.TaskGroup{{
			Name: ptr("hostpath"),
			Tasks: []*api.Task{{
				Name:   "plugin",
				Driver: "raw_exec",
				Config: map[string]any{
					"command": berth,
					"args":    []string{"plugin", "hostpath", "-mode", "node", "-root", root, "-node-id", nodeID},
				},
				CSIPluginConfig: &api.TaskCSIPluginConfig{ID: pluginID, Type: api.CSIPluginTypeNode, MountDir: "/csi"},
				Resources:       &api.Resources{CPU: ptr(100), MemoryMB: ptr(64)},
			}},
		}},
	}
}

// workJob is a service job of count allocs, each an exec task sleeping
// with the group's volume mounted at /data: source itself, or with
// perAlloc source[<alloc index>]. Small resources let 100 fit on a node;
// no restarts or reschedules, so a failure shows instead of looping.
func workJob(id, source string, count int, perAlloc bool) *api.Job {
	return &api.Job{
		ID:   ptr(id),
		Type: ptr(api.JobTypeService),
		TaskGroups: []*api.TaskGroup{{
			Name:  ptr("work"),
			Count: ptr(count),
			Volumes: map[string]*api.VolumeRequest{"data": {
				Type: api.VolumeTypeCSI, Source: source, PerAlloc: perAlloc,
				AccessMode:     string(api.CSIVolumeAccessModeSingleNodeWriter),
				AttachmentMode: string(api.CSIVolumeAttachmentModeFilesystem),
			}},
			RestartPolicy:    &api.RestartPolicy{Attempts: ptr(0), Mode: ptr(api.RestartPolicyModeFail)},
			ReschedulePolicy: &api.ReschedulePolicy{Attempts: ptr(0), Unlimited: ptr(false)},
			Tasks: []*api.Task{{
				Name:         workTask,
				Driver:       "exec",
				Config:       map[string]any{"command": "/bin/sleep", "args": []string{"3600"}},
				Resources:    &api.Resources{CPU: ptr(10), MemoryMB: ptr(16)},
				KillTimeout:  ptr(5 * time.Second),
				VolumeMounts: []*api.VolumeMount{{Volume: ptr("data"), Destination: ptr("/data")}},
			}},
		}},
	}
}

// mountedAt returns when the csi_hook reported the task's volume mounted:
// the time of its first "CSI Volume" event with step "mounted". It is
// pure.
func mountedAt(states map[string]*api.TaskState, task string) (time.Time, bool) {
	st := states[task]
	if st == nil {
		return time.Time{}, false
	}
	for _, e := range st.Events {
		if e != nil && e.Type == csiVolumeEvent && e.Details["step"] == csiStepMounted {
			return time.Unix(0, e.Time), true
		}
	}
	return time.Time{}, false
}

// maxEventsShown bounds the task events describeAlloc lists.
const maxEventsShown = 5

// describeAlloc says why an alloc is of interest: its status and the last
// events of one task. It is pure.
func describeAlloc(a *api.AllocationListStub, task string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "alloc %s (%s) is %s", a.ID, a.Name, a.ClientStatus)
	if a.ClientDescription != "" {
		fmt.Fprintf(&b, ": %s", a.ClientDescription)
	}
	if st := a.TaskStates[task]; st != nil && len(st.Events) > 0 {
		events := st.Events[max(0, len(st.Events)-maxEventsShown):]
		fmt.Fprintf(&b, "; last events of task %q:", task)
		for _, e := range events {
			if e == nil {
				continue
			}
			msg := e.DisplayMessage
			if msg == "" {
				msg = e.Message
			}
			fmt.Fprintf(&b, "\n    %s: %s", e.Type, msg)
		}
	}
	return b.String()
}
