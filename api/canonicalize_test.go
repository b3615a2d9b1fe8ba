package api

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

func TestJobCanonicalize_Defaults(t *testing.T) {
	j := &Job{
		ID: pointerOf("web"),
		TaskGroups: []*TaskGroup{{
			Name:    pointerOf("web"),
			Volumes: map[string]*VolumeRequest{"data": {Type: "csi", Source: "data"}},
			Tasks: []*Task{{
				Name:            "server",
				Driver:          "raw_exec",
				VolumeMounts:    []*VolumeMount{{Volume: pointerOf("data"), Destination: pointerOf("/data")}},
				CSIPluginConfig: &TaskCSIPluginConfig{ID: "p", Type: CSIPluginTypeNode},
			}},
		}},
	}
	j.Canonicalize()

	must.Eq(t, "web", *j.Name)
	must.Eq(t, "default", *j.Namespace)
	must.Eq(t, "global", *j.Region)
	must.Eq(t, "service", *j.Type)
	must.Eq(t, 50, *j.Priority)
	must.Eq(t, []string{"*"}, j.Datacenters)
	must.False(t, *j.Stop)
	must.Eq(t, uint64(0), *j.Version)

	tg := j.TaskGroups[0]
	must.Eq(t, 1, *tg.Count)
	must.Eq(t, "data", tg.Volumes["data"].Name)

	task := tg.Tasks[0]
	must.Eq(t, 5*time.Second, *task.KillTimeout)
	must.Eq(t, 100, *task.Resources.CPU)
	must.Eq(t, 300, *task.Resources.MemoryMB)
	must.Eq(t, VolumeMount{
		Volume: pointerOf("data"), Destination: pointerOf("/data"), ReadOnly: pointerOf(false),
		PropagationMode: pointerOf("private"), SELinuxLabel: pointerOf(""),
	}, *task.VolumeMounts[0])
	must.Eq(t, TaskCSIPluginConfig{
		ID: "p", Type: CSIPluginTypeNode, MountDir: "/csi",
		StagePublishBaseDir: "/local/csi", HealthTimeout: 30 * time.Second,
	}, *task.CSIPluginConfig)
}

func TestJobCanonicalize_PoliciesByType(t *testing.T) {
	service := &RestartPolicy{
		Attempts: pointerOf(2), Interval: durationPtr(30 * time.Minute),
		Delay: durationPtr(15 * time.Second), Mode: pointerOf("fail"),
	}
	batch := &RestartPolicy{
		Attempts: pointerOf(3), Interval: durationPtr(24 * time.Hour),
		Delay: durationPtr(15 * time.Second), Mode: pointerOf("fail"),
	}
	cases := []struct {
		jobType    string
		restart    *RestartPolicy
		reschedule *ReschedulePolicy
	}{
		{
			jobType: "service",
			restart: service,
			reschedule: &ReschedulePolicy{
				Attempts: pointerOf(0), Interval: durationPtr(0), Delay: durationPtr(30 * time.Second),
				DelayFunction: pointerOf("exponential"), MaxDelay: durationPtr(time.Hour), Unlimited: pointerOf(true),
			},
		},
		{
			jobType: "batch",
			restart: batch,
			reschedule: &ReschedulePolicy{
				Attempts: pointerOf(1), Interval: durationPtr(24 * time.Hour), Delay: durationPtr(5 * time.Second),
				DelayFunction: pointerOf("constant"), MaxDelay: durationPtr(0), Unlimited: pointerOf(false),
			},
		},
		{jobType: "system", restart: service, reschedule: nil},
	}
	for _, tc := range cases {
		t.Run(tc.jobType, func(t *testing.T) {
			j := &Job{ID: pointerOf("j"), Type: pointerOf(tc.jobType), TaskGroups: []*TaskGroup{{Name: pointerOf("g")}}}
			j.Canonicalize()
			must.Eq(t, tc.restart, j.TaskGroups[0].RestartPolicy)
			must.Eq(t, tc.reschedule, j.TaskGroups[0].ReschedulePolicy)
		})
	}
}

