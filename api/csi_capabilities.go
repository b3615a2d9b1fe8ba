package api

import "slices"

// Capabilities names the controller capabilities c reports, as the CSI
// spec spells them ("CREATE_DELETE_VOLUME"), sorted.
func (c *CSIControllerInfo) Capabilities() []string {
	if c == nil {
		return nil
	}
	return capabilityNames(map[string]bool{
		"CREATE_DELETE_VOLUME":         c.SupportsCreateDelete,
		"PUBLISH_UNPUBLISH_VOLUME":     c.SupportsAttachDetach,
		"LIST_VOLUMES":                 c.SupportsListVolumes,
		"GET_CAPACITY":                 c.SupportsGetCapacity,
		"CREATE_DELETE_SNAPSHOT":       c.SupportsCreateDeleteSnapshot,
		"LIST_SNAPSHOTS":               c.SupportsListSnapshots,
		"CLONE_VOLUME":                 c.SupportsClone,
		"PUBLISH_READONLY":             c.SupportsReadOnlyAttach,
		"EXPAND_VOLUME":                c.SupportsExpand,
		"LIST_VOLUMES_PUBLISHED_NODES": c.SupportsListVolumesAttachedNodes,
		"VOLUME_CONDITION":             c.SupportsCondition,
		"GET_VOLUME":                   c.SupportsGet,
		"MODIFY_VOLUME":                c.SupportsModify,
	})
}

// Capabilities names the node capabilities n reports, as the CSI spec
// spells them ("STAGE_UNSTAGE_VOLUME"), sorted.
func (n *CSINodeInfo) Capabilities() []string {
	if n == nil {
		return nil
	}
	return capabilityNames(map[string]bool{
		"STAGE_UNSTAGE_VOLUME": n.RequiresNodeStageVolume,
		"GET_VOLUME_STATS":     n.SupportsStats,
		"EXPAND_VOLUME":        n.SupportsExpand,
		"VOLUME_CONDITION":     n.SupportsCondition,
	})
}

func capabilityNames(set map[string]bool) []string {
	var out []string
	for name, ok := range set {
		if ok {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
