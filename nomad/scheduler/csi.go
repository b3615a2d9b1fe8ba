package scheduler

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/berth-io/berth/nomad/claims"
	"github.com/berth-io/berth/nomad/structs"
)

// csiAsk is one CSI volume request of a placement, resolved once per
// placement (not per node): the proposed volume, or why no node can take
// it whatever the node.
type csiAsk struct {
	req    *structs.VolumeRequest
	source string
	vol    *structs.CSIVolume
	// why is set when the volume rules out every node: missing, wrong
	// capability, not ready, or its plugin's controller is down.
	why string
}

// csiAsks resolves the CSI volumes alloc index idx of tg asks for, in
// volume-name order, with checks 1–3 of csiNodeReason: those depend on
// the volume alone, so they run once per placement, not once per node.
func (p *placer) csiAsks(tg *structs.TaskGroup, idx int) ([]csiAsk, error) {
	if len(tg.Volumes) == 0 {
		return nil, nil
	}
	var asks []csiAsk
	for _, name := range slices.Sorted(maps.Keys(tg.Volumes)) {
		req := tg.Volumes[name]
		if req.Type != structs.VolumeTypeCSI {
			continue
		}
		a := csiAsk{req: req, source: req.SourceFor(idx)}
		vol, err := p.volume(p.job.Namespace, a.source)
		if err != nil {
			return nil, err
		}
		switch {
		case vol == nil:
			a.why = fmt.Sprintf("volume %q: not found in namespace %q", a.source, p.job.Namespace)
		case len(vol.RequestedCapabilities) > 0 && !vol.HasCapability(req.AccessMode, req.AttachmentMode):
			a.why = fmt.Sprintf("volume %q: does not support access mode %s with attachment mode %s",
				a.source, req.AccessMode, req.AttachmentMode)
		default:
			if a.why, err = p.volumeUnusable(vol); err != nil {
				return nil, err
			}
		}
		a.vol = vol
		asks = append(asks, a)
	}
	return asks, nil
}

// csiNodeReason checks, for alloc allocID on node, every CSI volume of
// asks (from csiAsks), in order:
//
//  1. the volume exists (per_alloc sources resolve to "source[idx]");
//  2. it supports the requested access and attachment mode;
//  3. the volume is ready (not being created or deleted), and its plugin
//     can serve claims at all: when claims go through its controller
//     (it advertises PUBLISH_UNPUBLISH_VOLUME), some controller instance
//     is healthy — otherwise the claim would wait forever, so the eval
//     blocks and unblocks when the plugin changes;
//  4. the node runs a healthy node instance of the volume's plugin;
//  5. the plugin is under its MaxVolumes on the node (a volume already
//     claimed there does not count twice);
//  6. one of the volume's topologies is within the node plugin's (its segments are all the node's);
//  7. the claim is free: CSIVolume.ClaimConflict over the stored claims
//     plus those this plan already reserved.
//
// It returns why the node cannot take the placement, or "". Every reason
// starts with the volume's ID, and a claim conflict names the alloc and
// node that hold the volume and the claim's step, e.g. `volume "db[0]":
// single-node-writer already claimed by alloc 1a2b3c4d on node 5e6f7a8b
// (releasing: controller unpublish pending)`. Checks 4 and 6 are
// csiNodeServes; checks 5 and 7 change as the plan grows.
func (p *placer) csiNodeReason(node *structs.Node, asks []csiAsk, allocID string) (string, error) {
	for _, a := range asks {
		if a.why != "" {
			return a.why, nil
		}
		vol := a.vol
		plug, why := serves(node, a)
		if why != "" {
			return why, nil
		}
		key := volKey{vol.Namespace, vol.ID}
		if max := maxVolumes(plug); max > 0 {
			on, err := p.nodeVolumes(node.ID)
			if err != nil {
				return "", err
			}
			if held := on[vol.PluginID]; !held[key] && int64(len(held)) >= max {
				return fmt.Sprintf("volume %q: CSI plugin %q already has its maximum of %d volumes on the node",
					a.source, vol.PluginID, max), nil
			}
		}
		if why := topologyReason(plug, a); why != "" {
			return why, nil
		}
		if cerr := vol.ClaimConflict(allocID, node.ID, a.req.ClaimMode(), a.req.AccessMode); cerr != nil {
			return cerr.Msg, nil
		}
	}
	return "", nil
}

