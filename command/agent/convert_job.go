package agent

import (
	"maps"
	"slices"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/nomad/structs"
)

// Jobs, both ways.

// ---- jobs: api → structs ------------------------------------------------

// apiJobToStructs converts a canonicalized api.Job. Nil entries in lists
// and maps become empty values, so validation names what is missing
// instead of the entry silently disappearing.
func apiJobToStructs(j *api.Job) *structs.Job {
	out := &structs.Job{
		ID:          deref(j.ID),
		Name:        deref(j.Name),
		Namespace:   deref(j.Namespace),
		Type:        deref(j.Type),
		Priority:    deref(j.Priority),
		Datacenters: slices.Clone(j.Datacenters),
		Meta:        maps.Clone(j.Meta),
		Constraints: apiConstraintsToStructs(j.Constraints),
		Stop:        deref(j.Stop),
	}
	for _, tg := range j.TaskGroups {
		out.TaskGroups = append(out.TaskGroups, apiGroupToStructs(tg))
	}
	return out
}

// apiConstraintsToStructs turns a nil entry into an empty constraint,
// which validation names. The two types have the same fields (strings).
func apiConstraintsToStructs(cs []*api.Constraint) []*structs.Constraint {
	return each(cs, func(c *api.Constraint) *structs.Constraint { return ptr(structs.Constraint(deref(c))) })
}

func apiGroupToStructs(tg *api.TaskGroup) *structs.TaskGroup {
	if tg == nil {
		return &structs.TaskGroup{}
	}
	out := &structs.TaskGroup{
		Name:        deref(tg.Name),
		Count:       deref(tg.Count),
		Constraints: apiConstraintsToStructs(tg.Constraints),
		Meta:        maps.Clone(tg.Meta),
	}
	if rp := tg.RestartPolicy; rp != nil {
		out.RestartPolicy = &structs.RestartPolicy{
			Attempts: deref(rp.Attempts), Interval: deref(rp.Interval), Delay: deref(rp.Delay), Mode: deref(rp.Mode),
		}
	}
	if rp := tg.ReschedulePolicy; rp != nil {
		out.ReschedulePolicy = &structs.ReschedulePolicy{
			Attempts: deref(rp.Attempts), Interval: deref(rp.Interval), Delay: deref(rp.Delay),
			DelayFunction: deref(rp.DelayFunction), MaxDelay: deref(rp.MaxDelay), Unlimited: deref(rp.Unlimited),
		}
	}
	if tg.Volumes != nil {
		out.Volumes = make(map[string]*structs.VolumeRequest, len(tg.Volumes))
		for name, v := range tg.Volumes {
			if v == nil {
				out.Volumes[name] = &structs.VolumeRequest{Name: name}
				continue
			}
			out.Volumes[name] = &structs.VolumeRequest{
				Name: v.Name, Type: v.Type, Source: v.Source, ReadOnly: v.ReadOnly,
				AccessMode:     structs.CSIVolumeAccessMode(v.AccessMode),
				AttachmentMode: structs.CSIVolumeAttachmentMode(v.AttachmentMode),
				MountOptions:   apiMountOptionsToStructs(v.MountOptions),
				PerAlloc:       v.PerAlloc,
			}
		}
	}
	for _, t := range tg.Tasks {
		out.Tasks = append(out.Tasks, apiTaskToStructs(t))
	}
	return out
}

