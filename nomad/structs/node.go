package structs

import (
	"errors"
	"fmt"
	"maps"
	"time"
)

// Node status values.
const (
	NodeStatusInit  = "initializing"
	NodeStatusReady = "ready"
	NodeStatusDown  = "down"
)

// Node scheduling eligibility values.
const (
	NodeSchedulingEligible   = "eligible"
	NodeSchedulingIneligible = "ineligible"
)

// Node is one client machine.
type Node struct {
	ID         string
	SecretID   string // authenticates the client; never leaves the servers
	Name       string
	Datacenter string
	NodeClass  string
	HTTPAddr   string
	// TLSEnabled: the node's agent serves HTTPS at HTTPAddr (tls.http).
	TLSEnabled bool

	Attributes map[string]string
	Meta       map[string]string

	NodeResources *NodeResources
	Drivers       map[string]*DriverInfo

	// CSI plugin instances on this node, by plugin ID.
	CSIControllerPlugins map[string]*CSIInfo
	CSINodePlugins       map[string]*CSIInfo

	Status                string
	StatusDescription     string
	StatusUpdatedAt       int64 // unix ns
	SchedulingEligibility string
	DrainStrategy         *DrainStrategy

	// DisconnectDeadline is how long the client keeps its allocs running
	// after it loses the servers; claims of a down node's allocs may be
	// freed once this much time has passed since the node went down.
	DisconnectDeadline time.Duration

	CreateIndex uint64
	ModifyIndex uint64
}

// NodeResources is what a node offers to tasks.
type NodeResources struct {
	CPU      int64 // MHz
	MemoryMB int64
}

// DriverInfo is a driver's fingerprint on a node.
type DriverInfo struct {
	Detected          bool
	Healthy           bool
	HealthDescription string
	// MountConfig says whether the driver can mount volumes into tasks.
	MountConfig MountConfigSupport
	Attributes  map[string]string
}

// MountConfigSupport is a driver's support for volume mounts.
type MountConfigSupport string

const (
	MountConfigSupportAll  MountConfigSupport = "all"
	MountConfigSupportNone MountConfigSupport = "none"
)

// DrainStrategy says how a node is drained.
type DrainStrategy struct {
	Deadline         time.Duration
	IgnoreSystemJobs bool
	ForceDeadline    int64 // unix ns; zero means no deadline
	StartedAt        int64
}

// Ready reports whether the node may receive new allocs.
func (n *Node) Ready() bool {
	return n.Status == NodeStatusReady && n.DrainStrategy == nil && n.SchedulingEligibility != NodeSchedulingIneligible
}

// TerminalStatus reports whether the node is down.
func (n *Node) TerminalStatus() bool { return n.Status == NodeStatusDown }

// Copy returns a deep copy.
func (n *Node) Copy() *Node {
	if n == nil {
		return nil
	}
	out := *n
	out.Attributes = maps.Clone(n.Attributes)
	out.Meta = maps.Clone(n.Meta)
	if n.NodeResources != nil {
		r := *n.NodeResources
		out.NodeResources = &r
	}
	if n.Drivers != nil {
		out.Drivers = make(map[string]*DriverInfo, len(n.Drivers))
		for k, d := range n.Drivers {
			dd := *d
			dd.Attributes = maps.Clone(d.Attributes)
			out.Drivers[k] = &dd
		}
	}
	out.CSIControllerPlugins = copyCSIInfos(n.CSIControllerPlugins)
	out.CSINodePlugins = copyCSIInfos(n.CSINodePlugins)
	if n.DrainStrategy != nil {
		d := *n.DrainStrategy
		out.DrainStrategy = &d
	}
	return &out
}

// Validate checks a node registration.
func (n *Node) Validate() error {
	var errs []error
	if n.ID == "" {
		errs = append(errs, errors.New("missing node ID"))
	}
	if n.SecretID == "" {
		errs = append(errs, errors.New("missing node secret ID"))
	}
	if n.Datacenter == "" {
		errs = append(errs, errors.New("missing datacenter"))
	}
	if n.Name == "" {
		errs = append(errs, errors.New("missing node name"))
	}
	if err := errors.Join(errs...); err != nil {
		return &Error{Code: CodeInvalid, Msg: fmt.Sprintf("node %q is invalid: %v", n.ID, err)}
	}
	return nil
}

