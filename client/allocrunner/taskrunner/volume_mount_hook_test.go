package taskrunner

import (
	"context"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/client/allocrunner/shared"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

func TestVolumeMounts(t *testing.T) {
	volumes := map[string]*structs.VolumeRequest{
		"data": {Type: structs.VolumeTypeCSI, Source: "db"},
		"ro":   {Type: structs.VolumeTypeCSI, Source: "cfg", ReadOnly: true},
		"host": {Type: structs.VolumeTypeHost, Source: "scratch"},
	}
	mounts := map[string]*shared.CSIMount{
		"data": {VolumeID: "db", Source: "/csi/hp/per-alloc/a/db/rw-file-system-single-node-writer"},
		"ro":   {VolumeID: "cfg", Source: "/csi/hp/per-alloc/a/cfg/ro-file-system-multi-node-reader-only", ReadOnly: true},
	}
	cases := []struct {
		name    string
		mounts  []*structs.VolumeMount
		want    []*drivers.MountConfig
		wantErr string
	}{
		{name: "none"},
		{name: "a csi volume, private by default",
			mounts: []*structs.VolumeMount{{Volume: "data", Destination: "/srv"}},
			want:   []*drivers.MountConfig{{HostPath: mounts["data"].Source, TaskPath: "/srv", PropagationMode: "private"}}},
		{name: "read-only and propagation from the task",
			mounts: []*structs.VolumeMount{{Volume: "data", Destination: "/srv", ReadOnly: true, PropagationMode: "host-to-task"}},
			want:   []*drivers.MountConfig{{HostPath: mounts["data"].Source, TaskPath: "/srv", Readonly: true, PropagationMode: "host-to-task"}}},
		{name: "read-only volume stays read-only",
			mounts: []*structs.VolumeMount{{Volume: "ro", Destination: "/etc/app"}},
			want:   []*drivers.MountConfig{{HostPath: mounts["ro"].Source, TaskPath: "/etc/app", Readonly: true, PropagationMode: "private"}}},
		{name: "host volumes are not this hook's", mounts: []*structs.VolumeMount{{Volume: "host", Destination: "/tmp/x"}}},
		{name: "a csi volume that was not published",
			mounts:  []*structs.VolumeMount{{Volume: "data", Destination: "/srv"}},
			wantErr: `volume "data" of task "web" is not mounted on this node`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := mounts
			if tc.wantErr != "" {
				m = nil
			}
			got, err := volumeMounts(&structs.Task{Name: "web", VolumeMounts: tc.mounts}, volumes, m)
			if tc.wantErr != "" {
				must.ErrorContains(t, err, tc.wantErr)
				return
			}
			must.NoError(t, err)
			must.Eq(t, tc.want, got)
		})
	}
}

func TestVolumeMountHook_ReadsHookResources(t *testing.T) {
	res := shared.NewHookResources()
	res.SetCSIMounts(map[string]*shared.CSIMount{"data": {Source: "/host/vol"}})
	task := &structs.Task{Name: "web", VolumeMounts: []*structs.VolumeMount{{Volume: "data", Destination: "/srv"}}}
	alloc := &structs.Allocation{TaskGroup: "g", Job: &structs.Job{TaskGroups: []*structs.TaskGroup{{
		Name: "g", Tasks: []*structs.Task{task},
		Volumes: map[string]*structs.VolumeRequest{"data": {Type: structs.VolumeTypeCSI, Source: "db"}},
	}}}}
	h := NewVolumeMountHook(&HookConfig{Resources: res}).(PrestartHook)
	var resp PrestartResponse
	must.NoError(t, h.Prestart(context.Background(), &PrestartRequest{Alloc: alloc, Task: task}, &resp))
	must.Eq(t, []*drivers.MountConfig{{HostPath: "/host/vol", TaskPath: "/srv", PropagationMode: "private"}}, resp.Mounts)
}
