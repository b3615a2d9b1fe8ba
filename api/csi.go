package api

import (
	"maps"
	"net/url"
	"strconv"
	"time"
)

// CSIVolumeAccessMode is how many nodes may use a volume, and how.
type CSIVolumeAccessMode string

// Access modes. The first five are Nomad's; the single-node-single-writer
// and single-node-multi-writer modes of CSI 1.5 are Berth additions.
const (
	CSIVolumeAccessModeUnknown                CSIVolumeAccessMode = ""
	CSIVolumeAccessModeSingleNodeReader       CSIVolumeAccessMode = "single-node-reader-only"
	CSIVolumeAccessModeSingleNodeWriter       CSIVolumeAccessMode = "single-node-writer"
	CSIVolumeAccessModeMultiNodeReader        CSIVolumeAccessMode = "multi-node-reader-only"
	CSIVolumeAccessModeMultiNodeSingleWriter  CSIVolumeAccessMode = "multi-node-single-writer"
	CSIVolumeAccessModeMultiNodeMultiWriter   CSIVolumeAccessMode = "multi-node-multi-writer"
	CSIVolumeAccessModeSingleNodeSingleWriter CSIVolumeAccessMode = "single-node-single-writer"
	CSIVolumeAccessModeSingleNodeMultiWriter  CSIVolumeAccessMode = "single-node-multi-writer"
)

// CSIVolumeAccessModes lists every known access mode, Nomad's first.
var CSIVolumeAccessModes = []CSIVolumeAccessMode{
	CSIVolumeAccessModeSingleNodeReader,
	CSIVolumeAccessModeSingleNodeWriter,
	CSIVolumeAccessModeMultiNodeReader,
	CSIVolumeAccessModeMultiNodeSingleWriter,
	CSIVolumeAccessModeMultiNodeMultiWriter,
	CSIVolumeAccessModeSingleNodeSingleWriter,
	CSIVolumeAccessModeSingleNodeMultiWriter,
}

// Valid reports whether m is a known, non-empty access mode.
func (m CSIVolumeAccessMode) Valid() bool {
	for _, k := range CSIVolumeAccessModes {
		if m == k {
			return true
		}
	}
	return false
}

// ReadOnly reports whether the mode allows only readers.
func (m CSIVolumeAccessMode) ReadOnly() bool {
	return m == CSIVolumeAccessModeSingleNodeReader || m == CSIVolumeAccessModeMultiNodeReader
}

// SingleNode reports whether the mode allows only one node at a time.
func (m CSIVolumeAccessMode) SingleNode() bool {
	switch m {
	case CSIVolumeAccessModeSingleNodeReader, CSIVolumeAccessModeSingleNodeWriter,
		CSIVolumeAccessModeSingleNodeSingleWriter, CSIVolumeAccessModeSingleNodeMultiWriter:
		return true
	}
	return false
}

// CSIVolumeAttachmentMode is how a volume appears to a task.
type CSIVolumeAttachmentMode string

// Attachment modes.
const (
	CSIVolumeAttachmentModeUnknown     CSIVolumeAttachmentMode = ""
	CSIVolumeAttachmentModeBlockDevice CSIVolumeAttachmentMode = "block-device"
	CSIVolumeAttachmentModeFilesystem  CSIVolumeAttachmentMode = "file-system"
)

// CSIVolumeAttachmentModes lists every known attachment mode.
var CSIVolumeAttachmentModes = []CSIVolumeAttachmentMode{
	CSIVolumeAttachmentModeFilesystem,
	CSIVolumeAttachmentModeBlockDevice,
}

// Valid reports whether m is a known, non-empty attachment mode.
func (m CSIVolumeAttachmentMode) Valid() bool {
	return m == CSIVolumeAttachmentModeBlockDevice || m == CSIVolumeAttachmentModeFilesystem
}

// Volume types. Only CSI volumes exist in Berth's volume API.
const (
	CSIVolumeTypeCSI  = "csi"
	CSIVolumeTypeHost = "host"
)

// CSIVolumeState is where a volume is in its own lifecycle (Berth only).
type CSIVolumeState string

// Volume states.
const (
	CSIVolumeStateReady    CSIVolumeState = "ready"
	CSIVolumeStateCreating CSIVolumeState = "creating"
	CSIVolumeStateDeleting CSIVolumeState = "deleting"
)