// NodeListStub is the list view of a node.
type NodeListStub struct {
	ID                    string
	Name                  string
	Datacenter            string
	NodeClass             string
	Address               string
	Status                string
	StatusDescription     string
	SchedulingEligibility string
	Drain                 bool
	Drivers               map[string]*DriverInfo
	// Version is the Berth version the node's client runs (its
	// "nomad.version" attribute).
	Version     string
	CreateIndex uint64
	ModifyIndex uint64
}

// DefaultNodePool is the one node pool: Berth has no node pools, so every
// node is in Nomad's default one.
const DefaultNodePool = "default"

// Stub returns the list view.
func (n *Node) Stub() *NodeListStub {
	c := n.Copy()
	return &NodeListStub{
		ID: n.ID, Name: n.Name, Datacenter: n.Datacenter, NodeClass: n.NodeClass,
		Address: n.Attributes["unique.network.ip-address"], Status: n.Status,
		Version:           n.Attributes["nomad.version"],
		StatusDescription: n.StatusDescription, SchedulingEligibility: n.SchedulingEligibility,
		Drain: n.DrainStrategy != nil, Drivers: c.Drivers,
		CreateIndex: n.CreateIndex, ModifyIndex: n.ModifyIndex,
	}
}

// Sanitize returns a copy without the secret ID.
func (n *Node) Sanitize() *Node {
	out := n.Copy()
	out.SecretID = ""
	return out
}

// NodeRegisterRequest registers or updates a node (fingerprints included).
type NodeRegisterRequest struct {
	Node *Node
	// Timestamp is stamped by the leader.
	Timestamp int64
	WriteRequest
}

// NodeUpdateResponse is the reply to node writes.
type NodeUpdateResponse struct {
	// HeartbeatTTL is how soon the client must heartbeat again.
	HeartbeatTTL time.Duration
	EvalIDs      []string
	// Servers lists the RPC addresses of the servers, for failover.
	Servers []string
	WriteMeta
}

// NodeDeregisterRequest removes nodes.
type NodeDeregisterRequest struct {
	NodeIDs []string
	WriteRequest
}

// NodeUpdateStatusRequest changes one node's status (heartbeats, TTL
// expiry). Evals created for the change ride in the same entry.
type NodeUpdateStatusRequest struct {
	NodeID      string
	Status      string
	Description string
	Timestamp   int64
	Evals       []*Evaluation
	WriteRequest
}

// NodeBatchUpdateStatusRequest applies several node status changes (e.g.
// heartbeat TTLs expiring together) in one Raft entry, with their evals.
type NodeBatchUpdateStatusRequest struct {
	Updates   []*NodeUpdateStatusRequest
	Evals     []*Evaluation
	Timestamp int64
	WriteRequest
}

// NodeUpdateDrainRequest sets or clears a node's drain.
type NodeUpdateDrainRequest struct {
	NodeID        string
	DrainStrategy *DrainStrategy
	// MarkEligible makes the node eligible again when the drain is cleared.
	MarkEligible bool
	Timestamp    int64
	Evals        []*Evaluation
	WriteRequest
}

// NodeUpdateEligibilityRequest sets a node's scheduling eligibility.
type NodeUpdateEligibilityRequest struct {
	NodeID      string
	Eligibility string
	Timestamp   int64
	Evals       []*Evaluation
	WriteRequest
}

// NodeSpecificRequest reads one node.
type NodeSpecificRequest struct {
	NodeID   string
	SecretID string
	QueryOptions
}

// SingleNodeResponse carries one node, or nil.
type SingleNodeResponse struct {
	Node *Node
	QueryMeta
}

// NodeListResponse carries list stubs.
type NodeListResponse struct {
	Nodes []*NodeListStub
	QueryMeta
}
