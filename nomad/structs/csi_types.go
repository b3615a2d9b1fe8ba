package structs

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// CSIVolumeAccessMode is how many nodes may use a volume, and how. Values
// are the strings Nomad's API and volume specs use.
type CSIVolumeAccessMode string

const (
	CSIVolumeAccessModeUnknown                CSIVolumeAccessMode = ""
	CSIVolumeAccessModeSingleNodeReader       CSIVolumeAccessMode = "single-node-reader-only"
	CSIVolumeAccessModeSingleNodeWriter       CSIVolumeAccessMode = "single-node-writer"
	CSIVolumeAccessModeSingleNodeSingleWriter CSIVolumeAccessMode = "single-node-single-writer"
	CSIVolumeAccessModeSingleNodeMultiWriter  CSIVolumeAccessMode = "single-node-multi-writer"
	CSIVolumeAccessModeMultiNodeReader        CSIVolumeAccessMode = "multi-node-reader-only"
	CSIVolumeAccessModeMultiNodeSingleWriter  CSIVolumeAccessMode = "multi-node-single-writer"
	CSIVolumeAccessModeMultiNodeMultiWriter   CSIVolumeAccessMode = "multi-node-multi-writer"
)

// Valid reports whether m is a known, non-empty access mode.
func (m CSIVolumeAccessMode) Valid() bool {
	switch m {
	case CSIVolumeAccessModeSingleNodeReader, CSIVolumeAccessModeSingleNodeWriter,
		CSIVolumeAccessModeSingleNodeSingleWriter, CSIVolumeAccessModeSingleNodeMultiWriter,
		CSIVolumeAccessModeMultiNodeReader, CSIVolumeAccessModeMultiNodeSingleWriter,
		CSIVolumeAccessModeMultiNodeMultiWriter:
		return true
	}
	return false
}

// SingleNode reports whether the mode allows only one node at a time.
func (m CSIVolumeAccessMode) SingleNode() bool {
	return strings.HasPrefix(string(m), "single-node")
}

// ReadOnly reports whether the mode allows only readers.
func (m CSIVolumeAccessMode) ReadOnly() bool {
	return m == CSIVolumeAccessModeSingleNodeReader || m == CSIVolumeAccessModeMultiNodeReader
}

// NeedsSingleNodeMultiWriter reports whether the CSI spec lets a CO use m
// only with a plugin that advertises SINGLE_NODE_MULTI_WRITER.
func (m CSIVolumeAccessMode) NeedsSingleNodeMultiWriter() bool {
	return m == CSIVolumeAccessModeSingleNodeSingleWriter || m == CSIVolumeAccessModeSingleNodeMultiWriter
}

// CSIVolumeAttachmentMode is how the volume appears to the task.
type CSIVolumeAttachmentMode string

const (
	CSIVolumeAttachmentModeUnknown     CSIVolumeAttachmentMode = ""
	CSIVolumeAttachmentModeBlockDevice CSIVolumeAttachmentMode = "block-device"
	CSIVolumeAttachmentModeFilesystem  CSIVolumeAttachmentMode = "file-system"
)

// Valid reports whether a is a known, non-empty attachment mode.
func (a CSIVolumeAttachmentMode) Valid() bool {
	return a == CSIVolumeAttachmentModeBlockDevice || a == CSIVolumeAttachmentModeFilesystem
}

// CSIVolumeCapability is one (access, attachment) pair a volume supports.
type CSIVolumeCapability struct {
	AccessMode     CSIVolumeAccessMode
	AttachmentMode CSIVolumeAttachmentMode
}

// CSIMountOptions are file system options for a mount. MountFlags may hold
// secrets and are redacted by String.
type CSIMountOptions struct {
	FSType     string
	MountFlags []string
}

// Copy returns a deep copy.
func (o *CSIMountOptions) Copy() *CSIMountOptions {
	if o == nil {
		return nil
	}
	return &CSIMountOptions{FSType: o.FSType, MountFlags: slices.Clone(o.MountFlags)}
}

