package api

import (
	"net/url"
	"time"
)

// Node statuses.
const (
	NodeStatusInit         = "initializing"
	NodeStatusReady        = "ready"
	NodeStatusDown         = "down"
	NodeStatusDisconnected = "disconnected"
)

// Node scheduling eligibility.
const (
	NodeSchedulingEligible   = "eligible"
	NodeSchedulingIneligible = "ineligible"
)

// Nodes is the /v1/nodes and /v1/node/:id endpoints.
type Nodes struct{ c *Client }

// Nodes returns the node endpoints.
func (c *Client) Nodes() *Nodes { return &Nodes{c: c} }

// List lists client nodes (GET /v1/nodes).
func (n *Nodes) List(q *QueryOptions) ([]*NodeListStub, *QueryMeta, error) {
	var resp []*NodeListStub
	qm, err := n.c.query("/v1/nodes", &resp, q)
	if err != nil {
		return nil, nil, err
	}
	return resp, qm, nil
}

// PrefixList lists the nodes whose ID starts with prefix.
func (n *Nodes) PrefixList(prefix string) ([]*NodeListStub, *QueryMeta, error) {
	return n.List(&QueryOptions{Prefix: prefix})
}

// Info reads one node (GET /v1/node/:id).
func (n *Nodes) Info(nodeID string, q *QueryOptions) (*Node, *QueryMeta, error) {
	var resp Node
	qm, err := n.c.query("/v1/node/"+url.PathEscape(nodeID), &resp, q)
	if err != nil {
		return nil, nil, err
	}
	return &resp, qm, nil
}

// UpdateDrain starts draining a node (PUT /v1/node/:id/drain), or stops
// it when spec is nil. markEligible makes the node eligible again when a
// drain is stopped.
func (n *Nodes) UpdateDrain(nodeID string, spec *DrainSpec, markEligible bool, w *WriteOptions) (*NodeDrainUpdateResponse, error) {
	req := &NodeUpdateDrainRequest{NodeID: nodeID, DrainSpec: spec, MarkEligible: markEligible}
	var resp NodeDrainUpdateResponse
	wm, err := n.c.write("PUT", "/v1/node/"+url.PathEscape(nodeID)+"/drain", req, &resp, w)
	if err != nil {
		return nil, err
	}
	resp.WriteMeta = *wm
	return &resp, nil
}

// ToggleEligibility marks a node eligible or ineligible for new
// placements (PUT /v1/node/:id/eligibility).
func (n *Nodes) ToggleEligibility(nodeID string, eligible bool, w *WriteOptions) (*NodeEligibilityUpdateResponse, error) {
	e := NodeSchedulingIneligible
	if eligible {
		e = NodeSchedulingEligible
	}
	req := &NodeUpdateEligibilityRequest{NodeID: nodeID, Eligibility: e}
	var resp NodeEligibilityUpdateResponse
	wm, err := n.c.write("PUT", "/v1/node/"+url.PathEscape(nodeID)+"/eligibility", req, &resp, w)
	if err != nil {
		return nil, err
	}
	resp.WriteMeta = *wm
	return &resp, nil
}

// Allocations lists the allocations placed on a node
// (GET /v1/node/:id/allocations). Unlike the other alloc lists it returns
// whole allocations, as Nomad's does.
func (n *Nodes) Allocations(nodeID string, q *QueryOptions) ([]*Allocation, *QueryMeta, error) {
	var resp []*Allocation
	qm, err := n.c.query("/v1/node/"+url.PathEscape(nodeID)+"/allocations", &resp, q)
	if err != nil {
		return nil, nil, err
	}
	return resp, qm, nil
}

// Node is a client node: what it has and how it is doing.
type Node struct {
	ID            string
	Name          string
	Datacenter    string
	NodeClass     string
	NodePool      string
	HTTPAddr      string
	TLSEnabled    bool
	Attributes    map[string]string
	Meta          map[string]string
	NodeResources *NodeResources
	Drivers       map[string]*DriverInfo
	// CSIControllerPlugins and CSINodePlugins are the plugin instances
	// running on the node, by plugin ID.
	CSIControllerPlugins  map[string]*CSIInfo
	CSINodePlugins        map[string]*CSIInfo
	Drain                 bool
	DrainStrategy         *DrainStrategy
	SchedulingEligibility string
	Status                string
	StatusDescription     string
	StatusUpdatedAt       int64 // unix seconds, as Nomad's
	CreateIndex           uint64
	ModifyIndex           uint64
}

// NodeResources is what a node offers.
type NodeResources struct {
	Cpu    NodeCpuResources
	Memory NodeMemoryResources
	Disk   NodeDiskResources
}

// NodeCpuResources is a node's CPU.
type NodeCpuResources struct {
	CpuShares     int64 // MHz
	TotalCpuCores uint16
}

// NodeMemoryResources is a node's memory.
type NodeMemoryResources struct {
	MemoryMB int64
}

// NodeDiskResources is a node's disk.
type NodeDiskResources struct {
	DiskMB int64
}

// DriverInfo is a task driver's fingerprint on a node.
type DriverInfo struct {
	Attributes        map[string]string
	Detected          bool
	Healthy           bool
	HealthDescription string
	UpdateTime        time.Time
	// MountConfig is Berth's addition: whether the driver can mount
	// volumes into tasks ("all" or "none").
	MountConfig string `json:",omitempty"`
}

// NodeListStub is the list view of a node.
type NodeListStub struct {
	Address               string
	ID                    string
	Attributes            map[string]string `json:",omitempty"`
	Datacenter            string
	Name                  string
	NodeClass             string
	NodePool              string
	Version               string
	Drain                 bool
	SchedulingEligibility string
	Status                string
	StatusDescription     string
	Drivers               map[string]*DriverInfo
	NodeResources         *NodeResources `json:",omitempty"`
	CreateIndex           uint64
	ModifyIndex           uint64
}

// DrainSpec is what a user asks of a drain.
type DrainSpec struct {
	// Deadline is how long allocs may take to migrate before they are
	// stopped; negative means stop them at once, 0 means no deadline.
	Deadline time.Duration
	// IgnoreSystemJobs leaves system jobs' allocs running.
	IgnoreSystemJobs bool
}

// DrainStrategy is a node's drain in progress. DrainSpec's fields appear
// flattened in its JSON, as in Nomad's.
type DrainStrategy struct {
	DrainSpec
	ForceDeadline time.Time
	StartedAt     time.Time
}

// NodeUpdateDrainRequest is the body of PUT /v1/node/:id/drain. A nil
// DrainSpec stops the drain.
type NodeUpdateDrainRequest struct {
	NodeID       string
	DrainSpec    *DrainSpec
	MarkEligible bool
	Meta         map[string]string `json:",omitempty"`
}

// NodeDrainUpdateResponse answers a drain update.
type NodeDrainUpdateResponse struct {
	NodeModifyIndex uint64
	EvalIDs         []string
	EvalCreateIndex uint64
	WriteMeta       WriteMeta `json:"-"`
}

// NodeUpdateEligibilityRequest is the body of PUT /v1/node/:id/eligibility.
type NodeUpdateEligibilityRequest struct {
	NodeID      string
	Eligibility string // eligible or ineligible
}

// NodeEligibilityUpdateResponse answers an eligibility update.
type NodeEligibilityUpdateResponse struct {
	NodeModifyIndex uint64
	EvalIDs         []string
	EvalCreateIndex uint64
	WriteMeta       WriteMeta `json:"-"`
}
