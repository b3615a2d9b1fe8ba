package stream

import "github.com/berth-io/berth/nomad/structs"

// Topics.
const (
	TopicAll        = "*"
	TopicJob        = "Job"
	TopicAllocation = "Allocation"
	TopicEvaluation = "Evaluation"
	TopicNode       = "Node"
	TopicDeployment = "Deployment"
	TopicCSIVolume  = "CSIVolume"
	TopicCSIPlugin  = "CSIPlugin"
	// TopicClaim is Berth's: one event per claim transition.
	TopicClaim = "Claim"
)

// Topics lists every topic a subscriber may ask for.
var Topics = []string{TopicJob, TopicAllocation, TopicEvaluation, TopicNode, TopicDeployment,
	TopicCSIVolume, TopicCSIPlugin, TopicClaim}

// Event types.
const (
	TypeJobRegistered         = "JobRegistered"
	TypeJobDeregistered       = "JobDeregistered"
	TypeAllocationUpdated     = "AllocationUpdated"
	TypeAllocationDeleted     = "AllocationDeleted"
	TypeEvaluationUpdated     = "EvaluationUpdated"
	TypeEvaluationDeleted     = "EvaluationDeleted"
	TypeNodeRegistration      = "NodeRegistration"
	TypeNodeDeregistration    = "NodeDeregistration"
	TypeNodeDrain             = "NodeDrain"
	TypeNodeEligibility       = "NodeEligibility"
	TypeNodeEvent             = "NodeEvent"
	TypeCSIVolumeRegistered   = "CSIVolumeRegistered"
	TypeCSIVolumeDeregistered = "CSIVolumeDeregistered"
	TypeCSIVolumeClaim        = "CSIVolumeClaim"
	TypeCSIPluginUpdated      = "CSIPluginUpdated"
	TypeCSIPluginDeregistered = "CSIPluginDeregistered"
	TypeClaimTransition       = "ClaimTransition"
)

// Event is one change. Payload holds the changed object as the store has
// it (a *structs.Job, *structs.Allocation, *structs.Evaluation,
// *structs.Node, *structs.CSIVolume, *structs.CSIPlugin or *Claim); it is
// shared with the store and must not be mutated. The HTTP layer turns it
// into the API's shape, stripping secrets.
type Event struct {
	Topic      string
	Type       string
	Key        string
	Namespace  string
	FilterKeys []string
	Index      uint64
	Payload    any
}

// Batch is the events of one Raft index.
type Batch struct {
	Index  uint64
	Events []Event
}

// Claim is the payload of a Claim event: one claim of one volume moving
// from one step to another (From is empty for a new claim; From equals To
// when only its error or attempts changed).
type Claim struct {
	VolumeID  string
	Namespace string
	PluginID  string
	AllocID   string
	NodeID    string
	JobID     string
	From, To  structs.CSIClaimStep
	Error     string
	Attempts  int
	Reason    string
	Time      int64 // unix ns, the leader's time of the write
}
