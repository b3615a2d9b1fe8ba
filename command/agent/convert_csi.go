package agent

import (
	"cmp"
	"maps"
	"slices"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/nomad/structs"
)

// CSI volumes, plugins and the plugins' fingerprints on nodes.

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
		MutableParameters:    maps.Clone(v.MutableParameters),
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

// apiTopologiesToStructs keeps a nil entry nil: validation names it.
func apiTopologiesToStructs(ts []*api.CSITopology) []*structs.CSITopology {
	return each(ts, func(t *api.CSITopology) *structs.CSITopology {
		if t == nil {
			return nil
		}
		return &structs.CSITopology{Segments: maps.Clone(t.Segments)}
	})
}

func topologyToAPI(t *structs.CSITopology) *api.CSITopology {
	if t == nil {
		return nil
	}
	return &api.CSITopology{Segments: maps.Clone(t.Segments)}
}

func topologiesToAPI(ts []*structs.CSITopology) []*api.CSITopology {
	return each(ts, topologyToAPI)
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
		State: api.CSIVolumeState(v.State), Created: v.Created,
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
	out.CurrentReaders, out.CurrentWriters = v.CurrentClaims()
	for _, c := range v.PastClaims {
		out.PastClaims = append(out.PastClaims, claimToAPI(c))
	}
	if e := v.Expansion; e != nil {
		out.Expansion = &api.CSIVolumeExpansion{
			RequestedBytes: e.RequestedBytes, ControllerDone: e.ControllerDone, CapacityBytes: e.CapacityBytes,
			NodeRequired: e.NodeRequired, Nodes: maps.Clone(e.Nodes), Error: e.Error, Time: e.Time,
		}
	}
	out.MutableParameters = maps.Clone(v.MutableParameters)
	if m := v.Modification; m != nil {
		out.Modification = &api.CSIVolumeModification{Parameters: maps.Clone(m.Parameters), Error: m.Error, Time: m.Time}
	}
	for nodeID, st := range v.Stats {
		if st == nil {
			continue
		}
		if out.Stats == nil {
			out.Stats = map[string]*api.CSIVolumeStats{}
		}
		as := &api.CSIVolumeStats{
			NodeID: nodeID, UsedBytes: st.UsedBytes, AvailableBytes: st.AvailableBytes, TotalBytes: st.TotalBytes,
			UsedInodes: st.UsedInodes, AvailableInodes: st.AvailableInodes, SampledAt: st.SampledAt,
		}
		if st.Condition != nil {
			as.Condition = &api.CSIVolumeCondition{Abnormal: st.Condition.Abnormal, Message: st.Condition.Message}
		}
		out.Stats[nodeID] = as
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
		BlockedStep: api.CSIClaimStep(c.BlockedStep), Unsupported: c.Unsupported, ControllerPublished: c.ControllerPublished,
		History: claimHistoryToAPI(c.History),
	}
}

func claimHistoryToAPI(h []structs.CSIClaimTransition) []api.CSIClaimTransition {
	if len(h) == 0 {
		return nil
	}
	out := make([]api.CSIClaimTransition, 0, len(h))
	for _, t := range h {
		out = append(out, api.CSIClaimTransition{From: api.CSIClaimStep(t.From), To: api.CSIClaimStep(t.To),
			Time: t.Time, Index: t.Index, Error: t.Error, Attempts: t.Attempts, Reason: t.Reason})
	}
	return out
}

// volumeStubToAPI fills out (the list's one reused stub, see volumeList).
func volumeStubToAPI(out *api.CSIVolumeListStub, v *structs.CSIVolumeListStub, h pluginHealth) {
	*out = api.CSIVolumeListStub{
		ID: v.ID, Namespace: v.Namespace, Name: v.Name, ExternalID: v.ExternalID,
		Topologies: topologiesToAPI(v.Topologies),
		AccessMode: api.CSIVolumeAccessMode(v.AccessMode), AttachmentMode: api.CSIVolumeAttachmentMode(v.AttachmentMode),
		Schedulable: h.schedulable(v.State), PluginID: v.PluginID, Provider: v.Provider,
		ControllerRequired: h.ControllerRequired,
		ControllersHealthy: h.ControllersHealthy, ControllersExpected: h.ControllersExpected,
		NodesHealthy: h.NodesHealthy, NodesExpected: h.NodesExpected,
		CreateIndex: v.CreateIndex, ModifyIndex: v.ModifyIndex,
		State: api.CSIVolumeState(v.State), Claims: v.Claims,
		CurrentReaders: v.CurrentReaders, CurrentWriters: v.CurrentWriters,
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

// ---- CSI fingerprints ----------------------------------------------------

func csiInfosToAPI(in map[string]*structs.CSIInfo) map[string]*api.CSIInfo {
	return eachValue(in, csiInfoToAPI)
}

func csiInfoToAPI(c *structs.CSIInfo) *api.CSIInfo {
	out := &api.CSIInfo{
		PluginID: c.PluginID, AllocID: c.AllocID, Healthy: c.Healthy, HealthDescription: c.HealthDescription,
		UpdateTime:               nsTime(c.UpdateTime),
		RequiresControllerPlugin: c.RequiresControllerPlugin, RequiresTopologies: c.RequiresTopologies,
	}
	if ci := c.ControllerInfo; ci != nil {
		// The same fields (all bools): a conversion, which stops compiling
		// when one side gains a field the other lacks.
		out.ControllerInfo = ptr(api.CSIControllerInfo(*ci))
	}
	if ni := c.NodeInfo; ni != nil {
		out.NodeInfo = &api.CSINodeInfo{
			ID: ni.ID, MaxVolumes: ni.MaxVolumes, AccessibleTopology: topologyToAPI(ni.AccessibleTopology),
			RequiresNodeStageVolume: ni.RequiresNodeStageVolume, SupportsStats: ni.SupportsStats,
			SupportsExpand: ni.SupportsExpand, SupportsCondition: ni.SupportsCondition,
		}
	}
	if cp := c.Capacity; cp != nil {
		out.Capacity = &api.CSICapacity{
			AvailableBytes: cp.AvailableBytes, MaximumVolumeSize: cp.MaximumVolumeSize, MinimumVolumeSize: cp.MinimumVolumeSize,
			Topology: topologyToAPI(cp.Topology), Error: cp.Error,
		}
	}
	return out
}
