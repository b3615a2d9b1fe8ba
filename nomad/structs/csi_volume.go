package structs

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// CSIVolumeState is where a volume is in its own lifecycle. Volumes made by
// `volume create` are written to Raft as "creating" before the plugin is
// called, so a create that times out can be retried or cleaned up instead
// of leaking a volume in the storage provider.
type CSIVolumeState string

const (
	CSIVolumeStateReady    CSIVolumeState = "ready"
	CSIVolumeStateCreating CSIVolumeState = "creating"
	CSIVolumeStateDeleting CSIVolumeState = "deleting"
)

// CSIVolume is a volume the servers know: registered from a spec, or
// created through a controller plugin.
type CSIVolume struct {
	ID         string
	Name       string
	ExternalID string // the plugin's ID; ID is used when empty
	Namespace  string
	PluginID   string

	// Provider and ProviderVersion are copied from the plugin on register.
	Provider        string
	ProviderVersion string

	State CSIVolumeState
	// Created is set when Berth made the volume in the storage provider
	// (`volume create`), not registered one that existed: `volume delete`
	// asks before deleting a volume Berth did not make.
	Created bool

	RequestedCapabilities []*CSIVolumeCapability

	// AccessMode and AttachmentMode are those of the live claims; set by
	// the first claim and cleared when the last claim is freed.
	AccessMode     CSIVolumeAccessMode
	AttachmentMode CSIVolumeAttachmentMode

	MountOptions *CSIMountOptions
	Secrets      CSISecrets
	Parameters   map[string]string
	Context      map[string]string

	RequestedCapacityMin int64
	RequestedCapacityMax int64
	Capacity             int64

	RequestedTopologies *CSITopologyRequest
	Topologies          []*CSITopology

	SnapshotID string
	CloneID    string

	// Claims are the live claims, by alloc ID. A claim leaves this map only
	// when it is freed; it then goes to PastClaims.
	Claims map[string]*CSIVolumeClaim

	// PastClaims is the recent history of freed claims, newest last, at most
	// MaxPastClaims long, so operators can see how a claim ended.
	PastClaims []*CSIVolumeClaim

	// Stats are the latest usage samples of the volume, by node ID, from
	// the nodes it is published on. They are never written to Raft: the
	// leader keeps them in memory (CSIVolume.ReportStats) and adds them to
	// the volumes it reads out.
	Stats map[string]*CSIVolumeStats

	// Expansion is the last expansion (re-running create or register with
	// a larger capacity_min), nil if there was none.
	Expansion *CSIVolumeExpansion

	// MutableParameters are the parameters the plugin may change on a
	// live volume (ControllerModifyVolume, MODIFY_VOLUME): as given to
	// CreateVolume, then as last set by re-running create or register
	// with a changed mutable_parameters block. Modification is the last
	// such change, nil if there was none.
	MutableParameters map[string]string
	Modification      *CSIVolumeModification

	CreateIndex uint64
	ModifyIndex uint64
	CreateTime  int64
	ModifyTime  int64
}

// MaxPastClaims bounds CSIVolume.PastClaims.
const MaxPastClaims = 16

// RemoteID is the ID the plugin knows the volume by.
func (v *CSIVolume) RemoteID() string {
	if v.ExternalID != "" {
		return v.ExternalID
	}
	return v.ID
}

// Copy returns a deep copy.
func (v *CSIVolume) Copy() *CSIVolume {
	if v == nil {
		return nil
	}
	out := *v
	out.RequestedCapabilities = make([]*CSIVolumeCapability, len(v.RequestedCapabilities))
	for i, c := range v.RequestedCapabilities {
		cc := *c
		out.RequestedCapabilities[i] = &cc
	}
	if v.RequestedCapabilities == nil {
		out.RequestedCapabilities = nil
	}
	out.MountOptions = v.MountOptions.Copy()
	out.Secrets = maps.Clone(v.Secrets)
	out.Parameters = maps.Clone(v.Parameters)
	out.Context = maps.Clone(v.Context)
	out.RequestedTopologies = v.RequestedTopologies.Copy()
	out.Topologies = copyTopologies(v.Topologies)
	if v.Claims != nil {
		out.Claims = make(map[string]*CSIVolumeClaim, len(v.Claims))
		for k, c := range v.Claims {
			out.Claims[k] = c.Copy()
		}
	}
	out.Expansion = v.Expansion.Copy()
	out.MutableParameters = maps.Clone(v.MutableParameters)
	out.Modification = v.Modification.Copy()
	if v.Stats != nil {
		out.Stats = make(map[string]*CSIVolumeStats, len(v.Stats))
		for k, st := range v.Stats {
			out.Stats[k] = st.Copy()
		}
	}
	if v.PastClaims != nil {
		out.PastClaims = make([]*CSIVolumeClaim, len(v.PastClaims))
		for i, c := range v.PastClaims {
			out.PastClaims[i] = c.Copy()
		}
	}
	return &out
}