// CSIVolumeClaimMode is whether a claim reads or writes.
type CSIVolumeClaimMode string

// Claim modes.
const (
	CSIVolumeClaimRead  CSIVolumeClaimMode = "read"
	CSIVolumeClaimWrite CSIVolumeClaimMode = "write"
)

// CSIClaimStep is where a claim is in Berth's claim protocol:
//
//	plan apply          client Claim RPC          all tasks exited, node unpublished
//	──────────► reserved ───────────────► taken ──────────────────────────────► node-detached
//	               │                                                                  │
//	               │                                   controller unpublish (if needed)
//	               │                                                                  ▼
//	               └── alloc stopped before it ran ──────────────────────► controller-detached ──► freed
type CSIClaimStep string

// Claim steps.
const (
	CSIClaimReserved           CSIClaimStep = "reserved"
	CSIClaimTaken              CSIClaimStep = "taken"
	CSIClaimNodeDetached       CSIClaimStep = "node-detached"
	CSIClaimControllerDetached CSIClaimStep = "controller-detached"
	// CSIClaimNeedsOperator: the release stopped on an error the plugin
	// will repeat; BlockedStep and LastError say where and why, and
	// `volume detach` resumes it (or skips a step the plugin does not
	// implement).
	CSIClaimNeedsOperator CSIClaimStep = "needs-operator"
	CSIClaimFreed         CSIClaimStep = "freed"
)

// CSIVolumes is the /v1/volumes and /v1/volume/csi/:id endpoints.
type CSIVolumes struct{ c *Client }

// CSIVolumes returns the CSI volume endpoints.
func (c *Client) CSIVolumes() *CSIVolumes { return &CSIVolumes{c: c} }

// List lists CSI volumes (GET /v1/volumes?type=csi). Filter by plugin or
// node with q.Params "plugin_id" and "node_id".
func (v *CSIVolumes) List(q *QueryOptions) ([]*CSIVolumeListStub, *QueryMeta, error) {
	var resp volumeStubList
	qm, err := v.c.query("/v1/volumes", &resp, withQueryParams(q, "type", "csi"))
	if err != nil {
		return nil, nil, err
	}
	return resp, qm, nil
}

// PluginList lists the volumes of one plugin.
func (v *CSIVolumes) PluginList(pluginID string, q *QueryOptions) ([]*CSIVolumeListStub, *QueryMeta, error) {
	return v.List(withQueryParams(q, "plugin_id", pluginID))
}

// Info reads one volume (GET /v1/volume/csi/:id).
func (v *CSIVolumes) Info(id string, q *QueryOptions) (*CSIVolume, *QueryMeta, error) {
	var resp CSIVolume
	qm, err := v.c.query("/v1/volume/csi/"+url.PathEscape(id), &resp, q)
	if err != nil {
		return nil, nil, err
	}
	return &resp, qm, nil
}

// Register registers an existing volume, or updates a registered one
// (PUT /v1/volume/csi/:id {"Volumes": [vol]}).
func (v *CSIVolumes) Register(vol *CSIVolume, w *WriteOptions) (*WriteMeta, error) {
	_, wm, err := v.RegisterOpts(&CSIVolumeRegisterRequest{Volumes: []*CSIVolume{vol}}, w)
	return wm, err
}

// RegisterOpts is Register with the whole request and response; the
// response carries the server's warnings. The path names the first
// volume.
func (v *CSIVolumes) RegisterOpts(req *CSIVolumeRegisterRequest, w *WriteOptions) (*CSIVolumeRegisterResponse, *WriteMeta, error) {
	id := ""
	if len(req.Volumes) > 0 && req.Volumes[0] != nil {
		id = req.Volumes[0].ID
	}
	var resp CSIVolumeRegisterResponse
	wm, err := v.c.write("PUT", "/v1/volume/csi/"+url.PathEscape(id), req, volumesResponse{&resp}, w)
	if err != nil {
		return nil, nil, err
	}
	return &resp, wm, nil
}

