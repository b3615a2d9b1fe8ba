package scheduler

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/berth-io/berth/nomad/claims"
	"github.com/berth-io/berth/nomad/structs"
)

// csiClaims checks, for alloc allocID (index idx of group tg) on node,
// every CSI volume the group asks for, in volume-name order:
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
// It returns the claims to reserve with the placement, or why the node
// cannot take it. Every reason starts with the volume's ID, and a claim
// conflict names the alloc and node that hold the volume and the claim's
// step, e.g. `volume "db[0]": single-node-writer already claimed by alloc
// 1a2b3c4d on node 5e6f7a8b (releasing: controller unpublish pending)`.
func (p *placer) csiClaims(node *structs.Node, tg *structs.TaskGroup, idx int, allocID string) ([]*structs.CSIVolumeClaimUpdate, string, error) {
	if len(tg.Volumes) == 0 {
		return nil, "", nil
	}
	var claims []*structs.CSIVolumeClaimUpdate
	for _, name := range slices.Sorted(maps.Keys(tg.Volumes)) {
		req := tg.Volumes[name]
		if req.Type != structs.VolumeTypeCSI {
			continue
		}
		source := req.SourceFor(idx)
		vol, err := p.volume(p.job.Namespace, source)
		if err != nil {
			return nil, "", err
		}
		if vol == nil {
			return nil, fmt.Sprintf("volume %q: not found in namespace %q", source, p.job.Namespace), nil
		}
		if len(vol.RequestedCapabilities) > 0 && !vol.HasCapability(req.AccessMode, req.AttachmentMode) {
			return nil, fmt.Sprintf("volume %q: does not support access mode %s with attachment mode %s",
				source, req.AccessMode, req.AttachmentMode), nil
		}
		if why, err := p.volumeUnusable(vol); err != nil || why != "" {
			return nil, why, err
		}
		plug := node.CSINodePlugins[vol.PluginID]
		switch {
		case plug == nil:
			return nil, fmt.Sprintf("volume %q: CSI plugin %q is not running on the node", source, vol.PluginID), nil
		case !plug.Healthy:
			return nil, fmt.Sprintf("volume %q: CSI plugin %q is unhealthy on the node", source, vol.PluginID), nil
		case req.AccessMode.NeedsSingleNodeMultiWriter() && (plug.NodeInfo == nil || !plug.NodeInfo.SupportsSingleNodeMultiWriter):
			return nil, fmt.Sprintf("volume %q: CSI plugin %q on the node does not support access mode %s "+
				"(it lacks the SINGLE_NODE_MULTI_WRITER capability); use single-node-writer", source, vol.PluginID, req.AccessMode), nil
		}
		key := volKey{vol.Namespace, vol.ID}
		if max := maxVolumes(plug); max > 0 {
			on, err := p.nodeVolumes(node.ID)
			if err != nil {
				return nil, "", err
			}
			if held := on[vol.PluginID]; !held[key] && int64(len(held)) >= max {
				return nil, fmt.Sprintf("volume %q: CSI plugin %q already has its maximum of %d volumes on the node",
					source, vol.PluginID, max), nil
			}
		}
		if len(vol.Topologies) > 0 {
			var topo *structs.CSITopology
			if plug.NodeInfo != nil {
				topo = plug.NodeInfo.AccessibleTopology
			}
			// The volume is reachable from the node if one of its
			// topologies is within the node's (CSI: a volume's accessible
			// topology is a set of segments every node in it carries).
			ok := slices.ContainsFunc(vol.Topologies, func(vt *structs.CSITopology) bool { return vt.AccessibleFrom(topo) })
			if !ok {
				// The reason names topologies, not the node, so that
				// identical nodes count under one reason.
				var want []string
				for _, vt := range vol.Topologies {
					want = append(want, vt.String())
				}
				return nil, fmt.Sprintf("volume %q: the node's topology %s is not one of the volume's (%s)",
					source, topo.String(), strings.Join(want, " or ")), nil
			}
		}
		if cerr := vol.ClaimConflict(allocID, node.ID, req.ClaimMode(), req.AccessMode); cerr != nil {
			return nil, cerr.Msg, nil
		}
		claims = append(claims, &structs.CSIVolumeClaimUpdate{
			Namespace: vol.Namespace,
			VolumeID:  vol.ID,
			Claim: &structs.CSIVolumeClaim{
				AllocID:        allocID,
				JobID:          p.job.ID,
				NodeID:         node.ID,
				Mode:           req.ClaimMode(),
				AccessMode:     req.AccessMode,
				AttachmentMode: req.AttachmentMode,
				ReadOnly:       req.ReadOnly,
				Step:           structs.CSIClaimReserved,
			},
		})
	}
	return claims, "", nil
}

// volumeUnusable says why no node can claim vol now, whatever the node:
// the volume is not ready, or its plugin publishes through a controller
// and has no healthy controller instance. "" when it is usable.
func (p *placer) volumeUnusable(vol *structs.CSIVolume) (string, error) {
	if vol.State != "" && vol.State != structs.CSIVolumeStateReady {
		return fmt.Sprintf("volume %q: is %s, not ready for claims", vol.ID, vol.State), nil
	}
	plugin, err := p.st.CSIPluginByID(nil, vol.PluginID)
	if err != nil {
		return "", fmt.Errorf("reading CSI plugin %q: %w", vol.PluginID, err)
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
