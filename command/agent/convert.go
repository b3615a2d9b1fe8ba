package agent

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/nomad/structs"
)

// Conversion between the HTTP API's wire types (package api, Nomad's
// shapes) and the servers' data model (nomad/structs), plus decoding of
// request bodies and write options. Conversions to api never copy
// secrets: CSI secrets stay on the servers.

// decodeBody decodes a JSON request body into out. Unknown fields are
// ignored, as Nomad's client sends fields Berth does not use.
func decodeBody(r *http.Request, out any) error {
	if r.Body == nil {
		return CodedError(http.StatusBadRequest, "missing request body")
	}
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(out); err != nil {
		if errors.Is(err, io.EOF) {
			return CodedError(http.StatusBadRequest, "missing request body")
		}
		return CodedError(http.StatusBadRequest, fmt.Sprintf("decoding request body: %v", err))
	}
	return nil
}

// parseWrite fills a WriteRequest from the URL and headers: namespace and
// region from the query string (never from the body, where Nomad's
// client sends them empty), the idempotency token, and the ACL token.
func parseWrite(r *http.Request, w *structs.WriteRequest) {
	v := r.URL.Query()
	w.Namespace = v.Get("namespace")
	w.Region = v.Get("region")
	w.IdempotencyToken = v.Get("idempotency_token")
	w.AuthToken = authToken(r)
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// nsTime turns unix nanoseconds into a time; 0 is the zero time, which
// JSON shows as "0001-01-01T00:00:00Z" as Nomad does.
func nsTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

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

func apiConstraintsToStructs(cs []*api.Constraint) []*structs.Constraint {
	if cs == nil {
		return nil
	}
	out := make([]*structs.Constraint, 0, len(cs))
	for _, c := range cs {
		if c == nil {
			c = &api.Constraint{}
		}
		out = append(out, &structs.Constraint{LTarget: c.LTarget, RTarget: c.RTarget, Operand: c.Operand})
	}
	return out
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
		Stable:            ptr(false),
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
	if cs == nil {
		return nil
	}
	out := make([]*api.Constraint, 0, len(cs))
	for _, c := range cs {
		out = append(out, &api.Constraint{LTarget: c.LTarget, RTarget: c.RTarget, Operand: c.Operand})
	}
	return out
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
	}
}

// ---- allocs and evals ---------------------------------------------------

func allocToAPI(a *structs.Allocation, region string) *api.Allocation {
	if a == nil {
		return nil
	}
	return &api.Allocation{
		ID: a.ID, Namespace: a.Namespace, EvalID: a.EvalID, Name: a.Name,
		NodeID: a.NodeID, NodeName: a.NodeName, JobID: a.JobID, Job: jobToAPI(a.Job, region),
		TaskGroup: a.TaskGroup, DesiredStatus: a.DesiredStatus, DesiredDescription: a.DesiredDescription,
		ClientStatus: a.ClientStatus, ClientDescription: a.ClientDescription,
		TaskStates:         taskStatesToAPI(a.TaskStates),
		PreviousAllocation: a.PreviousAllocation, NextAllocation: a.NextAllocation,
		FollowupEvalID: a.FollowupEvalID,
		CreateIndex:    a.CreateIndex, ModifyIndex: a.ModifyIndex, AllocModifyIndex: a.AllocModifyIndex,
		CreateTime: a.CreateTime, ModifyTime: a.ModifyTime,
	}
}

func allocStubToAPI(a *structs.AllocListStub) *api.AllocationListStub {
	return &api.AllocationListStub{
		ID: a.ID, EvalID: a.EvalID, Name: a.Name, Namespace: a.Namespace,
		NodeID: a.NodeID, NodeName: a.NodeName, JobID: a.JobID, TaskGroup: a.TaskGroup,
		DesiredStatus: a.DesiredStatus, DesiredDescription: a.DesiredDescription,
		ClientStatus: a.ClientStatus, ClientDescription: a.ClientDescription,
		TaskStates: taskStatesToAPI(a.TaskStates), FollowupEvalID: a.FollowupEvalID,
		CreateIndex: a.CreateIndex, ModifyIndex: a.ModifyIndex, CreateTime: a.CreateTime, ModifyTime: a.ModifyTime,
	}
}