// Merge overlays non-empty fields of p onto a copy of o: request options
// override volume options.
func (o *CSIMountOptions) Merge(p *CSIMountOptions) *CSIMountOptions {
	out := o.Copy()
	if p == nil {
		return out
	}
	if out == nil {
		out = &CSIMountOptions{}
	}
	if p.FSType != "" {
		out.FSType = p.FSType
	}
	if len(p.MountFlags) > 0 {
		out.MountFlags = slices.Clone(p.MountFlags)
	}
	return out
}

func (o *CSIMountOptions) String() string {
	if o == nil {
		return "<none>"
	}
	flags := "[]"
	if len(o.MountFlags) > 0 {
		flags = "[REDACTED]"
	}
	return fmt.Sprintf("fs_type=%q mount_flags=%s", o.FSType, flags)
}

// CSISecrets are credentials passed to the plugin. They never leave the
// servers in API responses, and String redacts them.
type CSISecrets map[string]string

func (s CSISecrets) String() string {
	keys := slices.Sorted(maps.Keys(s))
	return fmt.Sprintf("secrets %v: [REDACTED]", keys)
}

// CSITopology is one set of topology segments, e.g. {"zone": "a"}.
type CSITopology struct {
	Segments map[string]string
}

// Copy returns a deep copy.
func (t *CSITopology) Copy() *CSITopology {
	if t == nil {
		return nil
	}
	return &CSITopology{Segments: maps.Clone(t.Segments)}
}

// Equal compares segments.
func (t *CSITopology) Equal(o *CSITopology) bool {
	if t == nil || o == nil {
		return t == o
	}
	return maps.Equal(t.Segments, o.Segments)
}

// AccessibleFrom reports whether a volume with topology t can be reached
// from a node whose plugin reports topology node: every segment of t is
// one of the node's (a node in zone a, rack 3 reaches a volume of zone a).
// A topology without segments constrains nothing.
func (t *CSITopology) AccessibleFrom(node *CSITopology) bool {
	if t == nil {
		return true
	}
	for k, v := range t.Segments {
		if node == nil {
			return false
		}
		if nv, ok := node.Segments[k]; !ok || nv != v {
			return false
		}
	}
	return true
}

// String renders the segments as "k=v,k2=v2", sorted by key.
func (t *CSITopology) String() string {
	if t == nil || len(t.Segments) == 0 {
		return "(none)"
	}
	keys := make([]string, 0, len(t.Segments))
	for k := range t.Segments {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + t.Segments[k]
	}
	return strings.Join(parts, ",")
}

// MatchFound reports whether any of ts equals t.
func (t *CSITopology) MatchFound(ts []*CSITopology) bool {
	for _, o := range ts {
		if t.Equal(o) {
			return true
		}
	}
	return false
}

// CSITopologyRequest is what a volume spec asks of topology.
type CSITopologyRequest struct {
	Required  []*CSITopology
	Preferred []*CSITopology
}

// Copy returns a deep copy.
func (r *CSITopologyRequest) Copy() *CSITopologyRequest {
	if r == nil {
		return nil
	}
	return &CSITopologyRequest{Required: copyTopologies(r.Required), Preferred: copyTopologies(r.Preferred)}
}

func copyTopologies(ts []*CSITopology) []*CSITopology {
	if ts == nil {
		return nil
	}
	out := make([]*CSITopology, len(ts))
	for i, t := range ts {
		out[i] = t.Copy()
	}
	return out
}

// CSIPluginType is which CSI services a plugin task serves.
type CSIPluginType string

const (
	CSIPluginTypeNode       CSIPluginType = "node"
	CSIPluginTypeController CSIPluginType = "controller"
	CSIPluginTypeMonolith   CSIPluginType = "monolith"
)

// Valid reports whether t is a known plugin type.
func (t CSIPluginType) Valid() bool {
	return t == CSIPluginTypeNode || t == CSIPluginTypeController || t == CSIPluginTypeMonolith
}