func apiTaskToStructs(t *api.Task) *structs.Task {
	if t == nil {
		return &structs.Task{}
	}
	out := &structs.Task{
		Name:        t.Name,
		Driver:      t.Driver,
		Config:      maps.Clone(t.Config),
		Env:         maps.Clone(t.Env),
		KillTimeout: deref(t.KillTimeout),
		User:        t.User,
		Constraints: apiConstraintsToStructs(t.Constraints),
		Meta:        maps.Clone(t.Meta),
	}
	if r := t.Resources; r != nil {
		out.Resources = &structs.Resources{CPU: int64(deref(r.CPU)), MemoryMB: int64(deref(r.MemoryMB))}
	}
	for _, m := range t.VolumeMounts {
		if m == nil {
			m = &api.VolumeMount{}
		}
		out.VolumeMounts = append(out.VolumeMounts, &structs.VolumeMount{
			Volume: deref(m.Volume), Destination: deref(m.Destination),
			ReadOnly: deref(m.ReadOnly), PropagationMode: deref(m.PropagationMode),
		})
	}
	if lc := t.LogConfig; lc != nil {
		out.LogConfig = &structs.LogConfig{MaxFiles: deref(lc.MaxFiles), MaxFileSizeMB: deref(lc.MaxFileSizeMB)}
	}
	if c := t.CSIPluginConfig; c != nil {
		out.CSIPluginConfig = &structs.TaskCSIPluginConfig{
			ID: c.ID, Type: structs.CSIPluginType(c.Type), MountDir: c.MountDir,
			StagePublishBaseDir: c.StagePublishBaseDir, HealthTimeout: c.HealthTimeout,
		}
	}
	return out
}

func apiMountOptionsToStructs(o *api.CSIMountOptions) *structs.CSIMountOptions {
	if o == nil {
		return nil
	}
	return &structs.CSIMountOptions{FSType: o.FSType, MountFlags: slices.Clone(o.MountFlags)}
}

// ---- jobs: structs → api ------------------------------------------------

func jobToAPI(j *structs.Job, region string) *api.Job {
	if j == nil {
		return nil
	}
	out := &api.Job{
		Region:            ptr(region),
		Namespace:         ptr(j.Namespace),
		ID:                ptr(j.ID),
		Name:              ptr(j.Name),
		Type:              ptr(j.Type),
		Priority:          ptr(j.Priority),
		Datacenters:       slices.Clone(j.Datacenters),
		Constraints:       constraintsToAPI(j.Constraints),
		Meta:              maps.Clone(j.Meta),
		Stop:              ptr(j.Stop),
		ParentID:          ptr(""),
		Status:            ptr(j.Status),
		StatusDescription: ptr(""),
		Stable:            ptr(j.Stable),
		Version:           ptr(j.Version),
		SubmitTime:        ptr(j.SubmitTime),
		CreateIndex:       ptr(j.CreateIndex),
		ModifyIndex:       ptr(j.ModifyIndex),
		JobModifyIndex:    ptr(j.JobModifyIndex),
	}
	for _, tg := range j.TaskGroups {
		out.TaskGroups = append(out.TaskGroups, groupToAPI(tg))
	}
	return out
}

func constraintsToAPI(cs []*structs.Constraint) []*api.Constraint {
	return each(cs, func(c *structs.Constraint) *api.Constraint { return ptr(api.Constraint(*c)) })
}

func groupToAPI(tg *structs.TaskGroup) *api.TaskGroup {
	out := &api.TaskGroup{
		Name:        ptr(tg.Name),
		Count:       ptr(tg.Count),
		Constraints: constraintsToAPI(tg.Constraints),
		Meta:        maps.Clone(tg.Meta),
	}
	if rp := tg.RestartPolicy; rp != nil {
		out.RestartPolicy = &api.RestartPolicy{
			Attempts: ptr(rp.Attempts), Interval: ptr(rp.Interval), Delay: ptr(rp.Delay), Mode: ptr(rp.Mode),
		}
	}
	if rp := tg.ReschedulePolicy; rp != nil {
		out.ReschedulePolicy = &api.ReschedulePolicy{
			Attempts: ptr(rp.Attempts), Interval: ptr(rp.Interval), Delay: ptr(rp.Delay),
			DelayFunction: ptr(rp.DelayFunction), MaxDelay: ptr(rp.MaxDelay), Unlimited: ptr(rp.Unlimited),
		}
	}
	if tg.Volumes != nil {
		out.Volumes = make(map[string]*api.VolumeRequest, len(tg.Volumes))
		for name, v := range tg.Volumes {
			out.Volumes[name] = &api.VolumeRequest{
				Name: v.Name, Type: v.Type, Source: v.Source, ReadOnly: v.ReadOnly,
				AccessMode: string(v.AccessMode), AttachmentMode: string(v.AttachmentMode),
				MountOptions: mountOptionsToAPI(v.MountOptions), PerAlloc: v.PerAlloc,
			}
		}
	}
	for _, t := range tg.Tasks {
		out.Tasks = append(out.Tasks, taskToAPI(t))
	}
	return out
}

