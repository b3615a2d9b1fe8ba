package claims

import (
	"fmt"
	"strings"

	"github.com/berth-io/berth/nomad/structs"
)

// TakePlan is what a client's Claim does: the claim to write as Taken and
// how to controller-publish first.
type TakePlan struct {
	// Claim is the claim to write as Taken (a copy; Step not yet set).
	Claim *structs.CSIVolumeClaim
	// ControllerPublish: run ControllerPublishVolume before Taken.
	ControllerPublish bool
	// PublishReadOnly is ControllerPublish's readonly field: the claim's
	// read-only, and only when the controller advertises
	// PUBLISH_READONLY (otherwise the spec says the CO sends false and
	// enforces read-only on the node).
	PublishReadOnly bool
}

// Take plans the Taken claim an alloc asks for on top of its reservation
// (existing, nil when it has none), checking its modes against the
// volume's capabilities and the reservation. prof is the plugin's profile
// now.
func Take(vol *structs.CSIVolume, existing *structs.CSIVolumeClaim, alloc *structs.Allocation,
	args *structs.CSIVolumeClaimRequest, prof Profile) (TakePlan, error) {
	claim := &structs.CSIVolumeClaim{AllocID: alloc.ID, JobID: alloc.JobID, NodeID: args.NodeID}
	if existing != nil {
		claim = existing.Copy()
	}
	var errs []string
	pick := func(what, asked, reserved string) string {
		switch {
		case asked == "":
			return reserved
		case reserved != "" && asked != reserved:
			errs = append(errs, fmt.Sprintf("%s %q differs from the reservation's %q", what, asked, reserved))
		}
		return asked
	}
	claim.Mode = structs.CSIVolumeClaimMode(pick("claim mode", string(args.Mode), string(claim.Mode)))
	claim.AccessMode = structs.CSIVolumeAccessMode(pick("access mode", string(args.AccessMode), string(claim.AccessMode)))
	claim.AttachmentMode = structs.CSIVolumeAttachmentMode(pick("attachment mode", string(args.AttachmentMode), string(claim.AttachmentMode)))
	if args.ExternalNodeID != "" {
		claim.ExternalNodeID = args.ExternalNodeID
	}
	switch {
	case len(errs) > 0:
	case claim.Mode == "" || claim.AccessMode == "" || claim.AttachmentMode == "":
		errs = append(errs, "the request must give the claim mode, access mode and attachment mode")
	case !vol.HasCapability(claim.AccessMode, claim.AttachmentMode):
		caps := make([]string, 0, len(vol.RequestedCapabilities))
		for _, c := range vol.RequestedCapabilities {
			caps = append(caps, fmt.Sprintf("%s/%s", c.AccessMode, c.AttachmentMode))
		}
		errs = append(errs, fmt.Sprintf("the volume has no capability %s/%s (it has %s)",
			claim.AccessMode, claim.AttachmentMode, strings.Join(caps, ", ")))
	case claim.Mode == structs.CSIVolumeClaimWrite && claim.AccessMode.ReadOnly():
		errs = append(errs, fmt.Sprintf("access mode %s allows no writers", claim.AccessMode))
	}
	if len(errs) > 0 {
		return TakePlan{}, structs.NewError(structs.CodeInvalid, "claiming volume %q for alloc %s: %s", vol.ID, alloc.ID, strings.Join(errs, "; "))
	}
	claim.ReadOnly = claim.Mode == structs.CSIVolumeClaimRead
	return TakePlan{
		Claim:             claim,
		ControllerPublish: prof.ControllerPublish,
		PublishReadOnly:   prof.ControllerPublish && prof.PublishReadOnly && claim.ReadOnly,
	}, nil
}