func allocStubsToAPI(stubs []*structs.AllocListStub) []*api.AllocationListStub {
	out := make([]*api.AllocationListStub, 0, len(stubs))
	for _, a := range stubs {
		out = append(out, allocStubToAPI(a))
	}
	return out
}

func taskStatesToAPI(in map[string]*structs.TaskState) map[string]*api.TaskState {
	if in == nil {
		return nil
	}
	out := make(map[string]*api.TaskState, len(in))
	for name, ts := range in {
		s := &api.TaskState{
			State: ts.State, Failed: ts.Failed, Restarts: ts.Restarts,
			LastRestart: nsTime(ts.LastRestart), StartedAt: nsTime(ts.StartedAt), FinishedAt: nsTime(ts.FinishedAt),
		}
		for _, e := range ts.Events {
			s.Events = append(s.Events, &api.TaskEvent{
				Type: e.Type, Time: e.Time, Message: e.Message, DisplayMessage: e.DisplayMessage,
				ExitCode: e.ExitCode, Signal: e.Signal, FailsTask: e.FailsTask, Details: maps.Clone(e.Details),
			})
		}
		out[name] = s
	}
	return out
}

func evalToAPI(e *structs.Evaluation) *api.Evaluation {
	if e == nil {
		return nil
	}
	out := &api.Evaluation{
		ID: e.ID, Priority: e.Priority, Type: e.Type, TriggeredBy: e.TriggeredBy, Namespace: e.Namespace,
		JobID: e.JobID, JobModifyIndex: e.JobModifyIndex, NodeID: e.NodeID,
		Status: e.Status, StatusDescription: e.StatusDescription, WaitUntil: nsTime(e.WaitUntil),
		NextEval: e.NextEval, PreviousEval: e.PreviousEval, BlockedEval: e.BlockedEval,
		QueuedAllocations: maps.Clone(e.QueuedAllocations),
		CreateIndex:       e.CreateIndex, ModifyIndex: e.ModifyIndex, CreateTime: e.CreateTime, ModifyTime: e.ModifyTime,
	}
	if e.FailedTGAllocs != nil {
		out.FailedTGAllocs = make(map[string]*api.AllocationMetric, len(e.FailedTGAllocs))
		for tg, m := range e.FailedTGAllocs {
			out.FailedTGAllocs[tg] = &api.AllocationMetric{
				NodesEvaluated: m.NodesEvaluated, NodesFiltered: m.NodesFiltered,
				NodesAvailable: maps.Clone(m.NodesAvailable), ClassFiltered: maps.Clone(m.ClassFiltered),
				ConstraintFiltered: maps.Clone(m.ConstraintFiltered), NodesExhausted: m.NodesExhausted,
				DimensionExhausted: maps.Clone(m.DimensionExhausted), CoalescedFailures: m.CoalescedFailures,
			}
		}
	}
	return out
}

func evalsToAPI(evals []*structs.Evaluation) []*api.Evaluation {
	out := make([]*api.Evaluation, 0, len(evals))
	for _, e := range evals {
		out = append(out, evalToAPI(e))
	}
	return out
}

// ---- nodes ---------------------------------------------------------------

