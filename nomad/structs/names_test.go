package structs

import (
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

func TestValidatePathElement(t *testing.T) {
	cases := []struct {
		name string
		in   string
		err  string
	}{
		{name: "plain", in: "web-1.api_v2[0]"},
		{name: "spaces and unicode", in: "my job ü"},
		{name: "empty", in: "", err: "missing task name"},
		{name: "slash", in: "a/b", err: "must not contain / or \\"},
		{name: "dot dot slash", in: "../x", err: "must not contain / or \\"},
		{name: "backslash", in: `a\b`, err: "must not contain / or \\"},
		{name: "dot dot", in: "..", err: "names a directory"},
		{name: "dot", in: ".", err: "names a directory"},
		{name: "newline", in: "a\nb", err: "control characters"},
		{name: "nul", in: "a\x00b", err: "control characters"},
		{name: "invalid utf-8", in: "a\xffb", err: "invalid UTF-8"},
		{name: "long", in: strings.Repeat("x", MaxNameLength+1), err: "over the limit of 128"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidatePathElement("task name", tc.in)
			if tc.err == "" {
				must.NoError(t, err)
			} else {
				must.ErrorContains(t, err, tc.err)
			}
		})
	}
}

func validJob() *Job {
	return &Job{
		ID: "j", Name: "j", Namespace: "default", Type: JobTypeService, Priority: 50, Datacenters: []string{"dc1"},
		TaskGroups: []*TaskGroup{{
			Name: "g", Count: 1,
			RestartPolicy:    &RestartPolicy{Attempts: 2, Interval: time.Minute, Delay: time.Second, Mode: RestartPolicyModeFail},
			ReschedulePolicy: &ReschedulePolicy{DelayFunction: "exponential"},
			Tasks:            []*Task{{Name: "t", Driver: "exec", Resources: &Resources{CPU: 100, MemoryMB: 64}}},
		}},
	}
}

// TestJobValidate_Hygiene: each bad field is refused with a message
// naming it; the valid job passes, so each case fails for its own field.
func TestJobValidate_Hygiene(t *testing.T) {
	must.NoError(t, validJob().Validate())
	cases := []struct {
		name   string
		mutate func(j *Job)
		err    string
	}{
		{"job ID with slash", func(j *Job) { j.ID = "a/b" }, `job ID "a/b" must not contain /`},
		{"task ../x", func(j *Job) { j.TaskGroups[0].Tasks[0].Name = "../x" }, `task name "../x" must not contain /`},
		{"group ..", func(j *Job) { j.TaskGroups[0].Name = ".." }, `group name ".." is not allowed`},
		{"volume name", func(j *Job) {
			j.TaskGroups[0].Volumes = map[string]*VolumeRequest{"a/b": {Type: VolumeTypeHost, Source: "s"}}
		}, `volume name "a/b"`},
		{"negative kill timeout", func(j *Job) { j.TaskGroups[0].Tasks[0].KillTimeout = -time.Second }, "kill_timeout -1s is negative"},
		{"negative cpu", func(j *Job) { j.TaskGroups[0].Tasks[0].Resources.CPU = -1 }, "cpu -1 is negative"},
		{"negative memory", func(j *Job) { j.TaskGroups[0].Tasks[0].Resources.MemoryMB = -5 }, "memory -5 is negative"},
		{"restart mode", func(j *Job) { j.TaskGroups[0].RestartPolicy.Mode = "bogus" }, `restart: mode "bogus" is not one of fail, delay`},
		{"restart delay", func(j *Job) { j.TaskGroups[0].RestartPolicy.Delay = -1 }, "restart: delay -1ns is negative"},
		{"reschedule function", func(j *Job) { j.TaskGroups[0].ReschedulePolicy.DelayFunction = "linear" }, `delay_function "linear" is not one of`},
		{"reschedule attempts", func(j *Job) { j.TaskGroups[0].ReschedulePolicy.Attempts = -1 }, "reschedule: attempts -1 is negative"},
		{"bad regexp", func(j *Job) {
			j.TaskGroups[0].Tasks[0].Constraints = []*Constraint{{LTarget: "${attr.kernel.name}", Operand: "regexp", RTarget: "(["}}
		}, `constraint ${attr.kernel.name} regexp "(["`},
		{"count cap", func(j *Job) { j.TaskGroups[0].Count = MaxGroupCount + 1 }, "over the limit of 10000 per group"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := validJob()
			tc.mutate(j)
			err := j.Validate()
			must.ErrorIs(t, err, ErrInvalid)
			must.ErrorContains(t, err, tc.err)
		})
	}
}

func TestCSIVolumeValidate_Hygiene(t *testing.T) {
	vol := func() *CSIVolume {
		return &CSIVolume{ID: "v", PluginID: "p", Namespace: "default", RequestedCapabilities: []*CSIVolumeCapability{{
			AccessMode: CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: CSIVolumeAttachmentModeFilesystem,
		}}}
	}
	must.NoError(t, vol().Validate())
	v := vol()
	v.ID = "../v"
	must.ErrorContains(t, v.Validate(), `volume ID "../v" must not contain /`)
	v = vol()
	v.RequestedCapacityMin = -1
	must.ErrorContains(t, v.Validate(), "must not be negative")
	v = vol()
	v.Context = map[string]string{"k": strings.Repeat("x", MaxMapBytes)}
	must.ErrorContains(t, v.Validate(), "context are 65537 bytes, over the limit of 65536")
}
