package structs

import (
	"maps"
	"time"
)

// CSIVolumeStats is one node's sample of a published volume's usage and
// condition (NodeGetVolumeStats). Byte and inode figures are -1 when the
// plugin did not report that unit.
type CSIVolumeStats struct {
	NodeID          string
	UsedBytes       int64
	AvailableBytes  int64
	TotalBytes      int64
	UsedInodes      int64
	AvailableInodes int64
	// Condition is set when the node plugin advertises VOLUME_CONDITION.
	Condition *CSIVolumeCondition
	// SampledAt is when the client asked the plugin (unix nanoseconds).
	SampledAt int64
}

// CSIVolumeCondition is a plugin's word on a volume's health.
type CSIVolumeCondition struct {
	Abnormal bool
	Message  string
}

// Copy returns a deep copy.
func (s *CSIVolumeStats) Copy() *CSIVolumeStats {
	if s == nil {
		return nil
	}
	out := *s
	if s.Condition != nil {
		c := *s.Condition
		out.Condition = &c
	}
	return &out
}

// CSIVolumeStatsSample is one volume's sample in a node's report.
type CSIVolumeStatsSample struct {
	Namespace string
	VolumeID  string
	Stats     *CSIVolumeStats
}

// CSIVolumeStatsReportRequest is a client's report of every CSI volume
// published on its node, sent once per stats interval
// (CSIVolume.ReportStats). It replaces the node's previous report: a
// volume missing from it is no longer published there.
type CSIVolumeStatsReportRequest struct {
	NodeID  string
	Samples []*CSIVolumeStatsSample
	WriteRequest
}

// Bounds of the client's stats interval and of a report.
const (
	DefaultCSIStatsInterval = 15 * time.Second
	MaxCSIStatsInterval     = 30 * time.Second
	// MaxCSIStatsSamples bounds the samples in one report.
	MaxCSIStatsSamples = 4096
	// MaxCSIConditionMessage bounds a condition message kept by the servers.
	MaxCSIConditionMessage = 1024
)

// CSIVolumeExpansion records the last expansion of a volume, step by step
// (Raft), for `volume status`.
type CSIVolumeExpansion struct {
	// RequestedBytes is the capacity_min that asked for it.
	RequestedBytes int64
	// ControllerDone is set once ControllerExpandVolume succeeded (or the
	// plugin has no controller expansion); CapacityBytes is what it said.
	ControllerDone bool
	CapacityBytes  int64
	// NodeRequired: the plugin said node_expansion_required; Nodes then
	// says, by node ID, "pending" or "expanded" for each node that stages
	// or publishes the volume.
	NodeRequired bool
	Nodes        map[string]string
	// Error is the last failure, "" once a step succeeded after it.
	Error string
	// Time is when the expansion was last updated (unix ns).
	Time int64
}

// CSIVolumeModification records the last change of a volume's mutable
// parameters (Raft), for `volume status`.
type CSIVolumeModification struct {
	// Parameters are the ones sent to ControllerModifyVolume: those whose
	// value the request changed.
	Parameters map[string]string
	// Error is the plugin's refusal; "" when the change was made.
	Error string
	// Time is when it was recorded (unix ns).
	Time int64
}

// Copy returns a deep copy.
func (m *CSIVolumeModification) Copy() *CSIVolumeModification {
	if m == nil {
		return nil
	}
	out := *m
	out.Parameters = maps.Clone(m.Parameters)
	return &out
}

// Copy returns a deep copy.
func (e *CSIVolumeExpansion) Copy() *CSIVolumeExpansion {
	if e == nil {
		return nil
	}
	out := *e
	out.Nodes = maps.Clone(e.Nodes)
	return &out
}
