package api

import (
	"net/url"
	"time"
)

// Evaluation statuses.
const (
	EvalStatusBlocked   = "blocked"
	EvalStatusPending   = "pending"
	EvalStatusComplete  = "complete"
	EvalStatusFailed    = "failed"
	EvalStatusCancelled = "canceled"
)

// Evaluations is the /v1/evaluations and /v1/evaluation/:id endpoints.
type Evaluations struct{ c *Client }

// Evaluations returns the evaluation endpoints.
func (c *Client) Evaluations() *Evaluations { return &Evaluations{c: c} }

// List lists evaluations (GET /v1/evaluations).
func (e *Evaluations) List(q *QueryOptions) ([]*Evaluation, *QueryMeta, error) {
	var resp []*Evaluation
	qm, err := e.c.query("/v1/evaluations", &resp, q)
	if err != nil {
		return nil, nil, err
	}
	return resp, qm, nil
}

// PrefixList lists the evaluations whose ID starts with prefix.
func (e *Evaluations) PrefixList(prefix string) ([]*Evaluation, *QueryMeta, error) {
	return e.List(&QueryOptions{Prefix: prefix})
}

// Info reads one evaluation (GET /v1/evaluation/:id).
func (e *Evaluations) Info(evalID string, q *QueryOptions) (*Evaluation, *QueryMeta, error) {
	var resp Evaluation
	qm, err := e.c.query("/v1/evaluation/"+url.PathEscape(evalID), &resp, q)
	if err != nil {
		return nil, nil, err
	}
	return &resp, qm, nil
}

// Evaluation is one run of the scheduler for a job: why it ran and what
// it could not place.
type Evaluation struct {
	ID                string
	Priority          int
	Type              string // the job type
	TriggeredBy       string // job-register, node-update, alloc-failure, ...
	Namespace         string
	JobID             string
	JobModifyIndex    uint64
	NodeID            string
	NodeModifyIndex   uint64
	Status            string
	StatusDescription string
	Wait              time.Duration
	WaitUntil         time.Time
	NextEval          string
	PreviousEval      string
	// BlockedEval is the eval created to place what this one could not.
	BlockedEval string
	// FailedTGAllocs says, per task group, why allocs could not be placed.
	FailedTGAllocs map[string]*AllocationMetric
	// QueuedAllocations counts, per task group, allocs waiting for room.
	QueuedAllocations map[string]int
	CreateIndex       uint64
	ModifyIndex       uint64
	CreateTime        int64 // unix ns
	ModifyTime        int64 // unix ns
}
