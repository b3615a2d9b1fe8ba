package structs

// MessageType is the first byte of every Raft log entry; it says which
// request type the rest of the entry decodes into (package nomad/wire
// frames and encodes entries). Values are persisted in Raft logs and
// snapshots: never renumber, only append.
type MessageType uint8

const (
	NodeRegisterRequestType          MessageType = 0
	NodeDeregisterRequestType        MessageType = 1
	NodeUpdateStatusRequestType      MessageType = 2
	NodeUpdateDrainRequestType       MessageType = 3
	NodeUpdateEligibilityRequestType MessageType = 4
	JobRegisterRequestType           MessageType = 5
	JobDeregisterRequestType         MessageType = 6
	EvalUpdateRequestType            MessageType = 7
	EvalDeleteRequestType            MessageType = 8
	AllocClientUpdateRequestType     MessageType = 9
	ApplyPlanResultsRequestType      MessageType = 10
	CSIVolumeRegisterRequestType     MessageType = 11
	CSIVolumeDeregisterRequestType   MessageType = 12
	CSIVolumeClaimRequestType        MessageType = 13
	CSIPluginDeleteRequestType       MessageType = 14
	AllocDeleteRequestType           MessageType = 15
	NodeBatchUpdateStatusRequestType MessageType = 16
	ACLPolicyUpsertRequestType       MessageType = 17
	ACLPolicyDeleteRequestType       MessageType = 18
	ACLTokenUpsertRequestType        MessageType = 19
	ACLTokenDeleteRequestType        MessageType = 20
	ACLTokenBootstrapRequestType     MessageType = 21
	AllocStopRequestType             MessageType = 22
	JobStabilityRequestType          MessageType = 23
	CSIVolumeClaimGroupsRequestType  MessageType = 24

	// lastMessageType is the highest type above. Bump it when appending
	// one: the leader refuses to propose, and followers refuse to
	// store, a type above it (TestFSM_EveryKnownTypeIsApplied checks
	// the FSM handles each).
	lastMessageType = CSIVolumeClaimGroupsRequestType
)

// Known reports whether t (without IgnoreUnknownTypeFlag) is a type this
// version defines.
func (t MessageType) Known() bool { return t&^IgnoreUnknownTypeFlag <= lastMessageType }

// Applicable reports whether an FSM of this version can take an entry of
// type t: it knows the type, or the flag says to skip it.
func (t MessageType) Applicable() bool { return t.Known() || t&IgnoreUnknownTypeFlag != 0 }

// IgnoreUnknownTypeFlag set on a message type tells an FSM that does not
// know the type to skip the entry instead of panicking. It lets a newer
// leader write entries an older follower may safely ignore.
const IgnoreUnknownTypeFlag MessageType = 128