// Sanitize returns a copy safe to show outside the servers: no secrets.
func (v *CSIVolume) Sanitize() *CSIVolume {
	out := v.Copy()
	out.Secrets = nil
	if out.MountOptions != nil && len(out.MountOptions.MountFlags) > 0 {
		out.MountOptions.MountFlags = []string{"[REDACTED]"}
	}
	return out
}

// Redacted is Sanitize for an answer read once and dropped (the register
// reply, which the agent turns into JSON): it shares everything with v
// but the secrets and mount flags it hides, so the result must not be
// changed, and v must be a stored (immutable) object. A deep copy of each
// of a 1,000-volume register's volumes was a thirtieth of its CPU.
func (v *CSIVolume) Redacted() *CSIVolume {
	if len(v.Secrets) == 0 && (v.MountOptions == nil || len(v.MountOptions.MountFlags) == 0) {
		return v
	}
	out := *v
	out.Secrets = nil
	if m := v.MountOptions; m != nil && len(m.MountFlags) > 0 {
		out.MountOptions = &CSIMountOptions{FSType: m.FSType, MountFlags: []string{"[REDACTED]"}}
	}
	return &out
}

// Validate returns every problem with a volume spec at once.
func (v *CSIVolume) Validate() error {
	var errs []error
	if err := ValidatePathElement("volume ID", v.ID); err != nil {
		errs = append(errs, err)
	}
	if v.RequestedCapacityMin < 0 || v.RequestedCapacityMax < 0 {
		errs = append(errs, fmt.Errorf("capacity_min (%d) and capacity_max (%d) must not be negative",
			v.RequestedCapacityMin, v.RequestedCapacityMax))
	}
	// In a fixed order (a map literal here ranged in a random one, so the
	// same request got its errors in another order each time).
	for _, m := range [...]struct {
		name string
		m    map[string]string
	}{{"parameters", v.Parameters}, {"context", v.Context}, {"secrets", v.Secrets}} {
		if n := mapBytes(m.m); n > MaxMapBytes {
			errs = append(errs, fmt.Errorf("%s are %d bytes, over the limit of %d", m.name, n, MaxMapBytes))
		}
	}
	if v.PluginID == "" {
		errs = append(errs, errors.New("missing plugin ID"))
	}
	if v.Namespace == "" {
		errs = append(errs, errors.New("missing namespace"))
	}
	if v.SnapshotID != "" && v.CloneID != "" {
		errs = append(errs, errors.New("only one of snapshot_id and clone_id may be set"))
	}
	if len(v.RequestedCapabilities) == 0 {
		errs = append(errs, errors.New("must include at least one capability block"))
	}
	for i, c := range v.RequestedCapabilities {
		if !c.AccessMode.Valid() {
			errs = append(errs, fmt.Errorf("capability %d: unknown access_mode %q", i+1, c.AccessMode))
		}
		if !c.AttachmentMode.Valid() {
			errs = append(errs, fmt.Errorf("capability %d: unknown attachment_mode %q (want %q or %q)",
				i+1, c.AttachmentMode, CSIVolumeAttachmentModeFilesystem, CSIVolumeAttachmentModeBlockDevice))
		}
	}
	if v.RequestedCapacityMax > 0 && v.RequestedCapacityMin > v.RequestedCapacityMax {
		errs = append(errs, fmt.Errorf("capacity_min (%d) is greater than capacity_max (%d)",
			v.RequestedCapacityMin, v.RequestedCapacityMax))
	}
	if v.RequestedTopologies != nil {
		for _, t := range append(slices.Clone(v.RequestedTopologies.Required), v.RequestedTopologies.Preferred...) {
			if t == nil || len(t.Segments) == 0 {
				errs = append(errs, errors.New("topology_request: a topology must have at least one segment"))
				break
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return &Error{Code: CodeInvalid, Msg: fmt.Sprintf("volume %q is invalid: %v", v.ID, err)}
	}
	return nil
}

// HasCapability reports whether the volume supports (access, attachment).
func (v *CSIVolume) HasCapability(access CSIVolumeAccessMode, attach CSIVolumeAttachmentMode) bool {
	for _, c := range v.RequestedCapabilities {
		if c.AccessMode == access && c.AttachmentMode == attach {
			return true
		}
	}
	return false
}

// LiveClaims returns the claims that still count against the access mode,
// sorted by alloc ID for stable output.
func (v *CSIVolume) LiveClaims() []*CSIVolumeClaim {
	out := make([]*CSIVolumeClaim, 0, len(v.Claims))
	for _, id := range slices.Sorted(maps.Keys(v.Claims)) {
		out = append(out, v.Claims[id])
	}
	return out
}

// ClaimConflict says why a new claim for (alloc on node, mode, access)
// cannot be granted now, naming the claim that blocks it; nil if it can.
// Every live claim counts, whatever its step: a claim being released still
// holds the volume until it is freed (DESIGN.md §4 guarantee 1).
func (v *CSIVolume) ClaimConflict(allocID, nodeID string, mode CSIVolumeClaimMode, access CSIVolumeAccessMode) *Error {
	if v.State != "" && v.State != CSIVolumeStateReady {
		return NewError(CodeNotReady, "volume %q is %s", v.ID, v.State)
	}
	if v.AccessMode != "" && access != "" && access != v.AccessMode && len(v.Claims) > 0 {
		return NewError(CodeNotReady, "volume %q is claimed with access mode %s; cannot also claim it as %s",
			v.ID, v.AccessMode, access)
	}
	if access == "" {
		access = v.AccessMode
	}
	if mode == CSIVolumeClaimWrite && access.ReadOnly() {
		return NewError(CodeInvalid, "volume %q: access mode %s allows no writers", v.ID, access)
	}
	for _, c := range v.LiveClaims() {
		if c.AllocID == allocID {
			continue
		}
		blocked := false
		switch access {
		case CSIVolumeAccessModeSingleNodeWriter, CSIVolumeAccessModeSingleNodeSingleWriter, CSIVolumeAccessModeSingleNodeReader:
			blocked = true // one claim in total (CSI: "published once", even readers)
		case CSIVolumeAccessModeSingleNodeMultiWriter:
			blocked = c.NodeID != nodeID
		case CSIVolumeAccessModeMultiNodeSingleWriter:
			blocked = mode == CSIVolumeClaimWrite && c.Mode == CSIVolumeClaimWrite
		}
		if blocked {
			return NewError(CodeNotReady, "volume %q: %s already claimed by alloc %s on node %s (%s)",
				v.ID, access, shortID(c.AllocID), shortID(c.NodeID), c.Step.Describe())
		}
	}
	return nil
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// CSIVolumeClaimMode is whether a claim reads or writes.
type CSIVolumeClaimMode string

const (
	CSIVolumeClaimRead  CSIVolumeClaimMode = "read"
	CSIVolumeClaimWrite CSIVolumeClaimMode = "write"
)

// CSIClaimStep is where a claim is in the claim protocol. Every transition
// is a Raft entry, so a new leader resumes where the old one stopped.
// nomad/claims owns the decisions; CanMoveTo is the store's check of them.
//
//	 plan apply             client Claim RPC              client Postrun (all tasks exited)
//	───────────► Reserved ──────────────────► Taken ──────────────────────────► NodeDetached
//	                │ (ControllerPublish first          │ (node detach               │
//	                │  when the controller              │  failed finally)   ControllerUnpublish
//	                │  advertises it)                   ▼                  (when published)
//	                │                             NeedsOperator ◄─ final error ──────┤
//	                │                        (volume detach resumes or frees)       ▼
//	                └── alloc stopped before it ran ──────────────────────► ControllerDetached ──► freed
//
// A claim is freed (moved to PastClaims) only from ControllerDetached, or
// straight from Reserved when nothing was ever published, or from
// NeedsOperator by an operator's detach.
type CSIClaimStep string

const (
	CSIClaimReserved           CSIClaimStep = "reserved"
	CSIClaimTaken              CSIClaimStep = "taken"
	CSIClaimNodeDetached       CSIClaimStep = "node-detached"
	CSIClaimControllerDetached CSIClaimStep = "controller-detached"
	// CSIClaimNeedsOperator: a release step failed with an error that
	// retrying will not fix (the plugin does not implement the RPC, or
	// refused the request). The claim still holds the volume; its
	// BlockedStep says where it stopped and LastError says why. `volume
	// detach` resumes it, or frees it when the plugin cannot do the step.
	CSIClaimNeedsOperator CSIClaimStep = "needs-operator"
	CSIClaimFreed         CSIClaimStep = "freed"
)

// Describe says in words what the claim is waiting for.
func (s CSIClaimStep) Describe() string {
	switch s {
	case CSIClaimReserved:
		return "reserved, waiting for the alloc to start"
	case CSIClaimTaken:
		return "in use"
	case CSIClaimNodeDetached:
		return "releasing: controller unpublish pending"
	case CSIClaimControllerDetached:
		return "releasing: about to be freed"
	case CSIClaimNeedsOperator:
		return "release stopped on an error the plugin will repeat: run 'berth volume detach'"
	case CSIClaimFreed:
		return "freed"
	}
	return string(s)
}

// legalSteps lists, for each step, the steps a stored claim may move to.
// Staying put is always legal (bookkeeping: errors, attempts, retries).
var legalSteps = map[CSIClaimStep][]CSIClaimStep{
	CSIClaimReserved:           {CSIClaimTaken, CSIClaimNodeDetached, CSIClaimControllerDetached, CSIClaimNeedsOperator, CSIClaimFreed},
	CSIClaimTaken:              {CSIClaimNodeDetached, CSIClaimControllerDetached, CSIClaimNeedsOperator}, // controller-detached: fencing a down node
	CSIClaimNodeDetached:       {CSIClaimControllerDetached, CSIClaimNeedsOperator},
	CSIClaimControllerDetached: {CSIClaimFreed},
	CSIClaimNeedsOperator:      {CSIClaimReserved, CSIClaimTaken, CSIClaimNodeDetached, CSIClaimControllerDetached, CSIClaimFreed},
}

// NewClaimSteps are the steps a claim may start at: a reservation made at
// plan apply, or a claim reserved and taken in one write.
var NewClaimSteps = []CSIClaimStep{CSIClaimReserved, CSIClaimTaken}

// CanMoveTo reports whether a stored claim at step s may be written at
// step next. A claim never goes back towards "in use" once its release
// began, except NeedsOperator resuming the step it stopped at.
func (s CSIClaimStep) CanMoveTo(next CSIClaimStep) bool {
	return s == next && s != CSIClaimFreed || slices.Contains(legalSteps[s], next)
}

// Known reports whether s is a step of the protocol.
func (s CSIClaimStep) Known() bool {
	_, ok := legalSteps[s]
	return ok || s == CSIClaimFreed
}

// CSIVolumeClaim is one alloc's claim on a volume.
type CSIVolumeClaim struct {
	AllocID        string
	JobID          string
	NodeID         string
	ExternalNodeID string // the plugin's node ID, captured when the claim was taken

	Mode           CSIVolumeClaimMode
	AccessMode     CSIVolumeAccessMode
	AttachmentMode CSIVolumeAttachmentMode
	ReadOnly       bool

	Step           CSIClaimStep
	PublishContext map[string]string

	// Release bookkeeping, shown in the API so operators see where a claim
	// is stuck and why.
	LastError string
	Attempts  int
	NextRetry int64 // unix ns; zero when not waiting

	// ReleaseReason says why the claim was freed when it is not the normal
	// path: "detach -force", "node disconnect deadline passed", ...
	ReleaseReason string

	// BlockedStep is the step a NeedsOperator claim stopped at (Reserved,
	// Taken or NodeDetached), which `volume detach` resumes.
	BlockedStep CSIClaimStep
	// Unsupported is set on a NeedsOperator claim whose plugin answered
	// that it does not implement the step's RPC: nothing can be undone
	// through it, so `volume detach` frees the claim.
	Unsupported bool

	// ControllerPublished is set (in Raft, before the call) when the
	// servers may have controller-published the volume for this claim;
	// the release then runs ControllerUnpublish while the plugin's
	// controller still advertises it.
	ControllerPublished bool
	// PublishUntil (unix ns) is set with ControllerPublished before each
	// ControllerPublish: the plugin call may run until then (the client
	// making it stops there, however long ago the server that asked gave
	// up or lost leadership). The release does not controller-unpublish
	// before it, or a publish landing late would re-attach the volume to
	// a node the servers consider detached. Zero once the claim is Taken.
	PublishUntil int64
	// UnpublishUntil (unix ns) is its mirror for ControllerUnpublish, set
	// in Raft before each call the servers make for this claim: the call
	// may run until then, as the client making it ends it there, retries
	// included, however long ago the server that asked gave up or lost
	// leadership. Until it, plus ClockSkew, has passed, no ControllerPublish
	// of the volume to the same node runs (for any claim), or a late
	// unpublish would detach the volume from under that claim's alloc
	// (seed 4060), and the claim is not freed, so the deadline stays in
	// state for a new leader to see. An answered call sets it back to what
	// an earlier call may still need. Zero in state written before it.
	UnpublishUntil int64

	// History is the claim's timeline: one entry per change of its step,
	// error or attempts, oldest first, at most MaxClaimHistory (the
	// oldest are dropped). The state store writes it; updates sent by
	// writers never set it.
	History []CSIClaimTransition

	CreateTime  int64
	ModifyTime  int64
	CreateIndex uint64
	ModifyIndex uint64
}

// MaxClaimHistory bounds CSIVolumeClaim.History. A claim that retries a
// failing release for hours keeps its latest transitions, which say why
// it is stuck now.
const MaxClaimHistory = 16

// CSIClaimTransition is one entry of a claim's timeline: the step it
// moved from and to (equal when only the error or attempts changed), at
// the leader's time and the Raft index of the write.
type CSIClaimTransition struct {
	From, To CSIClaimStep
	Time     int64 // unix ns, the leader's clock
	Index    uint64
	Error    string
	Attempts int
	Reason   string // the release reason, when freed off the normal path
}

// Copy returns a deep copy.
func (c *CSIVolumeClaim) Copy() *CSIVolumeClaim {
	if c == nil {
		return nil
	}
	out := *c
	out.PublishContext = maps.Clone(c.PublishContext)
	out.History = slices.Clone(c.History)
	return &out
}

// CSIVolumeListStub is the list view of a volume.
type CSIVolumeListStub struct {
	ID             string
	Namespace      string
	Name           string
	ExternalID     string
	PluginID       string
	Provider       string
	State          CSIVolumeState
	AccessMode     CSIVolumeAccessMode
	AttachmentMode CSIVolumeAttachmentMode
	Claims         int
	// CurrentReaders and CurrentWriters count the live claims (any step
	// before freed: a releasing claim still holds the volume) by mode.
	CurrentReaders int
	CurrentWriters int
	Topologies     []*CSITopology
	CreateIndex    uint64
	ModifyIndex    uint64
}

// Stub returns the list view.
func (v *CSIVolume) Stub() *CSIVolumeListStub {
	stub := &CSIVolumeListStub{
		ID: v.ID, Namespace: v.Namespace, Name: v.Name, ExternalID: v.ExternalID,
		PluginID: v.PluginID, Provider: v.Provider, State: v.State,
		AccessMode: v.AccessMode, AttachmentMode: v.AttachmentMode,
		Claims: len(v.Claims), Topologies: copyTopologies(v.Topologies),
		CreateIndex: v.CreateIndex, ModifyIndex: v.ModifyIndex,
	}
	stub.CurrentReaders, stub.CurrentWriters = v.CurrentClaims()
	return stub
}

// CurrentClaims counts the live claims by mode. A claim counts until it
// is freed: the volume is not free for another writer while a claim is
// releasing.
func (v *CSIVolume) CurrentClaims() (readers, writers int) {
	for _, c := range v.Claims {
		if c.Mode == CSIVolumeClaimRead {
			readers++
		} else {
			writers++
		}
	}
	return readers, writers
}

// CSIVolumeRegisterRequest registers or updates volumes.
type CSIVolumeRegisterRequest struct {
	Volumes []*CSIVolume
	// Timestamp is stamped by the leader.
	Timestamp int64
	WriteRequest

	// handedOver: see HandOverVolumes. Unexported, so never encoded:
	// it holds only for a call in the same process.
	handedOver bool
}

// HandOverVolumes tells an in-process Register that the caller will not
// touch Volumes again (the HTTP handler, which built them from the
// request body), so the endpoint may fill them in and commit them as
// they are instead of copying each first.
func (r *CSIVolumeRegisterRequest) HandOverVolumes() { r.handedOver = true }

// VolumesHandedOver reports whether HandOverVolumes was called.
func (r *CSIVolumeRegisterRequest) VolumesHandedOver() bool { return r.handedOver }

// CSIVolumeRegisterResponse is the reply to register.
type CSIVolumeRegisterResponse struct {
	Volumes  []*CSIVolume
	Warnings string
	// Outcomes says, for a create, what happened to each of Volumes (in
	// order): CSIVolumeCreated, or for a volume that already existed
	// CSIVolumeExpanded, CSIVolumeModified or CSIVolumeExpandedModified.
	Outcomes []string
	WriteMeta
}

// What a volume create did to each volume (CSIVolumeRegisterResponse).
const (
	CSIVolumeCreated          = "created"
	CSIVolumeExpanded         = "expanded"
	CSIVolumeModified         = "modified"
	CSIVolumeExpandedModified = "expanded and modified"
)

// CSIVolumeDeregisterRequest removes volumes.
type CSIVolumeDeregisterRequest struct {
	VolumeIDs []string
	Force     bool
	WriteRequest
}

// CSIVolumeClaimUpdate is one claim transition inside a Raft entry: set the
// claim of AllocID on VolumeID to Claim (whose Step says the new step), or
// free it when Claim.Step is CSIClaimFreed.
type CSIVolumeClaimUpdate struct {
	Namespace string
	VolumeID  string
	Claim     *CSIVolumeClaim
}

// CSIVolumeClaimBatchRequest applies several claim transitions in one Raft
// entry (the volumewatcher batches its checkpoints).
type CSIVolumeClaimBatchRequest struct {
	Claims    []*CSIVolumeClaimUpdate
	Timestamp int64
	WriteRequest
}

// CSIVolumeClaimGroupsRequest carries the claim writes of concurrent
// callers in one Raft entry (the server's group commit, helper/groupcommit).
// Each group is applied, or refused, on its own, exactly as one
// CSIVolumeClaimBatchRequest of its claims would be, after the groups
// before it; the FSM answers with one error per group.
type CSIVolumeClaimGroupsRequest struct {
	Groups    []CSIVolumeClaimGroup
	Timestamp int64
	WriteRequest
}

// CSIVolumeClaimGroup is one caller's claim transitions in a
// CSIVolumeClaimGroupsRequest: all of them or none.
type CSIVolumeClaimGroup struct {
	Claims []*CSIVolumeClaimUpdate
}

// CSIVolumeGetRequest reads one volume.
type CSIVolumeGetRequest struct {
	ID string
	QueryOptions
}

// CSIVolumeGetResponse carries the volume, or nil.
type CSIVolumeGetResponse struct {
	Volume *CSIVolume
	QueryMeta
}

// CSIVolumeListRequest lists volumes, optionally by plugin or node.
type CSIVolumeListRequest struct {
	PluginID string
	NodeID   string
	QueryOptions
}

// CSIVolumeListResponse carries list stubs.
type CSIVolumeListResponse struct {
	Volumes []*CSIVolumeListStub
	QueryMeta
}
