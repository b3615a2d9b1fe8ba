package csi

import (
	"errors"
	"fmt"
	"slices"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/berth-io/berth/nomad/structs"
)

// VolumeCapability is how a volume is to be used: Berth's access and
// attachment modes, plus mount options for file-system attachments.
type VolumeCapability struct {
	AccessMode     structs.CSIVolumeAccessMode
	AttachmentMode structs.CSIVolumeAttachmentMode
	MountOptions   *structs.CSIMountOptions // file-system only; nil for none
}

// Validate reports a capability that cannot be sent to a plugin.
func (v *VolumeCapability) Validate() error {
	if v == nil {
		return errors.New("missing volume capability")
	}
	var p problems
	p.add(!v.AccessMode.Valid(), fmt.Sprintf("unknown access mode %q", v.AccessMode))
	p.add(!v.AttachmentMode.Valid(), fmt.Sprintf("unknown attachment mode %q", v.AttachmentMode))
	p.add(v.AttachmentMode == structs.CSIVolumeAttachmentModeBlockDevice && v.MountOptions != nil &&
		(v.MountOptions.FSType != "" || len(v.MountOptions.MountFlags) > 0),
		"mount options are not allowed with attachment mode block-device")
	return p.err()
}

// CapabilityFor is the capability to request for the access and
// attachment modes, carrying (a copy of) mount options o only for a
// file-system attachment: a block device has no file system to mount.
func CapabilityFor(access structs.CSIVolumeAccessMode, attach structs.CSIVolumeAttachmentMode, o *structs.CSIMountOptions) *VolumeCapability {
	v := &VolumeCapability{AccessMode: access, AttachmentMode: attach}
	if attach == structs.CSIVolumeAttachmentModeFilesystem {
		v.MountOptions = o.Copy()
	}
	return v
}

// CapabilitiesFor translates a volume's requested capabilities, each with
// the volume's mount options o as CapabilityFor gives them. Nil entries
// are skipped.
func CapabilitiesFor(caps []*structs.CSIVolumeCapability, o *structs.CSIMountOptions) []*VolumeCapability {
	out := make([]*VolumeCapability, 0, len(caps))
	for _, c := range caps {
		if c != nil {
			out = append(out, CapabilityFor(c.AccessMode, c.AttachmentMode, o))
		}
	}
	return out
}

var accessModeToProto = map[structs.CSIVolumeAccessMode]csipb.VolumeCapability_AccessMode_Mode{
	structs.CSIVolumeAccessModeSingleNodeReader:       csipb.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
	structs.CSIVolumeAccessModeSingleNodeWriter:       csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER,
	structs.CSIVolumeAccessModeSingleNodeSingleWriter: csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER,
	structs.CSIVolumeAccessModeSingleNodeMultiWriter:  csipb.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER,
	structs.CSIVolumeAccessModeMultiNodeReader:        csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY,
	structs.CSIVolumeAccessModeMultiNodeSingleWriter:  csipb.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER,
	structs.CSIVolumeAccessModeMultiNodeMultiWriter:   csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER,
}

// toProto translates a validated capability.
func (v *VolumeCapability) toProto() *csipb.VolumeCapability {
	if v == nil {
		return nil
	}
	out := &csipb.VolumeCapability{
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: accessModeToProto[v.AccessMode]},
	}
	if v.AttachmentMode == structs.CSIVolumeAttachmentModeBlockDevice {
		out.AccessType = &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}}
		return out
	}
	mount := &csipb.VolumeCapability_MountVolume{}
	if v.MountOptions != nil {
		mount.FsType = v.MountOptions.FSType
		mount.MountFlags = slices.Clone(v.MountOptions.MountFlags)
	}
	out.AccessType = &csipb.VolumeCapability_Mount{Mount: mount}
	return out
}

// volumeCapabilityFromProto translates a capability a plugin sent; ok is
// false for an access mode or access type this spec version does not know.
func volumeCapabilityFromProto(pb *csipb.VolumeCapability) (v *VolumeCapability, ok bool) {
	v = &VolumeCapability{}
	mode := pb.GetAccessMode().GetMode()
	for m, p := range accessModeToProto {
		if p == mode {
			v.AccessMode = m
		}
	}
	switch t := pb.GetAccessType().(type) {
	case *csipb.VolumeCapability_Block:
		v.AttachmentMode = structs.CSIVolumeAttachmentModeBlockDevice
	case *csipb.VolumeCapability_Mount:
		v.AttachmentMode = structs.CSIVolumeAttachmentModeFilesystem
		if t.Mount.GetFsType() != "" || len(t.Mount.GetMountFlags()) > 0 {
			v.MountOptions = &structs.CSIMountOptions{
				FSType:     t.Mount.GetFsType(),
				MountFlags: slices.Clone(t.Mount.GetMountFlags()),
			}
		}
	}
	return v, v.AccessMode.Valid() && v.AttachmentMode.Valid()
}

// validateCapabilities validates a non-empty list of capabilities.
func validateCapabilities(caps []*VolumeCapability) error {
	if len(caps) == 0 {
		return errors.New("missing volume capabilities")
	}
	var p problems
	for i, c := range caps {
		if err := c.Validate(); err != nil {
			p.addErr(fmt.Errorf("volume capability %d: %w", i, err))
		}
	}
	return p.err()
}

func capabilitiesToProto(caps []*VolumeCapability) []*csipb.VolumeCapability {
	if caps == nil {
		return nil
	}
	out := make([]*csipb.VolumeCapability, len(caps))
	for i, c := range caps {
		out[i] = c.toProto()
	}
	return out
}
