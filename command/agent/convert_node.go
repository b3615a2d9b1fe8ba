package agent

import (
	"maps"
	"time"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/nomad/structs"
)

// Nodes: structs → api. The CSI fingerprints are in convert_csi.go.

func nodeToAPI(n *structs.Node) *api.Node {
	if n == nil {
		return nil
	}
	out := &api.Node{
		ID: n.ID, Name: n.Name, Datacenter: n.Datacenter, NodeClass: n.NodeClass, HTTPAddr: n.HTTPAddr,
		TLSEnabled: n.TLSEnabled,
		NodePool:   structs.DefaultNodePool,
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
		NodePool: structs.DefaultNodePool, Version: n.Version,
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