func nodeToAPI(n *structs.Node) *api.Node {
	if n == nil {
		return nil
	}
	out := &api.Node{
		ID: n.ID, Name: n.Name, Datacenter: n.Datacenter, NodeClass: n.NodeClass, HTTPAddr: n.HTTPAddr,
		Attributes: maps.Clone(n.Attributes), Meta: maps.Clone(n.Meta),
		Drivers:               driversToAPI(n.Drivers),
		CSIControllerPlugins:  csiInfosToAPI(n.CSIControllerPlugins),
		CSINodePlugins:        csiInfosToAPI(n.CSINodePlugins),
		Drain:                 n.DrainStrategy != nil,
		DrainStrategy:         drainToAPI(n.DrainStrategy),
		SchedulingEligibility: n.SchedulingEligibility,
		Status:                n.Status, StatusDescription: n.StatusDescription,
		StatusUpdatedAt: n.StatusUpdatedAt / int64(time.Second),
		CreateIndex:     n.CreateIndex, ModifyIndex: n.ModifyIndex,
	}
	if r := n.NodeResources; r != nil {
		out.NodeResources = &api.NodeResources{
			Cpu:    api.NodeCpuResources{CpuShares: r.CPU},
			Memory: api.NodeMemoryResources{MemoryMB: r.MemoryMB},
		}
	}
	return out
}

func nodeStubToAPI(n *structs.NodeListStub) *api.NodeListStub {
	return &api.NodeListStub{
		Address: n.Address, ID: n.ID, Datacenter: n.Datacenter, Name: n.Name, NodeClass: n.NodeClass,
		Drain: n.Drain, SchedulingEligibility: n.SchedulingEligibility,
		Status: n.Status, StatusDescription: n.StatusDescription, Drivers: driversToAPI(n.Drivers),
		CreateIndex: n.CreateIndex, ModifyIndex: n.ModifyIndex,
	}
}

func driversToAPI(in map[string]*structs.DriverInfo) map[string]*api.DriverInfo {
	if in == nil {
		return nil
	}
	out := make(map[string]*api.DriverInfo, len(in))
	for name, d := range in {
		out[name] = &api.DriverInfo{
			Attributes: maps.Clone(d.Attributes), Detected: d.Detected, Healthy: d.Healthy,
			HealthDescription: d.HealthDescription, MountConfig: string(d.MountConfig),
		}
	}
	return out
}

func drainToAPI(d *structs.DrainStrategy) *api.DrainStrategy {
	if d == nil {
		return nil
	}
	return &api.DrainStrategy{
		DrainSpec:     api.DrainSpec{Deadline: d.Deadline, IgnoreSystemJobs: d.IgnoreSystemJobs},
		ForceDeadline: nsTime(d.ForceDeadline),
		StartedAt:     nsTime(d.StartedAt),
	}
}

func csiInfosToAPI(in map[string]*structs.CSIInfo) map[string]*api.CSIInfo {
	if in == nil {
		return nil
	}
	out := make(map[string]*api.CSIInfo, len(in))
	for id, c := range in {
		out[id] = csiInfoToAPI(c)
	}
	return out
}

func csiInfoToAPI(c *structs.CSIInfo) *api.CSIInfo {
	out := &api.CSIInfo{
		PluginID: c.PluginID, AllocID: c.AllocID, Healthy: c.Healthy, HealthDescription: c.HealthDescription,
		UpdateTime:               nsTime(c.UpdateTime),
		RequiresControllerPlugin: c.RequiresControllerPlugin, RequiresTopologies: c.RequiresTopologies,
	}
	if ci := c.ControllerInfo; ci != nil {
		out.ControllerInfo = &api.CSIControllerInfo{
			SupportsCreateDelete: ci.SupportsCreateDelete, SupportsAttachDetach: ci.SupportsAttachDetach,
			SupportsListVolumes: ci.SupportsListVolumes, SupportsGetCapacity: ci.SupportsGetCapacity,
			SupportsCreateDeleteSnapshot: ci.SupportsCreateDeleteSnapshot, SupportsListSnapshots: ci.SupportsListSnapshots,
			SupportsClone: ci.SupportsClone, SupportsReadOnlyAttach: ci.SupportsReadOnlyAttach,
			SupportsExpand: ci.SupportsExpand, SupportsListVolumesAttachedNodes: ci.SupportsListVolumesAttachedNodes,
			SupportsCondition: ci.SupportsCondition, SupportsGet: ci.SupportsGet,
		}
	}
	if ni := c.NodeInfo; ni != nil {
		out.NodeInfo = &api.CSINodeInfo{
			ID: ni.ID, MaxVolumes: ni.MaxVolumes, AccessibleTopology: topologyToAPI(ni.AccessibleTopology),
			RequiresNodeStageVolume: ni.RequiresNodeStageVolume, SupportsStats: ni.SupportsStats,
			SupportsExpand: ni.SupportsExpand, SupportsCondition: ni.SupportsCondition,
		}
	}
	return out
}

