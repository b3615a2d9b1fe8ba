package jobspec

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

const examplesDir = "../examples"

// exampleChecks says what each file at the top of examples/ must parse
// to. Every file there must have an entry, so a new example cannot go
// untested.
var exampleChecks = map[string]func(t *testing.T, path string){
	"hello.hcl": func(t *testing.T, path string) {
		j := mustParseJob(t, path)
		must.Eq(t, "hello", *j.ID)
		must.Eq(t, api.JobTypeService, *j.Type)
		tg := j.TaskGroups[0]
		must.Eq(t, 1, *tg.Count)
		task := tg.Tasks[0]
		must.Eq(t, "raw_exec", task.Driver)
		must.Eq[any](t, "/bin/sh", task.Config["command"])
		must.Eq[any](t, []interface{}{"-c", "echo hello from berth; while true; do sleep 5; done"}, task.Config["args"])
	},
	"hostpath-plugin.hcl": func(t *testing.T, path string) {
		j := mustParseJob(t, path)
		must.Eq(t, "hostpath", *j.ID)
		must.Eq(t, api.JobTypeSystem, *j.Type)
		must.Nil(t, j.TaskGroups[0].ReschedulePolicy)
		task := j.TaskGroups[0].Tasks[0]
		must.Eq(t, "raw_exec", task.Driver)
		must.Eq[any](t, []interface{}{"plugin", "hostpath", "-mode", "monolith", "-static-volumes", "-root", "/var/lib/berth/hostpath", "-node-id", "${node.unique.id}"}, task.Config["args"])
		must.Eq(t, api.TaskCSIPluginConfig{
			ID: "hostpath", Type: api.CSIPluginTypeMonolith, MountDir: "/csi",
			StagePublishBaseDir: "/local/csi", HealthTimeout: 30 * time.Second,
		}, *task.CSIPluginConfig)
	},
	"writer.hcl": func(t *testing.T, path string) {
		j := mustParseJob(t, path)
		must.Eq(t, "writer", *j.ID)
		tg := j.TaskGroups[0]
		must.Eq(t, &api.VolumeRequest{
			Name: "data", Type: "csi", Source: "data",
			AccessMode: "single-node-writer", AttachmentMode: "file-system",
		}, tg.Volumes["data"])
		task := tg.Tasks[0]
		must.Eq(t, "exec", task.Driver)
		must.StrContains(t, task.Config["args"].([]interface{})[1].(string), "/data/hello.txt")
		must.Eq(t, "data", *task.VolumeMounts[0].Volume)
		must.Eq(t, "/data", *task.VolumeMounts[0].Destination)
		must.False(t, *task.VolumeMounts[0].ReadOnly)
	},
	"reader.hcl": func(t *testing.T, path string) {
		j := mustParseJob(t, path)
		must.Eq(t, "reader", *j.ID)
		tg := j.TaskGroups[0]
		must.True(t, tg.Volumes["data"].ReadOnly)
		must.Eq(t, "single-node-reader-only", tg.Volumes["data"].AccessMode)
		task := tg.Tasks[0]
		must.Eq[any](t, []interface{}{"/data/hello.txt"}, task.Config["args"])
		must.True(t, *task.VolumeMounts[0].ReadOnly)
	},
	"volume.hcl":  checkExampleVolume,
	"volume.json": checkExampleVolume,
	"volume-grow.hcl": func(t *testing.T, path string) {
		v, err := ParseVolumeFile(path)
		must.NoError(t, err)
		must.Eq(t, "data", v.ID)
		must.Eq(t, int64(20<<20), v.RequestedCapacityMin)
	},
	"volume-modify.hcl": func(t *testing.T, path string) {
		v, err := ParseVolumeFile(path)
		must.NoError(t, err)
		must.Eq(t, "data", v.ID)
		must.Eq(t, int64(10<<20), v.RequestedCapacityMin)
		must.Eq(t, map[string]string{"note": "nightly backups"}, v.MutableParameters)
	},
	"volume-restore.hcl": func(t *testing.T, path string) {
		v, err := ParseVolumeFile(path)
		must.NoError(t, err)
		must.Eq(t, "data-restored", v.ID)
		must.Eq(t, "SNAPSHOT-ID", v.SnapshotID)
	},
}

func checkExampleVolume(t *testing.T, path string) {
	v, err := ParseVolumeFile(path)
	must.NoError(t, err)
	must.Eq(t, &api.CSIVolume{
		ID: "data", Name: "data", PluginID: "hostpath", RequestedCapacityMin: 10 << 20,
		RequestedCapabilities: []*api.CSIVolumeCapability{
			{AccessMode: api.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: api.CSIVolumeAttachmentModeFilesystem},
			{AccessMode: api.CSIVolumeAccessModeSingleNodeReader, AttachmentMode: api.CSIVolumeAttachmentModeFilesystem},
		},
	}, v)
}

func mustParseJob(t *testing.T, path string) *api.Job {
	t.Helper()
	j, err := ParseFile(path)
	must.NoError(t, err)
	return j
}

func TestExamples(t *testing.T) {
	entries, err := os.ReadDir(examplesDir)
	must.NoError(t, err)
	tested := 0
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		check, ok := exampleChecks[e.Name()]
		if !ok {
			t.Errorf("examples/%s has no entry in exampleChecks: add one", e.Name())
			continue
		}
		t.Run(e.Name(), func(t *testing.T) { check(t, filepath.Join(examplesDir, e.Name())) })
		tested++
	}
	must.Eq(t, len(exampleChecks), tested, must.Sprint("every exampleChecks entry names a file"))
}

func TestExamples_VolumeJSONMatchesHCL(t *testing.T) {
	h, err := ParseVolumeFile(filepath.Join(examplesDir, "volume.hcl"))
	must.NoError(t, err)
	j, err := ParseVolumeFile(filepath.Join(examplesDir, "volume.json"))
	must.NoError(t, err)
	must.Eq(t, h, j)
}

func TestVolumeInit(t *testing.T) {
	h, err := ParseVolume("volume.hcl", []byte(VolumeInit(false)))
	must.NoError(t, err)
	j, err := ParseVolume("volume.json", []byte(VolumeInit(true)))
	must.NoError(t, err)
	must.Eq(t, h, j)
	must.Eq(t, "data", h.ID)
	must.Eq(t, int64(10<<30), h.RequestedCapacityMin)
	must.Len(t, 2, h.RequestedCapabilities)
	// The JSON form is detected by its content too.
	j2, err := ParseVolume("volume", []byte(VolumeInit(true)))
	must.NoError(t, err)
	must.Eq(t, j, j2)
}