// Deregister removes a volume from Berth; the storage provider keeps it
// (DELETE /v1/volume/csi/:id?force=). force drops the claims of
// allocations that have stopped; it fails while allocations still run.
func (v *CSIVolumes) Deregister(id string, force bool, w *WriteOptions) error {
	_, err := v.c.write("DELETE", "/v1/volume/csi/"+url.PathEscape(id), nil, nil, withParam(w, "force", strconv.FormatBool(force)))
	return err
}

// Detach releases a volume's claims on a node, for a node that cannot do
// it itself (DELETE /v1/volume/csi/:id/detach?node=).
func (v *CSIVolumes) Detach(volID, nodeID string, w *WriteOptions) error {
	_, err := v.c.write("DELETE", "/v1/volume/csi/"+url.PathEscape(volID)+"/detach", nil, nil, withParam(w, "node", nodeID))
	return err
}

// Create makes a volume in the storage provider through the plugin's
// controller and registers it (PUT /v1/volume/csi/:id/create).
func (v *CSIVolumes) Create(vol *CSIVolume, w *WriteOptions) ([]*CSIVolume, *WriteMeta, error) {
	resp, wm, err := v.CreateOpts(&CSIVolumeCreateRequest{Volumes: []*CSIVolume{vol}}, w)
	if err != nil {
		return nil, nil, err
	}
	return resp.Volumes, wm, nil
}

// CreateOpts is Create with the whole request and response.
func (v *CSIVolumes) CreateOpts(req *CSIVolumeCreateRequest, w *WriteOptions) (*CSIVolumeCreateResponse, *WriteMeta, error) {
	id := ""
	if len(req.Volumes) > 0 && req.Volumes[0] != nil {
		id = req.Volumes[0].ID
	}
	var resp CSIVolumeCreateResponse
	wm, err := v.c.write("PUT", "/v1/volume/csi/"+url.PathEscape(id)+"/create", req, &resp, w)
	if err != nil {
		return nil, nil, err
	}
	return &resp, wm, nil
}

// Delete deletes a volume in the storage provider and deregisters it
// (DELETE /v1/volume/csi/:id/delete).
func (v *CSIVolumes) Delete(id string, w *WriteOptions) error {
	return v.DeleteOpts(&CSIVolumeDeleteRequest{ExternalVolumeID: id}, w)
}

// DeleteOpts is Delete with secrets for the plugin, sent in the
// X-Nomad-CSI-Secrets header.
func (v *CSIVolumes) DeleteOpts(req *CSIVolumeDeleteRequest, w *WriteOptions) error {
	var headers map[string]string
	if len(req.Secrets) > 0 {
		headers = map[string]string{CSISecretsHeader: EncodeCSISecrets(req.Secrets)}
	}
	_, err := v.c.writeWithHeaders("DELETE", "/v1/volume/csi/"+url.PathEscape(req.ExternalVolumeID)+"/delete", headers, nil, nil, w)
	return err
}

// CSIMountOptions are file system options for a mount. MountFlags may
// hold secrets; the API returns them redacted.
type CSIMountOptions struct {
	FSType     string
	MountFlags []string
}

// CSISecrets are credentials passed to a plugin. The API never returns
// them.
type CSISecrets map[string]string

// CSIVolumeCapability is one (access mode, attachment mode) pair a volume
// supports.
type CSIVolumeCapability struct {
	AccessMode     CSIVolumeAccessMode
	AttachmentMode CSIVolumeAttachmentMode
}

// CSITopology is one set of topology segments, e.g. {"zone": "a"}.
type CSITopology struct {
	Segments map[string]string
}

// CSITopologyRequest is where a volume must (Required) or should
// (Preferred) be accessible.
type CSITopologyRequest struct {
	Required  []*CSITopology
	Preferred []*CSITopology
}