func taskToAPI(t *structs.Task) *api.Task {
	out := &api.Task{
		Name:        t.Name,
		Driver:      t.Driver,
		Config:      maps.Clone(t.Config),
		Env:         maps.Clone(t.Env),
		Constraints: constraintsToAPI(t.Constraints),
		Meta:        maps.Clone(t.Meta),
		KillTimeout: ptr(t.KillTimeout),
		User:        t.User,
	}
	if r := t.Resources; r != nil {
		out.Resources = &api.Resources{CPU: ptr(int(r.CPU)), MemoryMB: ptr(int(r.MemoryMB))}
	}
	for _, m := range t.VolumeMounts {
		out.VolumeMounts = append(out.VolumeMounts, &api.VolumeMount{
			Volume: ptr(m.Volume), Destination: ptr(m.Destination), ReadOnly: ptr(m.ReadOnly),
			PropagationMode: ptr(m.PropagationMode), SELinuxLabel: ptr(""),
		})
	}
	if lc := t.LogConfig; lc != nil {
		out.LogConfig = &api.LogConfig{MaxFiles: ptr(lc.MaxFiles), MaxFileSizeMB: ptr(lc.MaxFileSizeMB)}
	}
	if c := t.CSIPluginConfig; c != nil {
		out.CSIPluginConfig = &api.TaskCSIPluginConfig{
			ID: c.ID, Type: api.CSIPluginType(c.Type), MountDir: c.MountDir,
			StagePublishBaseDir: c.StagePublishBaseDir, HealthTimeout: c.HealthTimeout,
		}
	}
	return out
}

// mountOptionsToAPI copies mount options as they are; the servers redact
// the flags (structs.CSIVolume.Sanitize) before volumes leave them.
func mountOptionsToAPI(o *structs.CSIMountOptions) *api.CSIMountOptions {
	if o == nil {
		return nil
	}
	return &api.CSIMountOptions{FSType: o.FSType, MountFlags: slices.Clone(o.MountFlags)}
}

func jobStubToAPI(j *structs.JobListStub) *api.JobListStub {
	return &api.JobListStub{
		ID: j.ID, Name: j.Name, Namespace: j.Namespace, Type: j.Type, Priority: j.Priority,
		Stop: j.Stop, Status: j.Status, SubmitTime: j.SubmitTime,
		CreateIndex: j.CreateIndex, ModifyIndex: j.ModifyIndex, JobModifyIndex: j.JobModifyIndex,
		JobSummary: jobSummaryToAPI(j.JobSummary),
	}
}

func jobSummaryToAPI(s *structs.JobSummary) *api.JobSummary {
	if s == nil {
		return nil
	}
	out := &api.JobSummary{
		JobID: s.JobID, Namespace: s.Namespace, Summary: make(map[string]api.TaskGroupSummary, len(s.Summary)),
		Children: &api.JobChildrenSummary{}, CreateIndex: s.CreateIndex, ModifyIndex: s.ModifyIndex,
	}
	if c := s.Children; c != nil {
		out.Children = &api.JobChildrenSummary{Pending: c.Pending, Running: c.Running, Dead: c.Dead}
	}
	for tg, g := range s.Summary {
		out.Summary[tg] = api.TaskGroupSummary(g)
	}
	return out
}
