package structs

import (
	"maps"
	"time"
)

// Eval status values.
//
//	pending ──► complete
//	   │  └───► failed
//	   └──────► blocked ──► (new pending eval when capacity appears) | canceled
const (
	EvalStatusBlocked   = "blocked"
	EvalStatusPending   = "pending"
	EvalStatusComplete  = "complete"
	EvalStatusFailed    = "failed"
	EvalStatusCancelled = "canceled"
)

// Eval trigger values.
const (
	EvalTriggerJobRegister      = "job-register"
	EvalTriggerJobDeregister    = "job-deregister"
	EvalTriggerNodeUpdate       = "node-update"
	EvalTriggerNodeDrain        = "node-drain"
	EvalTriggerRetryFailedAlloc = "alloc-failure"
	EvalTriggerQueuedAllocs     = "queued-allocs"
	EvalTriggerVolumeChange     = "csi-volume-change"
	EvalTriggerMaxPlans         = "max-plan-attempts"
	EvalTriggerReschedule       = "alloc-reschedule"
	EvalTriggerAllocStop        = "alloc-stop"
)

// NewJobEval makes a pending evaluation of job with the given ID, stamped
// at now; nodeID is set for evaluations caused by a node change. The
// caller picks the ID (structs stays free of randomness).
func NewJobEval(id string, job *Job, nodeID, trigger string, now int64) *Evaluation {
	return &Evaluation{
		ID:          id,
		Namespace:   job.Namespace,
		Priority:    job.Priority,
		Type:        job.Type,
		TriggeredBy: trigger,
		JobID:       job.ID,
		NodeID:      nodeID,
		Status:      EvalStatusPending,
		CreateTime:  now,
		ModifyTime:  now,
	}
}

// Evaluation is a unit of scheduling work: "look at job X again".
type Evaluation struct {
	ID                string
	Namespace         string
	Priority          int
	Type              string
	TriggeredBy       string
	JobID             string
	JobModifyIndex    uint64
	NodeID            string
	Status            string
	StatusDescription string
	WaitUntil         int64
	NextEval          string
	PreviousEval      string
	BlockedEval       string
	// FailedTGAllocs explains, per group, why placements failed.
	FailedTGAllocs map[string]*AllocMetric
	// QueuedAllocations counts placements still waiting, per group.
	QueuedAllocations map[string]int

	CreateIndex uint64
	ModifyIndex uint64
	CreateTime  int64
	ModifyTime  int64
}

// Copy returns a deep copy.
func (e *Evaluation) Copy() *Evaluation {
	if e == nil {
		return nil
	}
	out := *e
	if e.FailedTGAllocs != nil {
		out.FailedTGAllocs = make(map[string]*AllocMetric, len(e.FailedTGAllocs))
		for k, m := range e.FailedTGAllocs {
			out.FailedTGAllocs[k] = m.Copy()
		}
	}
	out.QueuedAllocations = maps.Clone(e.QueuedAllocations)
	return &out
}

// TerminalStatus reports whether the eval is done.
func (e *Evaluation) TerminalStatus() bool {
	switch e.Status {
	case EvalStatusComplete, EvalStatusFailed, EvalStatusCancelled:
		return true
	}
	return false
}

// AllocMetric explains a placement decision.
type AllocMetric struct {
	NodesEvaluated     int
	NodesFiltered      int
	NodesAvailable     map[string]int
	ClassFiltered      map[string]int
	ConstraintFiltered map[string]int
	NodesExhausted     int
	DimensionExhausted map[string]int
	CoalescedFailures  int
	// ScoreMetaData is the scores of the best nodes the placement
	// considered, best first (at most MaxScoreMetaData).
	ScoreMetaData []*NodeScoreMeta
	// AllocationTime is how long the placement took.
	AllocationTime time.Duration
}

// MaxScoreMetaData is how many nodes' scores a placement keeps.
const MaxScoreMetaData = 5

// NodeScoreMeta is one node's score in a placement: the parts, by name,
// and the whole (higher is better).
type NodeScoreMeta struct {
	NodeID    string
	Scores    map[string]float64
	NormScore float64
}

// Copy returns a deep copy.
func (m *AllocMetric) Copy() *AllocMetric {
	if m == nil {
		return nil
	}
	out := *m
	out.NodesAvailable = maps.Clone(m.NodesAvailable)
	out.ClassFiltered = maps.Clone(m.ClassFiltered)
	out.ConstraintFiltered = maps.Clone(m.ConstraintFiltered)
	out.DimensionExhausted = maps.Clone(m.DimensionExhausted)
	if m.ScoreMetaData != nil {
		out.ScoreMetaData = make([]*NodeScoreMeta, len(m.ScoreMetaData))
		for i, sm := range m.ScoreMetaData {
			c := *sm
			c.Scores = maps.Clone(sm.Scores)
			out.ScoreMetaData[i] = &c
		}
	}
	return &out
}

// EvalUpdateRequest upserts evals.
type EvalUpdateRequest struct {
	Evals     []*Evaluation
	Timestamp int64
	WriteRequest
}

// EvalDeleteRequest removes evals (GC).
type EvalDeleteRequest struct {
	EvalIDs []string
	WriteRequest
}

// EvalSpecificRequest reads one eval.
type EvalSpecificRequest struct {
	EvalID string
	QueryOptions
}

// SingleEvalResponse carries one eval, or nil.
type SingleEvalResponse struct {
	Eval *Evaluation
	QueryMeta
}

// EvalListResponse carries evals.
type EvalListResponse struct {
	Evaluations []*Evaluation
	QueryMeta
}
