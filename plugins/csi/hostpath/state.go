package hostpath

import (
	"maps"
	"slices"
	"sort"
	"time"
)

// State is everything the plugin knows, shared by every plugin process that
// uses the same root directory. Objects reachable from a State held by the
// store are never modified in place: copy them, change the copy and put it
// back through a txn.
type State struct {
	// Seq is the sequence number of the last change applied.
	Seq       uint64               `json:"seq"`
	Volumes   map[string]*Volume   `json:"volumes"`
	Snapshots map[string]*Snapshot `json:"snapshots"`
	// Nodes are the node plugins that have ever served from this root; a
	// controller publishes only to a node it knows.
	Nodes map[string]*Node `json:"nodes"`
}

// Volume is one volume: a directory under <root>/volumes, and how it is in use.
type Volume struct {
	ID string `json:"id"`
	// Name is the CreateVolume name; empty for static volumes.
	Name          string            `json:"name,omitempty"`
	CapacityBytes int64             `json:"capacity_bytes"`
	Parameters    map[string]string `json:"parameters,omitempty"`
	// MutableParameters are the ones ControllerModifyVolume may change
	// (see mutableParameters).
	MutableParameters map[string]string `json:"mutable_parameters,omitempty"`
	// SourceSnapshotID and SourceVolumeID say what the volume was copied from.
	SourceSnapshotID string `json:"source_snapshot_id,omitempty"`
	SourceVolumeID   string `json:"source_volume_id,omitempty"`
	// Static volumes were not created by CreateVolume but on first use by a
	// node-only plugin (see nodeVolume).
	Static    bool      `json:"static,omitempty"`
	CreatedAt time.Time `json:"created_at"`

	Attachments []Attachment `json:"attachments,omitempty"`
	Stages      []Stage      `json:"stages,omitempty"`
	Publishes   []Publish    `json:"publishes,omitempty"`
}

// Attachment records a ControllerPublishVolume to a node.
type Attachment struct {
	NodeID   string     `json:"node_id"`
	Mode     AccessMode `json:"mode"`
	Readonly bool       `json:"readonly,omitempty"`
}

// Stage records a NodeStageVolume: a bind mount of the volume directory on
// the staging path.
type Stage struct {
	NodeID string     `json:"node_id"`
	Path   string     `json:"path"`
	Mode   AccessMode `json:"mode"`
}

// Publish records a NodePublishVolume: a bind mount of the staging path on
// the target path.
type Publish struct {
	NodeID      string     `json:"node_id"`
	TargetPath  string     `json:"target_path"`
	StagingPath string     `json:"staging_path"`
	Mode        AccessMode `json:"mode"`
	Readonly    bool       `json:"readonly,omitempty"`
	// CreatedTarget is set when the plugin created the target directory, so
	// that NodeUnpublishVolume removes it (and only then).
	CreatedTarget bool `json:"created_target,omitempty"`
	// Block is set for the block access type: a loop device's node is
	// mounted on the target file (block.go).
	Block bool `json:"block,omitempty"`
}

// Snapshot is a recursive copy of a volume directory under <root>/snapshots.
type Snapshot struct {
	ID             string    `json:"id"`
	Name           string    `json:"name"`
	SourceVolumeID string    `json:"source_volume_id"`
	SizeBytes      int64     `json:"size_bytes"`
	CreatedAt      time.Time `json:"created_at"`
}

// Node is a node plugin that served from this root.
type Node struct {
	ID         string `json:"id"`
	MaxVolumes int64  `json:"max_volumes,omitempty"`
}

func newState() *State {
	return &State{
		Volumes:   map[string]*Volume{},
		Snapshots: map[string]*Snapshot{},
		Nodes:     map[string]*Node{},
	}
}

// shallowCopy copies the maps but shares the objects in them.
func (s *State) shallowCopy() *State {
	return &State{
		Seq:       s.Seq,
		Volumes:   maps.Clone(s.Volumes),
		Snapshots: maps.Clone(s.Snapshots),
		Nodes:     maps.Clone(s.Nodes),
	}
}

// ensureMaps makes a decoded State safe to write to.
func (s *State) ensureMaps() {
	if s.Volumes == nil {
		s.Volumes = map[string]*Volume{}
	}
	if s.Snapshots == nil {
		s.Snapshots = map[string]*Snapshot{}
	}
	if s.Nodes == nil {
		s.Nodes = map[string]*Node{}
	}
}

func (s *State) volumeByName(name string) *Volume {
	for _, v := range s.Volumes {
		if v.Name == name {
			return v
		}
	}
	return nil
}

func (s *State) snapshotByName(name string) *Snapshot {
	for _, sn := range s.Snapshots {
		if sn.Name == name {
			return sn
		}
	}
	return nil
}

