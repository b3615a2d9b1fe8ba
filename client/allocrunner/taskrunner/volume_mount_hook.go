package taskrunner

import (
	"context"
	"errors"
	"fmt"

	"github.com/berth-io/berth/client/allocrunner/shared"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

// volumeMountHook turns the task's volume_mount blocks of CSI volumes into
// driver mounts of the paths the alloc's csi_hook published them at.
type volumeMountHook struct {
	res *shared.HookResources
}

// NewVolumeMountHook is the HookFactory of the volume_mount hook.
func NewVolumeMountHook(hc *HookConfig) Hook {
	return &volumeMountHook{res: hc.Resources}
}

func (*volumeMountHook) Name() string { return "volume_mount" }

func (h *volumeMountHook) Prestart(_ context.Context, req *PrestartRequest, resp *PrestartResponse) error {
	if len(req.Task.VolumeMounts) == 0 || req.Alloc.Job == nil {
		return nil
	}
	tg := req.Alloc.Job.LookupTaskGroup(req.Alloc.TaskGroup)
	if tg == nil {
		return nil
	}
	var csiMounts map[string]*shared.CSIMount
	if h.res != nil {
		csiMounts = h.res.GetCSIMounts()
	}
	mounts, err := volumeMounts(req.Task, tg.Volumes, csiMounts)
	if err != nil {
		return err
	}
	resp.Mounts = append(resp.Mounts, mounts...)
	return nil
}

// volumeMounts maps a task's volume_mount blocks of CSI volumes to driver
// mounts. It is pure.
func volumeMounts(task *structs.Task, volumes map[string]*structs.VolumeRequest, csiMounts map[string]*shared.CSIMount) ([]*drivers.MountConfig, error) {
	var (
		out  []*drivers.MountConfig
		errs []error
	)
	for _, vm := range task.VolumeMounts {
		if vm == nil {
			continue
		}
		req := volumes[vm.Volume]
		if req == nil || req.Type != structs.VolumeTypeCSI {
			continue
		}
		m := csiMounts[vm.Volume]
		if m == nil {
			errs = append(errs, fmt.Errorf("volume %q of task %q is not mounted on this node (the alloc's csi hook did not publish it)", vm.Volume, task.Name))
			continue
		}
		prop := vm.PropagationMode
		if prop == "" {
			prop = "private"
		}
		out = append(out, &drivers.MountConfig{
			HostPath:        m.Source,
			TaskPath:        vm.Destination,
			Readonly:        vm.ReadOnly || m.ReadOnly || req.ReadOnly,
			PropagationMode: prop,
		})
	}
	return out, errors.Join(errs...)
}