// ---- CSI volumes ---------------------------------------------------------

// apiVolumeToStructs converts a volume from a register request. Fields the
// servers own (claims, health, indexes) are left out. A volume written in
// the old style, with one access and attachment mode instead of
// capabilities, gets that pair as its one capability, as Nomad does.
func apiVolumeToStructs(v *api.CSIVolume) *structs.CSIVolume {
	if v == nil {
		return nil
	}
	out := &structs.CSIVolume{
		ID: v.ID, Name: v.Name, ExternalID: v.ExternalID, Namespace: v.Namespace, PluginID: v.PluginID,
		MountOptions:         apiMountOptionsToStructs(v.MountOptions),
		Secrets:              structs.CSISecrets(maps.Clone(v.Secrets)),
		Parameters:           maps.Clone(v.Parameters),
		Context:              maps.Clone(v.Context),
		RequestedCapacityMin: v.RequestedCapacityMin,
		RequestedCapacityMax: v.RequestedCapacityMax,
		Capacity:             v.Capacity,
		Topologies:           apiTopologiesToStructs(v.Topologies),
		SnapshotID:           v.SnapshotID,
		CloneID:              v.CloneID,
	}
	for _, c := range v.RequestedCapabilities {
		if c == nil {
			c = &api.CSIVolumeCapability{}
		}
		out.RequestedCapabilities = append(out.RequestedCapabilities, &structs.CSIVolumeCapability{
			AccessMode:     structs.CSIVolumeAccessMode(c.AccessMode),
			AttachmentMode: structs.CSIVolumeAttachmentMode(c.AttachmentMode),
		})
	}
	if len(out.RequestedCapabilities) == 0 && (v.AccessMode != "" || v.AttachmentMode != "") {
		out.RequestedCapabilities = []*structs.CSIVolumeCapability{{
			AccessMode:     structs.CSIVolumeAccessMode(v.AccessMode),
			AttachmentMode: structs.CSIVolumeAttachmentMode(v.AttachmentMode),
		}}
	}
	if r := v.RequestedTopologies; r != nil {
		out.RequestedTopologies = &structs.CSITopologyRequest{
			Required:  apiTopologiesToStructs(r.Required),
			Preferred: apiTopologiesToStructs(r.Preferred),
		}
	}
	return out
}

func apiTopologiesToStructs(ts []*api.CSITopology) []*structs.CSITopology {
	if ts == nil {
		return nil
	}
	out := make([]*structs.CSITopology, 0, len(ts))
	for _, t := range ts {
		if t == nil {
			out = append(out, nil) // validation names it
			continue
		}
		out = append(out, &structs.CSITopology{Segments: maps.Clone(t.Segments)})
	}
	return out
}

func topologyToAPI(t *structs.CSITopology) *api.CSITopology {
	if t == nil {
		return nil
	}
	return &api.CSITopology{Segments: maps.Clone(t.Segments)}
}

func topologiesToAPI(ts []*structs.CSITopology) []*api.CSITopology {
	if ts == nil {
		return nil
	}
	out := make([]*api.CSITopology, 0, len(ts))
	for _, t := range ts {
		out = append(out, topologyToAPI(t))
	}
	return out
}

// pluginHealth is what a volume shows of its plugin's health.
type pluginHealth struct {
	ControllerRequired  bool
	PublishUnpublish    bool
	ControllersHealthy  int
	ControllersExpected int
	NodesHealthy        int
	NodesExpected       int
}

func healthOfPlugin(p *structs.CSIPluginListStub) pluginHealth {
	if p == nil {
		return pluginHealth{}
	}
	return pluginHealth{
		ControllerRequired: p.ControllerRequired, PublishUnpublish: p.PublishUnpublish,
		ControllersHealthy: p.ControllersHealthy, ControllersExpected: p.ControllersExpected,
		NodesHealthy: p.NodesHealthy, NodesExpected: p.NodesExpected,
	}
}

