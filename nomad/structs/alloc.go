package structs

import (
	"maps"
	"slices"
	"time"
)

// Desired status of an alloc: what the servers want.
const (
	AllocDesiredStatusRun   = "run"
	AllocDesiredStatusStop  = "stop"
	AllocDesiredStatusEvict = "evict"
)

// Client status of an alloc: what the client reports.
//
//	pending ──► running ──► complete
//	   │           │
//	   └───────────┴──────► failed | lost (node down)
const (
	AllocClientStatusPending  = "pending"
	AllocClientStatusRunning  = "running"
	AllocClientStatusComplete = "complete"
	AllocClientStatusFailed   = "failed"
	AllocClientStatusLost     = "lost"
)

// Allocation is one placement of a task group on a node.
type Allocation struct {
	ID        string
	Namespace string
	EvalID    string
	Name      string // "<job>.<group>[<index>]"
	NodeID    string
	NodeName  string
	JobID     string
	Job       *Job
	TaskGroup string

	// Resources the alloc reserves on its node.
	Resources *Resources

	// Metrics is how the scheduler chose the alloc's node. Set when the
	// alloc is made, never changed after: copies share it.
	Metrics *AllocMetric

	DesiredStatus      string
	DesiredDescription string
	ClientStatus       string
	ClientDescription  string
	TaskStates         map[string]*TaskState

	// TasksExited is set by the client once every task of the alloc has
	// exited and its CSI node unpublishes are done: the point after which
	// the servers may release its volume claims.
	TasksExited bool

	PreviousAllocation string
	NextAllocation     string
	RescheduleTracker  *RescheduleTracker
	FollowupEvalID     string

	CreateIndex      uint64
	ModifyIndex      uint64
	AllocModifyIndex uint64
	CreateTime       int64
	ModifyTime       int64
}

// Copy returns a deep copy; Job and Metrics are shared, as both are
// immutable once stored. Copying the metric was two thirds of a copy's
// time (its score maps), and allocs are copied on every delivery to a
// client and every client update.
func (a *Allocation) Copy() *Allocation {
	if a == nil {
		return nil
	}
	out := *a
	if a.Resources != nil {
		r := *a.Resources
		out.Resources = &r
	}
	out.TaskStates = copyTaskStates(a.TaskStates)
	if a.RescheduleTracker != nil {
		rt := *a.RescheduleTracker
		rt.Events = slices.Clone(a.RescheduleTracker.Events)
		out.RescheduleTracker = &rt
	}
	return &out
}

func copyTaskStates(in map[string]*TaskState) map[string]*TaskState {
	if in == nil {
		return nil
	}
	out := make(map[string]*TaskState, len(in))
	for k, ts := range in {
		out[k] = ts.Copy()
	}
	return out
}

// TerminalStatus reports whether the alloc is done or told to be.
func (a *Allocation) TerminalStatus() bool {
	switch a.DesiredStatus {
	case AllocDesiredStatusStop, AllocDesiredStatusEvict:
		return true
	}
	return a.ClientTerminalStatus()
}

// ClientTerminalStatus reports whether the client says the alloc ended.
func (a *Allocation) ClientTerminalStatus() bool {
	switch a.ClientStatus {
	case AllocClientStatusComplete, AllocClientStatusFailed, AllocClientStatusLost:
		return true
	}
	return false
}

// Index returns N from a name "job.group[N]", or -1.
func (a *Allocation) Index() int {
	l := len(a.Name)
	if l < 3 || a.Name[l-1] != ']' {
		return -1
	}
	i := l - 2
	for i >= 0 && a.Name[i] >= '0' && a.Name[i] <= '9' {
		i--
	}
	if i < 0 || a.Name[i] != '[' || i == l-2 {
		return -1
	}
	n := 0
	for _, c := range a.Name[i+1 : l-1] {
		n = n*10 + int(c-'0')
	}
	return n
}

