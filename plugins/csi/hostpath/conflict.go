package hostpath

import "fmt"

// usageKind says how a node uses a volume.
type usageKind int

const (
	usageAttach  usageKind = iota // ControllerPublishVolume to the node
	usageStage                    // NodeStageVolume on the node
	usagePublish                  // NodePublishVolume on the node
)

// usage is one way a node uses a volume.
type usage struct {
	Kind     usageKind
	NodeID   string
	Path     string // staging or target path; empty for an attachment
	Mode     AccessMode
	Readonly bool
}

// writable reports whether the usage can write to the volume. A stage is not
// a writer by itself: only what is published from it is.
func (u usage) writable() bool {
	return u.Kind != usageStage && !u.Readonly && !u.Mode.readerOnly()
}

func (u usage) String() string {
	rw := "read-write"
	if !u.writable() {
		rw = "read-only"
	}
	switch u.Kind {
	case usageAttach:
		return fmt.Sprintf("controller-published to node %q (%s, %s)", u.NodeID, u.Mode, rw)
	case usageStage:
		return fmt.Sprintf("staged on node %q at %q (%s)", u.NodeID, u.Path, u.Mode)
	default:
		return fmt.Sprintf("published on node %q at %q (%s, %s)", u.NodeID, u.Path, u.Mode, rw)
	}
}

// checkConflict decides whether req may be added to a volume that is already
// in use as existing says. It enforces the access modes as the CSI spec
// defines them:
//
//   - SINGLE_NODE_*: only one node may attach, stage or publish the volume.
//   - MULTI_NODE_SINGLE_WRITER: only one node may use it read-write.
//   - SINGLE_NODE_SINGLE_WRITER: one target path on the node.
//   - SINGLE_NODE_WRITER: one read-write target path on the node (read-only
//     targets may be added).
//   - a second target path on the same node must use the same access mode.
//
// Entries of existing at the same node and path as req (repeats of the same
// request) must be handled by the caller before, as idempotent calls. The
// error names the volume and the usage that blocks req.
func checkConflict(volumeID string, existing []usage, req usage) error {
	for _, e := range existing {
		if e.NodeID != req.NodeID {
			if e.Mode.singleNode() || req.Mode.singleNode() {
				mode := req.Mode
				if e.Mode.singleNode() {
					mode = e.Mode
				}
				return fmt.Errorf("volume %q is %s; access mode %s allows one node at a time, so node %q cannot use it until node %q releases it",
					volumeID, e, mode, req.NodeID, e.NodeID)
			}
			if e.writable() && req.writable() && (e.Mode == modeMultiNodeSingleWriter || req.Mode == modeMultiNodeSingleWriter) {
				return fmt.Errorf("volume %q is %s; access mode %s allows one read-write node, so node %q may only use it read-only",
					volumeID, e, modeMultiNodeSingleWriter, req.NodeID)
			}
			continue
		}
		if e.Kind != usagePublish || req.Kind != usagePublish || e.Path == req.Path {
			continue
		}
		// A second target path on the same node.
		if e.Mode != req.Mode {
			return fmt.Errorf("volume %q is %s; publishing it at %q with a different access mode (%s) is not allowed",
				volumeID, e, req.Path, req.Mode)
		}
		switch {
		case req.Mode == modeSingleNodeSingleWriter:
			return fmt.Errorf("volume %q is %s; access mode %s allows one target path, so it cannot also be published at %q",
				volumeID, e, req.Mode, req.Path)
		case req.Mode == modeSingleNodeWriter && e.writable() && req.writable():
			return fmt.Errorf("volume %q is %s; access mode %s allows one read-write target path, so it can only be published read-only at %q",
				volumeID, e, req.Mode, req.Path)
		}
	}
	return nil
}