// schedulable reports whether allocs can use a volume now: it is ready,
// some node runs a healthy instance of its plugin, and so does some
// controller when claims go through one (its controllers advertise
// PUBLISH_UNPUBLISH_VOLUME: a node-only plugin needs none). The
// scheduler applies the same rule (nomad/scheduler csi.go).
func (h pluginHealth) schedulable(state structs.CSIVolumeState) bool {
	if state != "" && state != structs.CSIVolumeStateReady {
		return false
	}
	return h.NodesHealthy > 0 && (!h.PublishUnpublish || h.ControllersHealthy > 0)
}

// volumeToAPI converts a volume the servers already sanitized. allocs
// holds the stubs of its claiming allocs that still exist. Secrets are
// never copied.
func volumeToAPI(v *structs.CSIVolume, h pluginHealth, allocs map[string]*structs.AllocListStub) *api.CSIVolume {
	out := &api.CSIVolume{
		ID: v.ID, Name: v.Name, ExternalID: v.ExternalID, Namespace: v.Namespace,
		Topologies: topologiesToAPI(v.Topologies),
		AccessMode: api.CSIVolumeAccessMode(v.AccessMode), AttachmentMode: api.CSIVolumeAttachmentMode(v.AttachmentMode),
		MountOptions: mountOptionsToAPI(v.MountOptions),
		Parameters:   maps.Clone(v.Parameters), Context: maps.Clone(v.Context),
		Capacity:             v.Capacity,
		RequestedCapacityMin: v.RequestedCapacityMin, RequestedCapacityMax: v.RequestedCapacityMax,
		CloneID: v.CloneID, SnapshotID: v.SnapshotID,
		ReadAllocs: map[string]*api.Allocation{}, WriteAllocs: map[string]*api.Allocation{},
		Allocations: []*api.AllocationListStub{},
		Schedulable: h.schedulable(v.State),
		PluginID:    v.PluginID, Provider: v.Provider, ProviderVersion: v.ProviderVersion,
		ControllerRequired: h.ControllerRequired,
		ControllersHealthy: h.ControllersHealthy, ControllersExpected: h.ControllersExpected,
		NodesHealthy: h.NodesHealthy, NodesExpected: h.NodesExpected,
		CreateIndex: v.CreateIndex, ModifyIndex: v.ModifyIndex, CreateTime: v.CreateTime, ModifyTime: v.ModifyTime,
		State: api.CSIVolumeState(v.State),
	}
	for _, c := range v.RequestedCapabilities {
		out.RequestedCapabilities = append(out.RequestedCapabilities, &api.CSIVolumeCapability{
			AccessMode: api.CSIVolumeAccessMode(c.AccessMode), AttachmentMode: api.CSIVolumeAttachmentMode(c.AttachmentMode),
		})
	}
	if r := v.RequestedTopologies; r != nil {
		out.RequestedTopologies = &api.CSITopologyRequest{
			Required: topologiesToAPI(r.Required), Preferred: topologiesToAPI(r.Preferred),
		}
	}
	claims := v.LiveClaims()
	slices.SortStableFunc(claims, func(a, b *structs.CSIVolumeClaim) int { return cmp.Compare(a.CreateIndex, b.CreateIndex) })
	for _, c := range claims {
		if c.Mode == structs.CSIVolumeClaimRead {
			out.ReadAllocs[c.AllocID] = nil
		} else {
			out.WriteAllocs[c.AllocID] = nil
		}
		if a := allocs[c.AllocID]; a != nil {
			out.Allocations = append(out.Allocations, allocStubToAPI(a))
		}
		out.Claims = append(out.Claims, claimToAPI(c))
	}
	for _, c := range v.PastClaims {
		out.PastClaims = append(out.PastClaims, claimToAPI(c))
	}
	return out
}