// TaskState is one task's state on the client.
type TaskState struct {
	State       string // pending, running, dead
	Failed      bool
	Restarts    uint64
	LastRestart int64
	StartedAt   int64
	FinishedAt  int64
	Events      []*TaskEvent
}

// LastClientTime is the newest instant the client recorded in states
// (an event's time, a start, a finish or a restart; 0 for none): how far a
// client's report of an alloc goes. A client only adds to its task states,
// so a report whose LastClientTime is older than the stored one's was
// overtaken (state's UpdateAllocsFromClient).
func LastClientTime(states map[string]*TaskState) int64 {
	var last int64
	for _, ts := range states {
		if ts == nil {
			continue
		}
		last = max(last, ts.StartedAt, ts.FinishedAt, ts.LastRestart)
		for _, e := range ts.Events {
			if e != nil {
				last = max(last, e.Time)
			}
		}
	}
	return last
}

// Task states.
const (
	TaskStatePending = "pending"
	TaskStateRunning = "running"
	TaskStateDead    = "dead"
)

// Copy returns a deep copy.
func (ts *TaskState) Copy() *TaskState {
	if ts == nil {
		return nil
	}
	out := *ts
	if ts.Events != nil {
		out.Events = make([]*TaskEvent, len(ts.Events))
		for i, e := range ts.Events {
			ee := *e
			ee.Details = maps.Clone(e.Details)
			out.Events[i] = &ee
		}
	}
	return &out
}

// TaskEvent is one thing that happened to a task.
type TaskEvent struct {
	Type           string
	Time           int64
	Message        string
	DisplayMessage string
	ExitCode       int
	Signal         int
	FailsTask      bool
	Details        map[string]string
}

// RescheduleTracker remembers an alloc's reschedule history.
type RescheduleTracker struct {
	Events []*RescheduleEvent
}

// RescheduleEvent is one reschedule.
type RescheduleEvent struct {
	RescheduleTime int64
	PrevAllocID    string
	PrevNodeID     string
	Delay          int64
}

// AllocListStub is the list view of an alloc.
type AllocListStub struct {
	ID                 string
	EvalID             string
	Name               string
	Namespace          string
	NodeID             string
	NodeName           string
	JobID              string
	TaskGroup          string
	DesiredStatus      string
	DesiredDescription string
	ClientStatus       string
	ClientDescription  string
	TaskStates         map[string]*TaskState
	FollowupEvalID     string
	CreateIndex        uint64
	ModifyIndex        uint64
	CreateTime         int64
	ModifyTime         int64
}

// Stub returns the list view.
func (a *Allocation) Stub() *AllocListStub {
	return &AllocListStub{
		ID: a.ID, EvalID: a.EvalID, Name: a.Name, Namespace: a.Namespace,
		NodeID: a.NodeID, NodeName: a.NodeName, JobID: a.JobID, TaskGroup: a.TaskGroup,
		DesiredStatus: a.DesiredStatus, DesiredDescription: a.DesiredDescription,
		ClientStatus: a.ClientStatus, ClientDescription: a.ClientDescription,
		TaskStates: copyTaskStates(a.TaskStates), FollowupEvalID: a.FollowupEvalID,
		CreateIndex: a.CreateIndex, ModifyIndex: a.ModifyIndex,
		CreateTime: a.CreateTime, ModifyTime: a.ModifyTime,
	}
}

// AllocUpdateRequest carries client status updates for allocs, and the
// evals they cause, in one Raft entry.
type AllocUpdateRequest struct {
	Alloc     []*Allocation
	Evals     []*Evaluation
	Timestamp int64
	WriteRequest
}

// AllocDeleteRequest removes terminal allocs (GC).
type AllocDeleteRequest struct {
	AllocIDs []string
	WriteRequest
}

// AllocSpecificRequest reads one alloc.
type AllocSpecificRequest struct {
	AllocID string
	QueryOptions
}

