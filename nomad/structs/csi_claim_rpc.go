package structs

// CSIVolumeClaimRequest is the client's Claim RPC, sent by the csi_hook
// before it stages and publishes a volume for an alloc. The server turns
// the alloc's reservation (made at plan apply) into a Taken claim, running
// ControllerPublish first when the plugin requires it. While another
// claim blocks it the server answers CodeNotReady, naming that claim; the
// client retries with backoff.
type CSIVolumeClaimRequest struct {
	VolumeID     string
	AllocationID string
	NodeID       string
	// ExternalNodeID is the node plugin's own ID for this node (from
	// NodeGetInfo), captured on the claim now.
	ExternalNodeID string
	Mode           CSIVolumeClaimMode
	AccessMode     CSIVolumeAccessMode
	AttachmentMode CSIVolumeAttachmentMode
	WriteRequest
}

// CSIVolumeClaimResponse carries what the client needs to stage and
// publish: the publish context from ControllerPublish and the volume
// (with its secrets: this reply goes only to the claiming client).
type CSIVolumeClaimResponse struct {
	PublishContext map[string]string
	Volume         *CSIVolume
	WriteMeta
}

// CSIVolumeUnpublishRequest is the client's report that the node side of
// a claim is done (NodeUnpublish, and NodeUnstage when it was the last
// user, succeeded) after every task of the alloc exited. The server moves
// the claim to NodeDetached and on towards freed.
type CSIVolumeUnpublishRequest struct {
	VolumeID     string
	AllocationID string
	NodeID       string
	WriteRequest
}

// CSIVolumeDetachRequest is the operator's `volume detach VOL NODE`:
// release the node's claims on the volume (after node-side unpublish), or
// with Force, for a node that is gone, without waiting for the node.
type CSIVolumeDetachRequest struct {
	VolumeID string
	NodeID   string
	Force    bool
	WriteRequest
}