// CSIVolume is a volume as the HTTP API carries it. The fields up to
// ModifyTime are Nomad's; State, Claims and PastClaims are Berth's, and
// Nomad's client ignores them.
type CSIVolume struct {
	ID         string
	Name       string
	ExternalID string // the storage provider's ID; ID is used when empty
	Namespace  string

	// Topologies are where the volume is accessible, as the provider said.
	Topologies          []*CSITopology
	RequestedTopologies *CSITopologyRequest

	// AccessMode and AttachmentMode are those of the current claims.
	AccessMode     CSIVolumeAccessMode
	AttachmentMode CSIVolumeAttachmentMode
	MountOptions   *CSIMountOptions
	Secrets        CSISecrets
	Parameters     map[string]string
	Context        map[string]string
	Capacity       int64 // bytes

	RequestedCapacityMin  int64 // bytes
	RequestedCapacityMax  int64 // bytes
	RequestedCapabilities []*CSIVolumeCapability
	CloneID               string
	SnapshotID            string

	// ReadAllocs and WriteAllocs map the IDs of the allocs that hold
	// claims to nil; Allocations has their stubs.
	ReadAllocs  map[string]*Allocation
	WriteAllocs map[string]*Allocation
	Allocations []*AllocationListStub
	// Created is set when Berth made the volume (`volume create`) rather
	// than registering one that existed (Berth only).
	Created bool `json:",omitempty"`
	// CurrentReaders and CurrentWriters count the claims that hold the
	// volume, until each is freed (a releasing claim still holds it).
	CurrentReaders int
	CurrentWriters int

	// Schedulable and the counts below are the plugin's health, copied
	// onto the volume when it is read.
	Schedulable         bool
	PluginID            string
	Provider            string
	ProviderVersion     string
	ControllerRequired  bool
	ControllersHealthy  int
	ControllersExpected int
	NodesHealthy        int
	NodesExpected       int
	// ResourceExhausted is when the provider last ran out of room; null
	// when it never did.
	ResourceExhausted *time.Time

	CreateIndex uint64
	ModifyIndex uint64
	CreateTime  int64 // unix ns
	ModifyTime  int64 // unix ns

	// State is where the volume is in its lifecycle (Berth only).
	State CSIVolumeState `json:",omitempty"`
	// Claims are the live claims, oldest first (Berth only).
	Claims []*CSIVolumeClaim `json:",omitempty"`
	// PastClaims are recently freed claims, newest last (Berth only).
	PastClaims []*CSIVolumeClaim `json:",omitempty"`
	// Stats are the latest usage samples by node ID, from the nodes the
	// volume is published on (Berth only; node plugins with
	// GET_VOLUME_STATS).
	Stats map[string]*CSIVolumeStats `json:",omitempty"`
	// Expansion is the last expansion of the volume (Berth only).
	Expansion *CSIVolumeExpansion `json:",omitempty"`
	// MutableParameters are the parameters the plugin may change on a
	// live volume (MODIFY_VOLUME); re-running create or register with
	// other values changes them (Berth only).
	MutableParameters map[string]string `json:",omitempty"`
	// Modification is the last change of the mutable parameters (Berth
	// only).
	Modification *CSIVolumeModification `json:",omitempty"`
}

// CSIVolumeModification is the last change of a volume's mutable
// parameters (Berth only): the ones sent, and the plugin's refusal if it
// refused.
type CSIVolumeModification struct {
	Parameters map[string]string `json:",omitempty"`
	Error      string            `json:",omitempty"`
	Time       int64
}

// CSIVolumeExpansion is the last expansion of a volume, step by step
// (Berth only).
type CSIVolumeExpansion struct {
	RequestedBytes int64
	ControllerDone bool
	CapacityBytes  int64
	NodeRequired   bool
	// Nodes says, by node ID, "pending" or "expanded".
	Nodes map[string]string `json:",omitempty"`
	Error string            `json:",omitempty"`
	Time  int64
}

// CSIVolumeStats is one node's sample of a volume's usage (Berth only).
// A figure the plugin did not report is -1.
type CSIVolumeStats struct {
	NodeID          string
	UsedBytes       int64
	AvailableBytes  int64
	TotalBytes      int64
	UsedInodes      int64
	AvailableInodes int64
	// Condition is set when the node plugin reports volume conditions.
	Condition *CSIVolumeCondition `json:",omitempty"`
	// SampledAt is when the node sampled it (unix ns).
	SampledAt int64
}

// CSIVolumeCondition is a node plugin's word on a volume's health.
type CSIVolumeCondition struct {
	Abnormal bool
	Message  string
}