// SingleAllocResponse carries one alloc, or nil.
type SingleAllocResponse struct {
	Alloc *Allocation
	QueryMeta
}

// AllocListResponse carries list stubs.
type AllocListResponse struct {
	Allocations []*AllocListStub
	QueryMeta
}

// NodeAllocsResponse carries a node's allocs for the client: in full,
// except those that ended and whose AllocModifyIndex is at most the
// request's MinQueryIndex (the client has them already), which are stubs
// with only IDs, names, indexes and statuses.
type NodeAllocsResponse struct {
	Allocs []*Allocation
	QueryMeta
}

// ApplyPlanResultsRequest commits a scheduler plan in one Raft entry: the
// allocs to place or update, those to stop, the CSI claims reserved with
// the placements, and the evals the plan creates or updates.
type ApplyPlanResultsRequest struct {
	// AllocsUpdated are new or updated allocs (placements, in-place updates).
	AllocsUpdated []*Allocation
	// AllocsStopped are allocs to set desired status stop/evict.
	AllocsStopped []*AllocStopUpdate
	// CSIClaims are claims reserved with the placements.
	CSIClaims []*CSIVolumeClaimUpdate
	// Evals created or updated with the plan (blocked evals, follow-ups).
	Evals []*Evaluation
	// EvalID is the eval that produced the plan.
	EvalID    string
	Timestamp int64
	WriteRequest
}

// AllocStopUpdate stops one alloc.
type AllocStopUpdate struct {
	AllocID            string
	DesiredStatus      string
	DesiredDescription string
	ClientStatus       string // set for lost allocs
}

// AllocDescStoppedByUser is the DesiredDescription of an alloc stopped
// by alloc stop.
const AllocDescStoppedByUser = "alloc stopped by an operator (alloc stop); the scheduler places a replacement"

// AllocStopRequest stops one alloc at an operator's request (alloc stop);
// the eval that comes with it lets the scheduler place a replacement.
type AllocStopRequest struct {
	AllocID string
	// Eval and Timestamp are set by the leader before proposing.
	Eval      *Evaluation
	Timestamp int64
	WriteRequest
}

// AllocStopResponse names the eval that replaces the stopped alloc.
type AllocStopResponse struct {
	EvalID string
	WriteMeta
}

// AllocRestartRequest restarts one task of a running alloc, or every
// running task with AllTasks (or when TaskName is empty).
type AllocRestartRequest struct {
	AllocID  string
	TaskName string
	AllTasks bool
	WriteRequest
}

// AllocSignalRequest sends Signal (a name such as "SIGHUP"; empty is
// SIGKILL as Nomad's) to one task of a running alloc, or to all of them.
type AllocSignalRequest struct {
	AllocID string
	Task    string
	Signal  string
	WriteRequest
}

// AllocFileInfo is one file of an alloc's directory (alloc fs), as
// Nomad's.
type AllocFileInfo struct {
	Name        string
	IsDir       bool
	Size        int64
	FileMode    string
	ModTime     time.Time
	ContentType string
}

// Alloc fs operations.
const (
	AllocFSList = "ls"
	AllocFSStat = "stat"
	AllocFSRead = "read"
)

// MaxAllocFSRead bounds the bytes one AllocFSRead call returns; larger
// reads take several calls.
const MaxAllocFSRead = 1 << 20

// AllocFSRequest reads an alloc's directory through its client: list or
// stat Path, or read up to Limit bytes of it from Offset.
type AllocFSRequest struct {
	AllocID string
	Op      string
	Path    string
	Offset  int64
	Limit   int64
	QueryOptions
}

// AllocFSResponse is what AllocFSRequest's Op returns: Files (ls), File
// (stat) or Data, with EOF once the file ends (read).
type AllocFSResponse struct {
	Files []*AllocFileInfo
	File  *AllocFileInfo
	Data  []byte
	EOF   bool
	QueryMeta
}