func claimToAPI(c *structs.CSIVolumeClaim) *api.CSIVolumeClaim {
	return &api.CSIVolumeClaim{
		AllocID: c.AllocID, JobID: c.JobID, NodeID: c.NodeID, ExternalNodeID: c.ExternalNodeID,
		Mode: api.CSIVolumeClaimMode(c.Mode), AccessMode: api.CSIVolumeAccessMode(c.AccessMode),
		AttachmentMode: api.CSIVolumeAttachmentMode(c.AttachmentMode), ReadOnly: c.ReadOnly,
		Step: api.CSIClaimStep(c.Step), LastError: c.LastError, Attempts: c.Attempts, NextRetry: c.NextRetry,
		ReleaseReason: c.ReleaseReason, CreateTime: c.CreateTime, ModifyTime: c.ModifyTime,
	}
}

func volumeStubToAPI(v *structs.CSIVolumeListStub, h pluginHealth) *api.CSIVolumeListStub {
	return &api.CSIVolumeListStub{
		ID: v.ID, Namespace: v.Namespace, Name: v.Name, ExternalID: v.ExternalID,
		Topologies: topologiesToAPI(v.Topologies),
		AccessMode: api.CSIVolumeAccessMode(v.AccessMode), AttachmentMode: api.CSIVolumeAttachmentMode(v.AttachmentMode),
		Schedulable: h.schedulable(v.State), PluginID: v.PluginID, Provider: v.Provider,
		ControllerRequired: h.ControllerRequired,
		ControllersHealthy: h.ControllersHealthy, ControllersExpected: h.ControllersExpected,
		NodesHealthy: h.NodesHealthy, NodesExpected: h.NodesExpected,
		CreateIndex: v.CreateIndex, ModifyIndex: v.ModifyIndex,
		State: api.CSIVolumeState(v.State), Claims: v.Claims,
	}
}

// ---- CSI plugins ---------------------------------------------------------

func pluginToAPI(p *structs.CSIPlugin, allocs []*structs.AllocListStub) *api.CSIPlugin {
	out := &api.CSIPlugin{
		ID: p.ID, Provider: p.Provider, Version: p.Version, ControllerRequired: p.ControllerRequired,
		Controllers: csiInfosToAPI(p.Controllers), Nodes: csiInfosToAPI(p.Nodes),
		Allocations:        allocStubsToAPI(allocs),
		ControllersHealthy: p.ControllersHealthy, ControllersExpected: p.ControllersExpected,
		NodesHealthy: p.NodesHealthy, NodesExpected: p.NodesExpected,
		CreateIndex: p.CreateIndex, ModifyIndex: p.ModifyIndex,
	}
	if out.Controllers == nil {
		out.Controllers = map[string]*api.CSIInfo{}
	}
	if out.Nodes == nil {
		out.Nodes = map[string]*api.CSIInfo{}
	}
	return out
}

func pluginStubToAPI(p *structs.CSIPluginListStub) *api.CSIPluginListStub {
	return &api.CSIPluginListStub{
		ID: p.ID, Provider: p.Provider, ControllerRequired: p.ControllerRequired,
		ControllersHealthy: p.ControllersHealthy, ControllersExpected: p.ControllersExpected,
		NodesHealthy: p.NodesHealthy, NodesExpected: p.NodesExpected,
		CreateIndex: p.CreateIndex, ModifyIndex: p.ModifyIndex,
	}
}

// pluginAllocIDs lists the allocs that run a plugin's instances, sorted.
func pluginAllocIDs(p *structs.CSIPlugin) []string {
	seen := map[string]bool{}
	for _, m := range []map[string]*structs.CSIInfo{p.Controllers, p.Nodes} {
		for _, c := range m {
			if c != nil && c.AllocID != "" {
				seen[c.AllocID] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// trimPath returns the rest of r's path after prefix, or "" when the path
// is not under it.
func trimPath(r *http.Request, prefix string) string {
	rest, ok := strings.CutPrefix(r.URL.Path, prefix)
	if !ok {
		return ""
	}
	return rest
}
