package structs

// The servers reach CSI controller plugins through the clients that run
// them, over each client's node session (DESIGN.md §4: "controller RPCs go
// to a healthy controller instance via its client"). These are the
// session's request and reply types: the servers call, the client answers.

// NodeSessionIdentity is the client's answer to NodeSession.Identify, the
// first call a server makes on a new session: the node it speaks for, and
// its secret, which the server checks against the registered node.
type NodeSessionIdentity struct {
	NodeID   string
	SecretID string
}

// NodeSessionIdentifyRequest is NodeSession.Identify's (empty) request.
type NodeSessionIdentifyRequest struct{}

// ClientCSIControllerRequest names the controller plugin and the volume a
// controller call is about; every ClientCSIController* request embeds it.
type ClientCSIControllerRequest struct {
	PluginID   string
	VolumeID   string // Berth's ID, for messages
	ExternalID string // the plugin's ID for the volume
	Secrets    CSISecrets
}

// ClientCSIControllerPublishRequest attaches a volume to a node.
type ClientCSIControllerPublishRequest struct {
	ClientCSIControllerRequest
	ExternalNodeID string
	AccessMode     CSIVolumeAccessMode
	AttachmentMode CSIVolumeAttachmentMode
	MountOptions   *CSIMountOptions
	ReadOnly       bool
	VolumeContext  map[string]string
	// Deadline (unix ns, the servers' clock) is when the plugin call must
	// have ended, retries included: the claim's PublishUntil, which the
	// release waits out before controller-unpublishing. Zero: no bound
	// but the client's own.
	Deadline int64
}

// ClientCSIControllerPublishResponse carries the publish context for the
// node plugin.
type ClientCSIControllerPublishResponse struct {
	PublishContext map[string]string
}

// ClientCSIControllerUnpublishRequest detaches a volume from a node.
type ClientCSIControllerUnpublishRequest struct {
	ClientCSIControllerRequest
	ExternalNodeID string
	// Deadline (unix ns, the servers' clock) is when the plugin call must
	// have ended, retries included: a server that stopped waiting for the
	// call holds the node's controller calls until then (plus ClockSkew),
	// so an unpublish it gave up on cannot land after a later publish to
	// the same node (seed 4060). Zero: no bound but the client's own.
	Deadline int64
}

// ClientCSIControllerValidateRequest asks the plugin to confirm that the
// volume supports every capability.
type ClientCSIControllerValidateRequest struct {
	ClientCSIControllerRequest
	Capabilities  []*CSIVolumeCapability
	MountOptions  *CSIMountOptions
	VolumeContext map[string]string
	Parameters    map[string]string
}

// ClientCSIControllerCreateRequest provisions a volume. Name is the
// idempotency key: creating the same name twice yields one volume.
type ClientCSIControllerCreateRequest struct {
	ClientCSIControllerRequest
	Name                string
	CapacityMin         int64
	CapacityMax         int64
	Capabilities        []*CSIVolumeCapability
	MountOptions        *CSIMountOptions
	Parameters          map[string]string
	MutableParameters   map[string]string
	RequestedTopologies *CSITopologyRequest
	SnapshotID, CloneID string
}

// ClientCSIControllerCreateResponse is the volume as the plugin made it.
type ClientCSIControllerCreateResponse struct {
	ExternalID    string
	CapacityBytes int64
	VolumeContext map[string]string
	Topologies    []*CSITopology
}

// ClientCSIControllerDeleteRequest deletes a volume in the provider.
type ClientCSIControllerDeleteRequest struct {
	ClientCSIControllerRequest
}

// ClientCSIControllerResponse is the reply of the calls that return
// nothing but an error.
type ClientCSIControllerResponse struct{}

// CSIVolumeCreateRequest creates volumes through their plugins'
// controllers and registers them.
type CSIVolumeCreateRequest struct {
	Volumes []*CSIVolume
	WriteRequest
}

// CSIVolumeCreateResponse carries the volumes as created: register's reply.
type CSIVolumeCreateResponse = CSIVolumeRegisterResponse

// CSIVolumeDeleteRequest deletes a volume in its provider and deregisters
// it. Secrets, when given, replace the volume's for the plugin call.
type CSIVolumeDeleteRequest struct {
	VolumeID string
	Secrets  CSISecrets
	WriteRequest
}

// ClientCSINodeDetachRequest asks a client to unpublish a volume for an
// alloc on its node (NodeUnpublish, and NodeUnstage for the node's last
// user), when the client did not do it by itself.
type ClientCSINodeDetachRequest struct {
	PluginID       string
	Namespace      string
	VolumeID       string
	ExternalID     string
	AllocID        string
	AccessMode     CSIVolumeAccessMode
	AttachmentMode CSIVolumeAttachmentMode
	ReadOnly       bool
}

// ClientCSIControllerExpandRequest grows a volume in the provider
// (ControllerExpandVolume).
type ClientCSIControllerExpandRequest struct {
	ClientCSIControllerRequest
	CapacityMin, CapacityMax int64
	// Capability is one the volume is used with (optional).
	Capability *CSIVolumeCapability
}

// ClientCSIControllerExpandResponse is the new size, and whether every node
// that stages or publishes the volume must also expand it.
type ClientCSIControllerExpandResponse struct {
	CapacityBytes         int64
	NodeExpansionRequired bool
}

// ClientCSIControllerModifyRequest sets a volume's mutable parameters in
// the provider (ControllerModifyVolume).
type ClientCSIControllerModifyRequest struct {
	ClientCSIControllerRequest
	MutableParameters map[string]string
}

// ClientCSINodeExpandRequest asks a client to grow a volume's file system
// on its node (NodeExpandVolume) after the controller grew the volume.
type ClientCSINodeExpandRequest struct {
	PluginID, Namespace, VolumeID, ExternalID string
	CapacityMin, CapacityMax                  int64
	Secrets                                   CSISecrets
}

// ClientCSINodeExpandResponse is the size the node plugin reported (0 if
// it did not say).
type ClientCSINodeExpandResponse struct {
	CapacityBytes int64
}
