package api

import (
	"net/http"
	"net/url"
	"time"
)

// Desired statuses of an allocation (what the servers want).
const (
	AllocDesiredStatusRun   = "run"
	AllocDesiredStatusStop  = "stop"
	AllocDesiredStatusEvict = "evict"
)

// Client statuses of an allocation (what the client reports).
const (
	AllocClientStatusPending  = "pending"
	AllocClientStatusRunning  = "running"
	AllocClientStatusComplete = "complete"
	AllocClientStatusFailed   = "failed"
	AllocClientStatusLost     = "lost"
	AllocClientStatusUnknown  = "unknown"
)

// Allocations is the /v1/allocations and /v1/allocation/:id endpoints.
type Allocations struct{ c *Client }

// Allocations returns the allocation endpoints.
func (c *Client) Allocations() *Allocations { return &Allocations{c: c} }

// List lists allocations (GET /v1/allocations).
func (a *Allocations) List(q *QueryOptions) ([]*AllocationListStub, *QueryMeta, error) {
	var resp []*AllocationListStub
	qm, err := a.c.query("/v1/allocations", &resp, q)
	if err != nil {
		return nil, nil, err
	}
	return resp, qm, nil
}

// PrefixList lists the allocations whose ID starts with prefix.
func (a *Allocations) PrefixList(prefix string) ([]*AllocationListStub, *QueryMeta, error) {
	return a.List(&QueryOptions{Prefix: prefix})
}

// Info reads one allocation (GET /v1/allocation/:id).
func (a *Allocations) Info(allocID string, q *QueryOptions) (*Allocation, *QueryMeta, error) {
	var resp Allocation
	qm, err := a.c.query("/v1/allocation/"+url.PathEscape(allocID), &resp, q)
	if err != nil {
		return nil, nil, err
	}
	return &resp, qm, nil
}

// Allocation is one placement of a task group on a node.
type Allocation struct {
	ID                 string
	Namespace          string
	EvalID             string
	Name               string // <job>.<group>[<index>]
	NodeID             string
	NodeName           string
	JobID              string
	Job                *Job
	TaskGroup          string
	Metrics            *AllocationMetric
	DesiredStatus      string
	DesiredDescription string
	ClientStatus       string
	ClientDescription  string
	TaskStates         map[string]*TaskState
	PreviousAllocation string
	NextAllocation     string
	FollowupEvalID     string
	CreateIndex        uint64
	ModifyIndex        uint64
	AllocModifyIndex   uint64
	CreateTime         int64 // unix ns
	ModifyTime         int64 // unix ns
}

// Stub returns the list view of a.
func (a *Allocation) Stub() *AllocationListStub {
	s := &AllocationListStub{
		ID: a.ID, EvalID: a.EvalID, Name: a.Name, Namespace: a.Namespace,
		NodeID: a.NodeID, NodeName: a.NodeName, JobID: a.JobID, TaskGroup: a.TaskGroup,
		DesiredStatus: a.DesiredStatus, DesiredDescription: a.DesiredDescription,
		ClientStatus: a.ClientStatus, ClientDescription: a.ClientDescription,
		TaskStates: a.TaskStates, FollowupEvalID: a.FollowupEvalID, NextAllocation: a.NextAllocation,
		CreateIndex: a.CreateIndex, ModifyIndex: a.ModifyIndex, CreateTime: a.CreateTime, ModifyTime: a.ModifyTime,
	}
	if a.Job != nil {
		if a.Job.Type != nil {
			s.JobType = *a.Job.Type
		}
		if a.Job.Version != nil {
			s.JobVersion = *a.Job.Version
		}
	}
	return s
}

// ServerTerminalStatus reports whether the servers want the alloc stopped.
func (a *Allocation) ServerTerminalStatus() bool {
	return a.DesiredStatus == AllocDesiredStatusStop || a.DesiredStatus == AllocDesiredStatusEvict
}

// ClientTerminalStatus reports whether the client status can no longer
// change.
func (a *Allocation) ClientTerminalStatus() bool {
	switch a.ClientStatus {
	case AllocClientStatusComplete, AllocClientStatusFailed, AllocClientStatusLost:
		return true
	}
	return false
}

// AllocationListStub is the list view of an allocation.
type AllocationListStub struct {
	ID                 string
	EvalID             string
	Name               string
	Namespace          string
	NodeID             string
	NodeName           string
	JobID              string
	JobType            string
	JobVersion         uint64
	TaskGroup          string
	DesiredStatus      string
	DesiredDescription string
	ClientStatus       string
	ClientDescription  string
	TaskStates         map[string]*TaskState
	FollowupEvalID     string
	NextAllocation     string
	CreateIndex        uint64
	ModifyIndex        uint64
	CreateTime         int64 // unix ns
	ModifyTime         int64 // unix ns
}

// AllocationMetric says how the scheduler placed (or failed to place) an
// allocation: how many nodes it looked at and why it turned them down.
type AllocationMetric struct {
	NodesEvaluated     int
	NodesFiltered      int
	NodesAvailable     map[string]int // by datacenter
	ClassFiltered      map[string]int
	ConstraintFiltered map[string]int // by constraint, e.g. a CSI volume check
	NodesExhausted     int
	ClassExhausted     map[string]int
	DimensionExhausted map[string]int // by resource, e.g. "memory"
	QuotaExhausted     []string
	Scores             map[string]float64
	AllocationTime     time.Duration
	CoalescedFailures  int
	ScoreMetaData      []*NodeScoreMeta
}

// NodeScoreMeta is one node's score in a placement: its parts by name and
// the whole (higher is better).
type NodeScoreMeta struct {
	NodeID    string
	Scores    map[string]float64
	NormScore float64
}

// AllocStopResponse is alloc stop's answer: the eval that places the
// replacement.
type AllocStopResponse struct {
	EvalID string
	Index  uint64
}

// Stop stops an allocation; the scheduler places a replacement
// (PUT /v1/allocation/:id/stop).
func (a *Allocations) Stop(allocID string, w *WriteOptions) (*AllocStopResponse, error) {
	var resp AllocStopResponse
	if _, err := a.c.write(http.MethodPut, "/v1/allocation/"+url.PathEscape(allocID)+"/stop", nil, &resp, w); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Restart restarts one task of an allocation, or with task "" every
// running task (PUT /v1/client/allocation/:id/restart).
func (a *Allocations) Restart(allocID, task string, w *WriteOptions) error {
	body := struct {
		TaskName string
		AllTasks bool
	}{TaskName: task}
	_, err := a.c.write(http.MethodPut, "/v1/client/allocation/"+url.PathEscape(allocID)+"/restart", &body, nil, w)
	return err
}

// Signal sends signal (e.g. "SIGHUP") to one task of an allocation, or
// with task "" to every running task (PUT /v1/client/allocation/:id/signal).
func (a *Allocations) Signal(allocID, task, signal string, w *WriteOptions) error {
	body := struct {
		Task   string
		Signal string
	}{Task: task, Signal: signal}
	_, err := a.c.write(http.MethodPut, "/v1/client/allocation/"+url.PathEscape(allocID)+"/signal", &body, nil, w)
	return err
}
