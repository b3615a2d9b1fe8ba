package hostpath

import (
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// AccessMode is a CSI access mode. It is stored in the state file by its
// enum name so that the file stays readable by operators.
type AccessMode csi.VolumeCapability_AccessMode_Mode

// Access modes used by the conflict rules, named once.
const (
	modeSingleNodeWriter       = AccessMode(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
	modeSingleNodeReaderOnly   = AccessMode(csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY)
	modeSingleNodeSingleWriter = AccessMode(csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER)
	modeSingleNodeMultiWriter  = AccessMode(csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER)
	modeMultiNodeReaderOnly    = AccessMode(csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY)
	modeMultiNodeSingleWriter  = AccessMode(csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER)
	modeMultiNodeMultiWriter   = AccessMode(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)
)

func (m AccessMode) String() string { return csi.VolumeCapability_AccessMode_Mode(m).String() }

// MarshalText encodes the mode as its CSI enum name.
func (m AccessMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText decodes a CSI enum name.
func (m *AccessMode) UnmarshalText(b []byte) error {
	v, ok := csi.VolumeCapability_AccessMode_Mode_value[string(b)]
	if !ok {
		return fmt.Errorf("unknown access mode %q", b)
	}
	*m = AccessMode(v)
	return nil
}

// known reports whether the mode is one this plugin understands.
func (m AccessMode) known() bool {
	switch m {
	case modeSingleNodeWriter, modeSingleNodeReaderOnly, modeSingleNodeSingleWriter,
		modeSingleNodeMultiWriter, modeMultiNodeReaderOnly, modeMultiNodeSingleWriter,
		modeMultiNodeMultiWriter:
		return true
	}
	return false
}

// singleNode reports whether the mode lets only one node use the volume at a
// time.
func (m AccessMode) singleNode() bool {
	switch m {
	case modeSingleNodeWriter, modeSingleNodeReaderOnly, modeSingleNodeSingleWriter, modeSingleNodeMultiWriter:
		return true
	}
	return false
}

// readerOnly reports whether the mode only allows read-only use; such
// volumes are always mounted read-only, whatever the readonly flag says.
func (m AccessMode) readerOnly() bool {
	return m == modeSingleNodeReaderOnly || m == modeMultiNodeReaderOnly
}

// parseCapability checks a volume capability and returns its access mode.
// Both access types are supported: mount (the volume directory, bound) and
// block (a loop device of an image file in it; see block.go). The fs_type
// and mount_flags of a mount capability are accepted and ignored, since a
// bind mount of a directory has no file system of its own to format.
func parseCapability(c *csi.VolumeCapability) (AccessMode, error) {
	if c == nil {
		return 0, fmt.Errorf("volume_capability is required")
	}
	if c.GetMount() == nil && c.GetBlock() == nil {
		return 0, fmt.Errorf("access type is required: use the mount (file system) or block access type")
	}
	m := AccessMode(c.GetAccessMode().GetMode())
	if m == AccessMode(csi.VolumeCapability_AccessMode_UNKNOWN) {
		return 0, fmt.Errorf("access_mode is required")
	}
	if !m.known() {
		return 0, fmt.Errorf("unknown access mode %d", int32(m))
	}
	return m, nil
}

// parseCapabilities checks a non-empty list of capabilities.
func parseCapabilities(cs []*csi.VolumeCapability) error {
	if len(cs) == 0 {
		return fmt.Errorf("volume_capabilities are required")
	}
	for _, c := range cs {
		if _, err := parseCapability(c); err != nil {
			return err
		}
	}
	return nil
}