// CSIVolumeClaim is one alloc's claim on a volume and how far it got
// (Berth only; Nomad keeps claims out of its API).
type CSIVolumeClaim struct {
	AllocID        string
	JobID          string
	NodeID         string
	ExternalNodeID string // the plugin's ID for the node
	Mode           CSIVolumeClaimMode
	AccessMode     CSIVolumeAccessMode
	AttachmentMode CSIVolumeAttachmentMode
	ReadOnly       bool
	Step           CSIClaimStep
	// LastError is the last failure releasing the claim; Attempts counts
	// the tries and NextRetry (unix ns, 0 when not waiting) is the next.
	LastError string
	Attempts  int
	NextRetry int64
	// ReleaseReason says why a claim was freed outside the normal path,
	// e.g. "detach -force".
	ReleaseReason string
	// BlockedStep is the step a needs-operator claim stopped at, and
	// Unsupported says the plugin does not implement that step's RPC.
	BlockedStep CSIClaimStep
	Unsupported bool
	// ControllerPublished: the servers may have controller-published the
	// volume for this claim (the plugin's controller attaches).
	ControllerPublished bool
	// History is the claim's timeline, oldest first (Berth's addition):
	// each change of its step, error or attempts, the newest 16 kept.
	History    []CSIClaimTransition `json:",omitempty"`
	CreateTime int64                // unix ns
	ModifyTime int64                // unix ns
}

// CSIClaimTransition is one entry of a claim's timeline. From equals To
// when only the error or the attempts changed; From is empty for the
// claim's first step.
type CSIClaimTransition struct {
	From, To CSIClaimStep
	Time     int64 // unix ns, the leader's clock
	Index    uint64
	Error    string `json:",omitempty"`
	Attempts int
	Reason   string `json:",omitempty"` // why it was freed off the normal path
}

// CSIVolumeListStub is the list view of a volume. State and Claims are
// Berth's additions.
type CSIVolumeListStub struct {
	ID                  string
	Namespace           string
	Name                string
	ExternalID          string
	Topologies          []*CSITopology
	AccessMode          CSIVolumeAccessMode
	AttachmentMode      CSIVolumeAttachmentMode
	CurrentReaders      int
	CurrentWriters      int
	Schedulable         bool
	PluginID            string
	Provider            string
	ControllerRequired  bool
	ControllersHealthy  int
	ControllersExpected int
	NodesHealthy        int
	NodesExpected       int
	ResourceExhausted   *time.Time
	CreateIndex         uint64
	ModifyIndex         uint64

	// State is where the volume is in its lifecycle (Berth only).
	State CSIVolumeState `json:",omitempty"`
	// Claims counts the live claims (Berth only).
	Claims int `json:",omitempty"`
}

// CSIVolumeRegisterRequest is the body of PUT /v1/volume/csi/:id.
type CSIVolumeRegisterRequest struct {
	Volumes []*CSIVolume
}

// CSIVolumeRegisterResponse answers a volume registration.
type CSIVolumeRegisterResponse struct {
	Volumes  []*CSIVolume
	Warnings string
	// Outcomes: see CSIVolumeCreateResponse (a create only).
	Outcomes []string `json:",omitempty"`
}

// CSIVolumeCreateRequest is the body of PUT /v1/volume/csi/:id/create.
type CSIVolumeCreateRequest struct {
	Volumes []*CSIVolume
}

// CSIVolumeCreateResponse answers a volume creation with the volumes as
// created (their external IDs, capacity and topologies filled in).
type CSIVolumeCreateResponse struct {
	Volumes  []*CSIVolume
	Warnings string `json:",omitempty"`
	// Outcomes says what the create did to each of Volumes, in order:
	// CSIVolumeCreated, or for a volume that already existed and was
	// changed, CSIVolumeExpanded, CSIVolumeModified or
	// CSIVolumeExpandedModified (Berth only).
	Outcomes []string `json:",omitempty"`
}

// What a volume create did to a volume (CSIVolumeCreateResponse.Outcomes).
const (
	CSIVolumeCreated          = "created"
	CSIVolumeExpanded         = "expanded"
	CSIVolumeModified         = "modified"
	CSIVolumeExpandedModified = "expanded and modified"
)

// CSIVolumeDeleteRequest names a volume to delete and the secrets the
// plugin needs to delete it.
type CSIVolumeDeleteRequest struct {
	ExternalVolumeID string
	Secrets          CSISecrets
}