// sortedVolumes returns the volumes ordered by ID, for stable pagination.
func (s *State) sortedVolumes() []*Volume {
	vs := slices.Collect(maps.Values(s.Volumes))
	sort.Slice(vs, func(i, j int) bool { return vs[i].ID < vs[j].ID })
	return vs
}

// sortedSnapshots returns the snapshots ordered by ID.
func (s *State) sortedSnapshots() []*Snapshot {
	ss := slices.Collect(maps.Values(s.Snapshots))
	sort.Slice(ss, func(i, j int) bool { return ss[i].ID < ss[j].ID })
	return ss
}

// usedCapacity sums the capacity of every volume but skip.
func (s *State) usedCapacity(skip string) int64 {
	var n int64
	for _, v := range s.Volumes {
		if v.ID != skip {
			n += v.CapacityBytes
		}
	}
	return n
}

// attachedCount counts the volumes controller-published to a node.
func (s *State) attachedCount(nodeID string) int64 {
	var n int64
	for _, v := range s.Volumes {
		if _, ok := v.attachment(nodeID); ok {
			n++
		}
	}
	return n
}

// publishedAt finds the volume published at a target path on a node.
func (s *State) publishedAt(nodeID, target string) (*Volume, bool) {
	for _, v := range s.Volumes {
		if _, ok := v.publish(nodeID, target); ok {
			return v, true
		}
	}
	return nil, false
}

// Copy returns a deep copy.
func (v *Volume) Copy() *Volume {
	c := *v
	c.Parameters = maps.Clone(v.Parameters)
	c.MutableParameters = maps.Clone(v.MutableParameters)
	c.Attachments = slices.Clone(v.Attachments)
	c.Stages = slices.Clone(v.Stages)
	c.Publishes = slices.Clone(v.Publishes)
	return &c
}

func (v *Volume) attachment(nodeID string) (Attachment, bool) {
	for _, a := range v.Attachments {
		if a.NodeID == nodeID {
			return a, true
		}
	}
	return Attachment{}, false
}

// stageOn returns the volume's stage on a node (there is at most one).
func (v *Volume) stageOn(nodeID string) (Stage, bool) {
	for _, s := range v.Stages {
		if s.NodeID == nodeID {
			return s, true
		}
	}
	return Stage{}, false
}

func (v *Volume) publish(nodeID, target string) (Publish, bool) {
	for _, p := range v.Publishes {
		if p.NodeID == nodeID && p.TargetPath == target {
			return p, true
		}
	}
	return Publish{}, false
}

// hasPath reports whether the volume is staged or published at path on a node.
func (v *Volume) hasPath(nodeID, path string) bool {
	if s, ok := v.stageOn(nodeID); ok && s.Path == path {
		return true
	}
	_, ok := v.publish(nodeID, path)
	return ok
}

// inUse reports whether anything still uses the volume.
func (v *Volume) inUse() bool {
	return len(v.Attachments)+len(v.Stages)+len(v.Publishes) > 0
}

// publishedNodes lists the nodes the volume is controller-published to.
func (v *Volume) publishedNodes() []string {
	ids := make([]string, 0, len(v.Attachments))
	for _, a := range v.Attachments {
		ids = append(ids, a.NodeID)
	}
	sort.Strings(ids)
	return ids
}

// dropNode removes every record of a node: used when the controller
// unpublishes (fences) a node that never unstaged.
func (v *Volume) dropNode(nodeID string) (stages, publishes int) {
	v.Attachments = slices.DeleteFunc(v.Attachments, func(a Attachment) bool { return a.NodeID == nodeID })
	n := len(v.Stages)
	v.Stages = slices.DeleteFunc(v.Stages, func(s Stage) bool { return s.NodeID == nodeID })
	stages = n - len(v.Stages)
	n = len(v.Publishes)
	v.Publishes = slices.DeleteFunc(v.Publishes, func(p Publish) bool { return p.NodeID == nodeID })
	return stages, n - len(v.Publishes)
}

// usages lists every way the volume is in use, for checkConflict.
func (v *Volume) usages() []usage {
	us := make([]usage, 0, len(v.Attachments)+len(v.Stages)+len(v.Publishes))
	for _, a := range v.Attachments {
		us = append(us, usage{Kind: usageAttach, NodeID: a.NodeID, Mode: a.Mode, Readonly: a.Readonly})
	}
	for _, s := range v.Stages {
		us = append(us, usage{Kind: usageStage, NodeID: s.NodeID, Path: s.Path, Mode: s.Mode})
	}
	for _, p := range v.Publishes {
		us = append(us, usage{Kind: usagePublish, NodeID: p.NodeID, Path: p.TargetPath, Mode: p.Mode, Readonly: p.Readonly})
	}
	return us
}
