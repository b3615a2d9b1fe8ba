package csimanager

import (
	"errors"
	"fmt"
	"reflect"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/berth-io/berth/client/dynamicplugins"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi"
)

// probeResult is what one fingerprint pass learned from a plugin. A nil
// field was not learned (the call failed or was not made); its error says
// why.
type probeResult struct {
	Provider, Version string
	PluginCaps        *csi.PluginCapabilitySet
	PluginCapsErr     error

	Ready    bool
	ProbeErr error

	// Node plugins.
	NodeInfo    *csi.NodeInfo
	NodeInfoErr error
	NodeCaps    *csi.NodeCapabilitySet
	NodeCapsErr error
	// nodeCapsConn is the connection NodeCaps was asked over
	// (csi.Client.Connection before the call).
	nodeCapsConn uint64
	// Controller plugins.
	ControllerCaps    *structs.CSIControllerInfo
	ControllerCapsErr error
	// Capacity is GetCapacity's answer (controllers with GET_CAPACITY),
	// asked about CapacityTopology.
	Capacity         *csi.ControllerGetCapacityResponse
	CapacityErr      error
	CapacityTopology *structs.CSITopology
}

// buildInfo turns a fingerprint pass into the node's CSIInfo for one
// plugin instance. It is pure: health is decided here and nowhere else.
//
//	probe failed or not ready        ─► unhealthy, says why
//	node: NodeGetInfo/capabilities   ─► unhealthy until both were read
//	controller: capabilities         ─► unhealthy until read
//	otherwise                        ─► healthy
func buildInfo(typ string, p *dynamicplugins.PluginInfo, r *probeResult, now int64) *structs.CSIInfo {
	info := &structs.CSIInfo{
		PluginID:        p.Name,
		AllocID:         p.AllocID,
		UpdateTime:      now,
		Provider:        r.Provider,
		ProviderVersion: r.Version,
	}
	if info.Provider == "" {
		info.Provider = p.Options[dynamicplugins.OptionProvider]
	}
	if info.ProviderVersion == "" {
		info.ProviderVersion = p.Version
	}
	if r.PluginCaps != nil {
		r.PluginCaps.Fill(info)
	}
	var problem error
	switch typ {
	case dynamicplugins.PluginTypeCSINode:
		ni := &structs.CSINodeInfo{}
		if r.NodeInfo != nil {
			r.NodeInfo.Fill(ni)
		}
		if r.NodeCaps != nil {
			r.NodeCaps.Fill(ni)
		}
		info.NodeInfo = ni
		switch {
		case r.NodeInfo == nil:
			problem = fmt.Errorf("NodeGetInfo failed: %s", plainErr(orUnknown(r.NodeInfoErr)))
		case r.NodeCaps == nil:
			problem = fmt.Errorf("NodeGetCapabilities failed: %s", plainErr(orUnknown(r.NodeCapsErr)))
		}
	case dynamicplugins.PluginTypeCSIController:
		ci := &structs.CSIControllerInfo{}
		if r.ControllerCaps != nil {
			*ci = *r.ControllerCaps
		} else {
			problem = fmt.Errorf("ControllerGetCapabilities failed: %s", plainErr(orUnknown(r.ControllerCapsErr)))
			info.ControllerCapsUnknown = true // not "supports nothing": the servers keep what they knew
		}
		info.ControllerInfo = ci
		switch {
		case r.Capacity != nil:
			info.Capacity = &structs.CSICapacity{
				AvailableBytes: r.Capacity.AvailableCapacity, MaximumVolumeSize: r.Capacity.MaximumVolumeSize,
				MinimumVolumeSize: r.Capacity.MinimumVolumeSize, Topology: r.CapacityTopology.Copy(),
			}
		case r.CapacityErr != nil:
			info.Capacity = &structs.CSICapacity{Topology: r.CapacityTopology.Copy(), Error: "GetCapacity failed: " + plainErr(r.CapacityErr)}
		}
	}
	switch {
	case r.ProbeErr != nil:
		info.HealthDescription = fmt.Sprintf("probe failed: %s", plainErr(r.ProbeErr))
	case !r.Ready:
		info.HealthDescription = "plugin says it is not ready"
	case r.PluginCaps == nil:
		info.HealthDescription = fmt.Sprintf("GetPluginCapabilities failed: %s", plainErr(orUnknown(r.PluginCapsErr)))
	case problem != nil:
		info.HealthDescription = problem.Error()
	default:
		info.Healthy = true
		info.HealthDescription = "healthy"
	}
	return info
}

// plainErr is a failed RPC as operators read it in a health description:
// when the plugin answered with a gRPC status, its code and its own words
// ("FailedPrecondition: hostpath: not running as root ..."), without the
// wrappers' "csi NodeGetInfo: rpc error: code = ... desc = ...".
func plainErr(err error) string {
	var st interface{ GRPCStatus() *status.Status }
	if errors.As(err, &st) {
		if s := st.GRPCStatus(); s != nil && s.Code() != codes.OK {
			return fmt.Sprintf("%s: %s", s.Code(), s.Message())
		}
	}
	return err.Error()
}

func orUnknown(err error) error {
	if err == nil {
		return fmt.Errorf("not asked yet")
	}
	return err
}

// unhealthy returns a copy of info marked unhealthy for why (the last
// fingerprint a stopping manager sends).
func unhealthy(info *structs.CSIInfo, why string, now int64) *structs.CSIInfo {
	out := info.Copy()
	out.Healthy = false
	out.HealthDescription = why
	out.UpdateTime = now
	return out
}

// infoEqual compares two fingerprints, ignoring when they were taken: the
// servers hear about a plugin only when something they care about changed.
func infoEqual(a, b *structs.CSIInfo) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := a.Copy(), b.Copy()
	x.UpdateTime, y.UpdateTime = 0, 0
	return reflect.DeepEqual(x, y)
}