// CSIPlugins is the /v1/plugins and /v1/plugin/csi/:id endpoints.
type CSIPlugins struct{ c *Client }

// CSIPlugins returns the CSI plugin endpoints.
func (c *Client) CSIPlugins() *CSIPlugins { return &CSIPlugins{c: c} }

// List lists CSI plugins (GET /v1/plugins?type=csi).
func (p *CSIPlugins) List(q *QueryOptions) ([]*CSIPluginListStub, *QueryMeta, error) {
	var resp []*CSIPluginListStub
	qm, err := p.c.query("/v1/plugins", &resp, withQueryParams(q, "type", "csi"))
	if err != nil {
		return nil, nil, err
	}
	return resp, qm, nil
}

// Info reads one plugin (GET /v1/plugin/csi/:id).
func (p *CSIPlugins) Info(id string, q *QueryOptions) (*CSIPlugin, *QueryMeta, error) {
	var resp CSIPlugin
	qm, err := p.c.query("/v1/plugin/csi/"+url.PathEscape(id), &resp, q)
	if err != nil {
		return nil, nil, err
	}
	return &resp, qm, nil
}

// CSIPlugin is a CSI plugin and its instances across the cluster.
type CSIPlugin struct {
	ID                 string
	Provider           string
	Version            string
	ControllerRequired bool
	// Controllers and Nodes map node IDs to the instance on that node.
	Controllers         map[string]*CSIInfo
	Nodes               map[string]*CSIInfo
	Allocations         []*AllocationListStub
	ControllersHealthy  int
	ControllersExpected int
	NodesHealthy        int
	NodesExpected       int
	CreateIndex         uint64
	ModifyIndex         uint64
	CreateTime          int64 // unix ns
	ModifyTime          int64 // unix ns
}

// CSIPluginListStub is the list view of a plugin.
type CSIPluginListStub struct {
	ID                  string
	Provider            string
	ControllerRequired  bool
	ControllersHealthy  int
	ControllersExpected int
	NodesHealthy        int
	NodesExpected       int
	CreateIndex         uint64
	ModifyIndex         uint64
}

// CSIInfo is one plugin instance's fingerprint on one node.
type CSIInfo struct {
	PluginID                 string
	AllocID                  string
	Healthy                  bool
	HealthDescription        string
	UpdateTime               time.Time
	RequiresControllerPlugin bool
	RequiresTopologies       bool
	ControllerInfo           *CSIControllerInfo `json:",omitempty"`
	NodeInfo                 *CSINodeInfo       `json:",omitempty"`
	// Capacity is what a controller's GetCapacity said at its last
	// fingerprint (Berth only; controllers with GET_CAPACITY).
	Capacity *CSICapacity `json:",omitempty"`
}

// CSICapacity is a controller's GetCapacity answer in bytes, 0 where the
// plugin did not say; Topology is the one asked about, null for the
// plugin's total (Berth only).
type CSICapacity struct {
	AvailableBytes    int64
	MaximumVolumeSize int64
	MinimumVolumeSize int64
	Topology          *CSITopology `json:",omitempty"`
	Error             string       `json:",omitempty"`
}

// CSIControllerInfo is what a controller's ControllerGetCapabilities said.
// The servers' type (nomad/structs) has exactly these fields; the agent
// converts one to the other with a Go conversion, so the two cannot drift
// apart without breaking the build. Capabilities names what is supported.
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

// CSINodeInfo is what a node plugin's NodeGetInfo and NodeGetCapabilities
// said.
type CSINodeInfo struct {
	ID                      string // the plugin's ID for the node
	MaxVolumes              int64  // 0 means no limit
	AccessibleTopology      *CSITopology
	RequiresNodeStageVolume bool
	SupportsStats           bool
	SupportsExpand          bool
	SupportsCondition       bool
}

// CSISnapshot is a volume snapshot as its storage provider has it.
type CSISnapshot struct {
	ID                     string // the provider's snapshot ID
	ExternalSourceVolumeID string // the provider's ID of the source volume
	SizeBytes              int64
	CreateTime             int64 // unix seconds, from the provider
	IsReady                bool
	SourceVolumeID         string // Berth's volume ID
	PluginID               string

	// For create only.
	Name       string
	Secrets    CSISecrets
	Parameters map[string]string
}

