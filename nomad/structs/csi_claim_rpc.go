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

// CSIVolumeClaimProgressRequest is a client's report on a claim it is
// trying to move forward on the node: staging and publishing it before
// the alloc's tasks start (Phase "publish"), or unpublishing it after
// they exited (Phase "unpublish"). Error is what failed ("" once it
// worked), Attempts how many tries so far and NextRetry (unix ns) when
// the next one is due. The servers record it on the claim, without
// changing its step, so `volume status -verbose` shows why a claim has
// not moved — e.g. "node plugin hostpath not running" during an outage.
type CSIVolumeClaimProgressRequest struct {
	VolumeID     string
	AllocationID string
	NodeID       string
	Phase        string
	Error        string
	Attempts     int
	NextRetry    int64
	WriteRequest
}

// Phases of a CSIVolumeClaimProgressRequest.
const (
	CSIClaimPhasePublish   = "publish"
	CSIClaimPhaseUnpublish = "unpublish"
)