func TestJobCanonicalize_KeepsWhatIsSet(t *testing.T) {
	j := &Job{
		ID: pointerOf("j"), Name: pointerOf("name"), Namespace: pointerOf("ns"), Type: pointerOf("batch"),
		Priority: pointerOf(70), Datacenters: []string{"dc1"},
		Reschedule: &ReschedulePolicy{Attempts: pointerOf(4), Interval: durationPtr(time.Hour)},
		TaskGroups: []*TaskGroup{{
			Name:             pointerOf("g"),
			Count:            pointerOf(0),
			RestartPolicy:    &RestartPolicy{Attempts: pointerOf(9), Mode: pointerOf("delay")},
			ReschedulePolicy: &ReschedulePolicy{Attempts: pointerOf(7)},
			Tasks: []*Task{{
				Name: "t", KillTimeout: durationPtr(time.Minute),
				Resources:       &Resources{CPU: pointerOf(500)},
				CSIPluginConfig: &TaskCSIPluginConfig{MountDir: "/sock", HealthTimeout: time.Minute},
			}},
		}},
	}
	j.Canonicalize()
	must.Eq(t, "name", *j.Name)
	must.Eq(t, "ns", *j.Namespace)
	must.Eq(t, 70, *j.Priority)
	must.Eq(t, []string{"dc1"}, j.Datacenters)
	tg := j.TaskGroups[0]
	must.Eq(t, 0, *tg.Count)
	must.Eq(t, 9, *tg.RestartPolicy.Attempts)
	must.Eq(t, "delay", *tg.RestartPolicy.Mode)
	must.Eq(t, 24*time.Hour, *tg.RestartPolicy.Interval, must.Sprint("unset fields keep the batch default"))
	must.Eq(t, 7, *tg.ReschedulePolicy.Attempts, must.Sprint("the group overrides the job"))
	must.Eq(t, time.Hour, *tg.ReschedulePolicy.Interval, must.Sprint("the job overrides the default"))
	must.Eq(t, "constant", *tg.ReschedulePolicy.DelayFunction)
	task := tg.Tasks[0]
	must.Eq(t, time.Minute, *task.KillTimeout)
	must.Eq(t, 500, *task.Resources.CPU)
	must.Eq(t, 300, *task.Resources.MemoryMB)
	must.Eq(t, "/sock", task.CSIPluginConfig.MountDir)
	must.Eq(t, time.Minute, task.CSIPluginConfig.HealthTimeout)
}

// A system job gets a reschedule policy only when one is given.
func TestJobCanonicalize_SystemReschedule(t *testing.T) {
	j := &Job{ID: pointerOf("s"), Type: pointerOf("system"),
		TaskGroups: []*TaskGroup{{ReschedulePolicy: &ReschedulePolicy{Attempts: pointerOf(2)}}}}
	j.Canonicalize()
	must.Eq(t, 2, *j.TaskGroups[0].ReschedulePolicy.Attempts)
	must.Eq(t, "", *j.TaskGroups[0].ReschedulePolicy.DelayFunction)
}

// TestJobCanonicalize_NomadClientBody decodes the body Nomad's own client
// sends for an uncanonicalized job (nulls everywhere, fields Berth does not
// model) and canonicalizes it.
func TestJobCanonicalize_NomadClientBody(t *testing.T) {
	src, err := os.ReadFile("testdata/nomad_job_register.json")
	must.NoError(t, err)
	var req JobRegisterRequest
	must.NoError(t, json.Unmarshal(src, &req))
	req.Job.Canonicalize()

	j := req.Job
	must.Eq(t, "reader", *j.ID)
	must.Eq(t, "default", *j.Namespace)
	must.Eq(t, 50, *j.Priority)
	must.Eq(t, []string{"*"}, j.Datacenters)
	tg := j.TaskGroups[0]
	must.Eq(t, 1, *tg.Count)
	must.Eq(t, 5, *tg.RestartPolicy.Attempts)
	must.Eq(t, 30*time.Minute, *tg.RestartPolicy.Interval)
	must.Eq(t, "exponential", *tg.ReschedulePolicy.DelayFunction)
	must.Eq(t, CSIVolumeAccessModeSingleNodeReader, CSIVolumeAccessMode(tg.Volumes["data"].AccessMode))
	vm := tg.Tasks[0].VolumeMounts[0]
	must.True(t, *vm.ReadOnly)
	must.Eq(t, "private", *vm.PropagationMode)
	must.Eq(t, 5*time.Second, *tg.Tasks[0].KillTimeout)
	must.Eq(t, []any{"/data/hello.txt"}, tg.Tasks[0].Config["args"].([]any))
}

// Nil entries are left for the server to reject, never dereferenced.
func TestJobCanonicalize_NilEntries(t *testing.T) {
	j := &Job{TaskGroups: []*TaskGroup{nil, {
		Volumes: map[string]*VolumeRequest{"x": nil},
		Tasks:   []*Task{nil, {VolumeMounts: []*VolumeMount{nil}}},
	}}}
	j.Canonicalize()
	must.Nil(t, j.TaskGroups[0])
	must.Nil(t, j.TaskGroups[1].Tasks[0])
	must.Eq(t, "", *j.ID)
	must.Nil(t, j.LookupTaskGroup("nope"))
}

func TestAccessModes(t *testing.T) {
	must.True(t, CSIVolumeAccessModeSingleNodeWriter.Valid())
	must.True(t, CSIVolumeAccessModeSingleNodeMultiWriter.SingleNode())
	must.False(t, CSIVolumeAccessModeMultiNodeReader.SingleNode())
	must.True(t, CSIVolumeAccessModeMultiNodeReader.ReadOnly())
	must.False(t, CSIVolumeAccessMode("single-node-writter").Valid())
	must.False(t, CSIVolumeAccessModeUnknown.Valid())
	must.True(t, CSIVolumeAttachmentModeFilesystem.Valid())
	must.False(t, CSIVolumeAttachmentMode("filesystem").Valid())
}