// CSISnapshotCreateRequest is the body of PUT /v1/volumes/snapshot.
type CSISnapshotCreateRequest struct {
	Snapshots []*CSISnapshot
}

// CSISnapshotCreateResponse has the snapshots made.
type CSISnapshotCreateResponse struct {
	Snapshots []*CSISnapshot
}

// CSISnapshotListResponse is one page of a plugin's snapshots.
type CSISnapshotListResponse struct {
	Snapshots []*CSISnapshot
	NextToken string
}

// secretHeaders is the X-Nomad-CSI-Secrets header for secrets, or nil.
func secretHeaders(secrets CSISecrets) map[string]string {
	if len(secrets) == 0 {
		return nil
	}
	return map[string]string{CSISecretsHeader: EncodeCSISecrets(secrets)}
}

// CreateSnapshot snapshots the volume snap.SourceVolumeID (PUT
// /v1/volumes/snapshot); snap.Secrets go in X-Nomad-CSI-Secrets.
func (v *CSIVolumes) CreateSnapshot(snap *CSISnapshot, w *WriteOptions) (*CSISnapshotCreateResponse, error) {
	var resp CSISnapshotCreateResponse
	body := &CSISnapshotCreateRequest{Snapshots: []*CSISnapshot{snap}}
	if _, err := v.c.writeWithHeaders("PUT", "/v1/volumes/snapshot", secretHeaders(snap.Secrets), body, &resp, w); err != nil {
		return nil, err
	}
	return &resp, nil
}

// DeleteSnapshot deletes snapshot snap.ID of plugin snap.PluginID.
func (v *CSIVolumes) DeleteSnapshot(snap *CSISnapshot, w *WriteOptions) error {
	ww := WriteOptions{}
	if w != nil {
		ww = *w
	}
	ww.Params = maps.Clone(ww.Params)
	if ww.Params == nil {
		ww.Params = map[string]string{}
	}
	ww.Params["snapshot_id"], ww.Params["plugin_id"] = snap.ID, snap.PluginID
	_, err := v.c.writeWithHeaders("DELETE", "/v1/volumes/snapshot", secretHeaders(snap.Secrets), nil, nil, &ww)
	return err
}

// ListSnapshots lists one page (q.PerPage, q.NextToken) of the snapshots
// of plugin pluginID.
func (v *CSIVolumes) ListSnapshots(pluginID string, q *QueryOptions) (*CSISnapshotListResponse, *QueryMeta, error) {
	qq := QueryOptions{}
	if q != nil {
		qq = *q
	}
	qq.Params = maps.Clone(qq.Params)
	if qq.Params == nil {
		qq.Params = map[string]string{}
	}
	qq.Params["plugin_id"] = pluginID
	var resp CSISnapshotListResponse
	qm, err := v.c.query("/v1/volumes/snapshot", &resp, &qq)
	if err != nil {
		return nil, nil, err
	}
	return &resp, qm, nil
}

// CSIVolumeExplanation is Berth's answer to "why can my job not get this
// volume, or why has its release not finished?" (GET
// /v1/volume/csi/:id/explain): a one-line summary and one finding per
// reason, each with the next action.
type CSIVolumeExplanation struct {
	VolumeID  string
	Namespace string
	Summary   string
	Findings  []CSIVolumeExplainFinding
}

// CSIVolumeExplainFinding is one reason, about the volume, its plugin or
// one claim. Kind is "in-use", "releasing", "waiting", "needs-operator",
// "plugin" or "volume"; Action is empty when there is nothing to do but
// wait.
type CSIVolumeExplainFinding struct {
	AllocID string `json:",omitempty"`
	NodeID  string `json:",omitempty"`
	Step    CSIClaimStep
	Kind    string
	Why     string
	Action  string `json:",omitempty"`
}

// Explain asks the servers why the volume is where it is, and what to do.
func (v *CSIVolumes) Explain(id string, q *QueryOptions) (*CSIVolumeExplanation, *QueryMeta, error) {
	var resp CSIVolumeExplanation
	qm, err := v.c.query("/v1/volume/csi/"+url.PathEscape(id)+"/explain", &resp, q)
	if err != nil {
		return nil, nil, err
	}
	return &resp, qm, nil
}