// csiNodeServes reports whether node can ever serve asks in this plan:
// the volumes' plugins run healthy there, with the capability the access
// mode needs, and the node is within each volume's topology (checks 4 and
// 6 of csiNodeReason, which depend on the node and the volume's plugin
// and topology only). asks must have no why.
func csiNodeServes(node *structs.Node, asks []csiAsk) bool {
	for _, a := range asks {
		plug, why := serves(node, a)
		if why != "" || topologyReason(plug, a) != "" {
			return false
		}
	}
	return true
}

// serves returns the node's instance of a's plugin, or why it cannot
// serve a.
func serves(node *structs.Node, a csiAsk) (*structs.CSIInfo, string) {
	plug := node.CSINodePlugins[a.vol.PluginID]
	switch {
	case plug == nil:
		return nil, fmt.Sprintf("volume %q: CSI plugin %q is not running on the node", a.source, a.vol.PluginID)
	case !plug.Healthy:
		return nil, fmt.Sprintf("volume %q: CSI plugin %q is unhealthy on the node", a.source, a.vol.PluginID)
	case a.req.AccessMode.NeedsSingleNodeMultiWriter() && (plug.NodeInfo == nil || !plug.NodeInfo.SupportsSingleNodeMultiWriter):
		return nil, fmt.Sprintf("volume %q: CSI plugin %q on the node does not support access mode %s "+
			"(it lacks the SINGLE_NODE_MULTI_WRITER capability); use single-node-writer", a.source, a.vol.PluginID, a.req.AccessMode)
	}
	return plug, ""
}

// topologyReason says why the node whose plugin instance is plug is
// outside every topology of a's volume, or "".
func topologyReason(plug *structs.CSIInfo, a csiAsk) string {
	vol := a.vol
	if len(vol.Topologies) == 0 {
		return ""
	}
	var topo *structs.CSITopology
	if plug.NodeInfo != nil {
		topo = plug.NodeInfo.AccessibleTopology
	}
	// The volume is reachable from the node if one of its topologies is
	// within the node's (CSI: a volume's accessible topology is a set of
	// segments every node in it carries).
	if slices.ContainsFunc(vol.Topologies, func(vt *structs.CSITopology) bool { return vt.AccessibleFrom(topo) }) {
		return ""
	}
	// The reason names topologies, not the node, so that identical nodes
	// count under one reason.
	var want []string
	for _, vt := range vol.Topologies {
		want = append(want, vt.String())
	}
	return fmt.Sprintf("volume %q: the node's topology %s is not one of the volume's (%s)",
		a.source, topo.String(), strings.Join(want, " or "))
}

// csiClaimUpdates are the claims alloc allocID on nodeID reserves for
// asks, which csiNodeReason found free there.
func (p *placer) csiClaimUpdates(nodeID string, asks []csiAsk, allocID string) []*structs.CSIVolumeClaimUpdate {
	var claims []*structs.CSIVolumeClaimUpdate
	for _, a := range asks {
		claims = append(claims, &structs.CSIVolumeClaimUpdate{
			Namespace: a.vol.Namespace,
			VolumeID:  a.vol.ID,
			Claim: &structs.CSIVolumeClaim{
				AllocID:        allocID,
				JobID:          p.job.ID,
				NodeID:         nodeID,
				Mode:           a.req.ClaimMode(),
				AccessMode:     a.req.AccessMode,
				AttachmentMode: a.req.AttachmentMode,
				ReadOnly:       a.req.ReadOnly,
				Step:           structs.CSIClaimReserved,
			},
		})
	}
	return claims
}