// CSIInfo is one plugin instance's fingerprint on one node, as the client
// reports it in Node.CSIControllerPlugins / Node.CSINodePlugins.
type CSIInfo struct {
	PluginID          string
	AllocID           string
	Healthy           bool
	HealthDescription string
	UpdateTime        int64 // unix ns, stamped by the client

	Provider        string
	ProviderVersion string

	RequiresControllerPlugin bool
	RequiresTopologies       bool

	ControllerInfo *CSIControllerInfo
	// ControllerCapsUnknown: the controller did not say what it
	// advertises (its ControllerGetCapabilities failed), so ControllerInfo
	// is all false for want of an answer, not because the plugin lacks
	// every capability. The servers keep the plugin's publish flags while
	// no controller says (CSIPlugin.ReplaceInstances; seed 6719). Not in
	// the HTTP API: the health description says why.
	ControllerCapsUnknown bool `json:",omitempty"`
	NodeInfo              *CSINodeInfo

	// Capacity is what the controller's GetCapacity said at the last
	// fingerprint, for controllers with GET_CAPACITY (nil otherwise).
	Capacity *CSICapacity
}

// CSICapacity is a controller's GetCapacity answer, in bytes (0: the
// plugin did not say). Topology is the one it was asked about: the
// accessible topology of the same plugin's node instance on the
// controller's node, nil when there is none (the plugin's total).
type CSICapacity struct {
	AvailableBytes    int64
	MaximumVolumeSize int64
	MinimumVolumeSize int64
	Topology          *CSITopology
	// Error is why the call failed ("" when it did not); it does not make
	// the controller unhealthy.
	Error string
}

// Copy returns a deep copy.
func (c *CSICapacity) Copy() *CSICapacity {
	if c == nil {
		return nil
	}
	out := *c
	out.Topology = c.Topology.Copy()
	return &out
}

// Copy returns a deep copy.
func (c *CSIInfo) Copy() *CSIInfo {
	if c == nil {
		return nil
	}
	out := *c
	if c.ControllerInfo != nil {
		ci := *c.ControllerInfo
		out.ControllerInfo = &ci
	}
	out.NodeInfo = c.NodeInfo.Copy()
	out.Capacity = c.Capacity.Copy()
	return &out
}

// CSINodeInfo is what NodeGetInfo and NodeGetCapabilities said.
type CSINodeInfo struct {
	ID                      string // the plugin's external node ID
	MaxVolumes              int64  // 0 means unlimited
	AccessibleTopology      *CSITopology
	RequiresNodeStageVolume bool
	SupportsStats           bool
	SupportsExpand          bool
	SupportsCondition       bool
	// SupportsSingleNodeMultiWriter: the node plugin accepts the
	// single-node-single-writer and single-node-multi-writer access
	// modes (CSI says a CO must not use them otherwise).
	SupportsSingleNodeMultiWriter bool
}

// Copy returns a deep copy.
func (n *CSINodeInfo) Copy() *CSINodeInfo {
	if n == nil {
		return nil
	}
	out := *n
	out.AccessibleTopology = n.AccessibleTopology.Copy()
	return &out
}

// CSIControllerInfo is what ControllerGetCapabilities said: the one type
// that carries a controller's capabilities from the client's fingerprint
// (plugins/csi fills it) to the servers. api.CSIControllerInfo must keep
// the same fields: command/agent converts between them with a Go type
// conversion.
type CSIControllerInfo struct {
	SupportsCreateDelete             bool
	SupportsAttachDetach             bool
	SupportsListVolumes              bool
	SupportsGetCapacity              bool
	SupportsCreateDeleteSnapshot     bool
	SupportsListSnapshots            bool
	SupportsClone                    bool
	SupportsReadOnlyAttach           bool
	SupportsExpand                   bool
	SupportsListVolumesAttachedNodes bool
	SupportsCondition                bool
	SupportsGet                      bool
	SupportsModify                   bool
}