// volumeUnusable says why no node can claim vol now, whatever the node:
// the volume is not ready, or its plugin publishes through a controller
// and has no healthy controller instance. "" when it is usable.
func (p *placer) volumeUnusable(vol *structs.CSIVolume) (string, error) {
	if vol.State != "" && vol.State != structs.CSIVolumeStateReady {
		return fmt.Sprintf("volume %q: is %s, not ready for claims", vol.ID, vol.State), nil
	}
	plugin, ok := p.plugins[vol.PluginID]
	if !ok {
		var err error
		if plugin, err = p.st.CSIPluginSummary(nil, vol.PluginID); err != nil {
			return "", fmt.Errorf("reading CSI plugin %q: %w", vol.PluginID, err)
		}
		p.plugins[vol.PluginID] = plugin
	}
	if claims.ControllerNeeded(plugin) && plugin.ControllersHealthy == 0 {
		return fmt.Sprintf("volume %q: CSI plugin %q attaches volumes through its controller, and none of its %d controller instances is healthy; "+
			"check the plugin's controller job", vol.ID, vol.PluginID, plugin.ControllersExpected), nil
	}
	return "", nil
}

func maxVolumes(plug *structs.CSIInfo) int64 {
	if plug.NodeInfo == nil {
		return 0
	}
	return plug.NodeInfo.MaxVolumes
}

// volume returns the proposed volume: the stored one plus the claims this
// plan reserved. nil means it does not exist.
func (p *placer) volume(ns, id string) (*structs.CSIVolume, error) {
	key := volKey{ns, id}
	if v, ok := p.vols[key]; ok {
		return v, nil
	}
	v, err := p.st.CSIVolumeByID(nil, ns, id)
	if err != nil {
		return nil, fmt.Errorf("reading volume %q: %w", id, err)
	}
	p.vols[key] = v
	return v, nil
}

// nodeVolumes returns, by plugin, the volumes with a live or planned claim
// on a node.
func (p *placer) nodeVolumes(nodeID string) (map[string]map[volKey]bool, error) {
	if m, ok := p.nodeVols[nodeID]; ok {
		return m, nil
	}
	iter, err := p.st.CSIVolumesByNodeID(nil, nodeID)
	if err != nil {
		return nil, fmt.Errorf("reading volumes claimed on node %s: %w", nodeID, err)
	}
	m := map[string]map[volKey]bool{}
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		v := raw.(*structs.CSIVolume)
		addVolume(m, v.PluginID, volKey{v.Namespace, v.ID})
	}
	p.nodeVols[nodeID] = m
	return m, nil
}

func addVolume(m map[string]map[volKey]bool, pluginID string, key volKey) {
	if m[pluginID] == nil {
		m[pluginID] = map[volKey]bool{}
	}
	m[pluginID][key] = true
}

// reserve records claims placed on nodeID in the proposed volumes, so the
// next placement counts them.
func (p *placer) reserve(nodeID string, claims []*structs.CSIVolumeClaimUpdate) {
	for _, u := range claims {
		key := volKey{u.Namespace, u.VolumeID}
		v := p.vols[key]
		if !p.ownVols[key] {
			// Stored volumes are shared: copy once, then change the copy.
			v = v.Copy()
			p.ownVols[key] = true
		}
		if v.Claims == nil {
			v.Claims = map[string]*structs.CSIVolumeClaim{}
		}
		v.Claims[u.Claim.AllocID] = u.Claim
		if v.AccessMode == "" {
			v.AccessMode, v.AttachmentMode = u.Claim.AccessMode, u.Claim.AttachmentMode
		}
		p.vols[key] = v
		if m, ok := p.nodeVols[nodeID]; ok {
			addVolume(m, v.PluginID, key)
		}
	}
}
