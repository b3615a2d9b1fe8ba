package api

import (
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// Job types.
const (
	JobTypeService = "service"
	JobTypeBatch   = "batch"
	JobTypeSystem  = "system"
)

// Job status values.
const (
	JobStatusPending = "pending"
	JobStatusRunning = "running"
	JobStatusDead    = "dead"
)

const (
	// DefaultNamespace is the namespace of a job or volume that names none.
	DefaultNamespace = "default"
	// GlobalRegion is the region of a job that names none.
	GlobalRegion = "global"
	// DefaultJobPriority is the priority of a job that gives none.
	DefaultJobPriority = 50
)

// Jobs is the /v1/jobs and /v1/job/:id endpoints.
type Jobs struct{ c *Client }

// Jobs returns the job endpoints.
func (c *Client) Jobs() *Jobs { return &Jobs{c: c} }

// Register creates or updates a job (PUT /v1/jobs {"Job": ...}). The
// server canonicalizes the job, so sending it sparse is fine.
func (j *Jobs) Register(job *Job, w *WriteOptions) (*JobRegisterResponse, *WriteMeta, error) {
	var resp JobRegisterResponse
	wm, err := j.c.write("PUT", "/v1/jobs", &JobRegisterRequest{Job: job}, &resp, w)
	if err != nil {
		return nil, nil, err
	}
	return &resp, wm, nil
}

// List lists jobs (GET /v1/jobs).
func (j *Jobs) List(q *QueryOptions) ([]*JobListStub, *QueryMeta, error) {
	var resp []*JobListStub
	qm, err := j.c.query("/v1/jobs", &resp, q)
	if err != nil {
		return nil, nil, err
	}
	return resp, qm, nil
}

// PrefixList lists the jobs whose ID starts with prefix.
func (j *Jobs) PrefixList(prefix string) ([]*JobListStub, *QueryMeta, error) {
	return j.List(&QueryOptions{Prefix: prefix})
}

// Info reads one job (GET /v1/job/:id).
func (j *Jobs) Info(jobID string, q *QueryOptions) (*Job, *QueryMeta, error) {
	var resp Job
	qm, err := j.c.query("/v1/job/"+url.PathEscape(jobID), &resp, q)
	if err != nil {
		return nil, nil, err
	}
	return &resp, qm, nil
}

// Deregister stops a job (DELETE /v1/job/:id?purge=). With purge the job
// is removed from state at once instead of being kept as stopped until
// garbage collection. It returns the ID of the evaluation created.
func (j *Jobs) Deregister(jobID string, purge bool, w *WriteOptions) (string, *WriteMeta, error) {
	var resp JobDeregisterResponse
	wm, err := j.c.write("DELETE", "/v1/job/"+url.PathEscape(jobID), nil, &resp, withParam(w, "purge", strconv.FormatBool(purge)))
	if err != nil {
		return "", nil, err
	}
	return resp.EvalID, wm, nil
}

// Allocations lists a job's allocations (GET /v1/job/:id/allocations).
// allAllocs also returns allocations of earlier versions of the job.
func (j *Jobs) Allocations(jobID string, allAllocs bool, q *QueryOptions) ([]*AllocationListStub, *QueryMeta, error) {
	var resp []*AllocationListStub
	qm, err := j.c.query("/v1/job/"+url.PathEscape(jobID)+"/allocations", &resp, withQueryParams(q, "all", strconv.FormatBool(allAllocs)))
	if err != nil {
		return nil, nil, err
	}
	return resp, qm, nil
}

// Evaluations lists a job's evaluations (GET /v1/job/:id/evaluations).
func (j *Jobs) Evaluations(jobID string, q *QueryOptions) ([]*Evaluation, *QueryMeta, error) {
	var resp []*Evaluation
	qm, err := j.c.query("/v1/job/"+url.PathEscape(jobID)+"/evaluations", &resp, q)
	if err != nil {
		return nil, nil, err
	}
	return resp, qm, nil
}

// Job is a job as the HTTP API carries it. Fields are pointers where
// Nomad's are, so a request may leave them out; Canonicalize fills the
// defaults. The server sets the fields below Meta.
type Job struct {
	Region      *string
	Namespace   *string
	ID          *string
	Name        *string
	Type        *string
	Priority    *int
	Datacenters []string
	Constraints []*Constraint
	TaskGroups  []*TaskGroup
	// Reschedule is the job-wide reschedule policy; groups inherit it.
	Reschedule *ReschedulePolicy
	Meta       map[string]string

	Stop              *bool
	ParentID          *string
	Status            *string
	StatusDescription *string
	Stable            *bool
	Version           *uint64
	SubmitTime        *int64 // unix ns
	CreateIndex       *uint64
	ModifyIndex       *uint64
	JobModifyIndex    *uint64
}

// Canonicalize fills the defaults Nomad fills: namespace "default", region
// "global", type "service", priority 50, datacenters ["*"], and the group
// and task defaults (see TaskGroup.Canonicalize and Task.Canonicalize).
// It tolerates nil entries in any list or map, leaving them for the
// server's validation to reject.
func (j *Job) Canonicalize() {
	if j.ID == nil {
		j.ID = pointerOf("")
	}
	if j.Name == nil {
		j.Name = pointerOf(*j.ID)
	}
	if j.ParentID == nil {
		j.ParentID = pointerOf("")
	}
	if j.Namespace == nil {
		j.Namespace = pointerOf(DefaultNamespace)
	}
	if j.Region == nil {
		j.Region = pointerOf(GlobalRegion)
	}
	if j.Type == nil {
		j.Type = pointerOf(JobTypeService)
	}
	if j.Priority == nil {
		j.Priority = pointerOf(DefaultJobPriority)
	}
	if len(j.Datacenters) == 0 {
		j.Datacenters = []string{"*"}
	}
	if j.Stop == nil {
		j.Stop = pointerOf(false)
	}
	if j.Status == nil {
		j.Status = pointerOf("")
	}
	if j.StatusDescription == nil {
		j.StatusDescription = pointerOf("")
	}
	if j.Stable == nil {
		j.Stable = pointerOf(false)
	}
	if j.Version == nil {
		j.Version = pointerOf(uint64(0))
	}
	if j.CreateIndex == nil {
		j.CreateIndex = pointerOf(uint64(0))
	}
	if j.ModifyIndex == nil {
		j.ModifyIndex = pointerOf(uint64(0))
	}
	if j.JobModifyIndex == nil {
		j.JobModifyIndex = pointerOf(uint64(0))
	}
	for _, tg := range j.TaskGroups {
		if tg != nil {
			tg.Canonicalize(j)
		}
	}
}

// LookupTaskGroup returns the group named name, or nil.
func (j *Job) LookupTaskGroup(name string) *TaskGroup {
	for _, tg := range j.TaskGroups {
		if tg != nil && tg.Name != nil && *tg.Name == name {
			return tg
		}
	}
	return nil
}

// Constraint restricts placement: LTarget Operand RTarget, e.g.
// "${attr.kernel.name}" "=" "linux". In a jobspec these are attribute,
// operator and value.
type Constraint struct {
	LTarget string
	RTarget string
	Operand string
}

// NewConstraint returns a constraint.
func NewConstraint(left, operand, right string) *Constraint {
	return &Constraint{LTarget: left, RTarget: right, Operand: operand}
}

// JobListStub is the list view of a job.
type JobListStub struct {
	ID                string
	ParentID          string
	Name              string
	Namespace         string
	Datacenters       []string
	Type              string
	Priority          int
	Stop              bool
	Status            string
	StatusDescription string
	Meta              map[string]string `json:",omitempty"`
	CreateIndex       uint64
	ModifyIndex       uint64
	JobModifyIndex    uint64
	SubmitTime        int64
	JobSummary        *JobSummary
}

// JobSummary counts a job's allocs by client state, per task group.
type JobSummary struct {
	JobID       string
	Namespace   string
	Summary     map[string]TaskGroupSummary
	Children    *JobChildrenSummary
	CreateIndex uint64
	ModifyIndex uint64
}

// JobChildrenSummary counts a parent job's children by status (always
// zero: Berth has no parameterized or periodic jobs).
type JobChildrenSummary struct {
	Pending, Running, Dead int64
}

// TaskGroupSummary counts one group's allocs by client state.
type TaskGroupSummary struct {
	Queued, Complete, Failed, Running, Starting, Lost, Unknown int
}

// JobRegisterRequest is the body of PUT /v1/jobs.
type JobRegisterRequest struct {
	Job *Job
	// EnforceIndex registers only if the job's JobModifyIndex is
	// JobModifyIndex (0: only if the job is new).
	EnforceIndex   bool   `json:",omitempty"`
	JobModifyIndex uint64 `json:",omitempty"`
}

// JobRegisterResponse answers a job registration.
type JobRegisterResponse struct {
	EvalID          string
	EvalCreateIndex uint64
	JobModifyIndex  uint64
	// Warnings are non-fatal problems with the job, one per line.
	Warnings string
}

// JobDeregisterResponse answers a job deregistration.
type JobDeregisterResponse struct {
	EvalID          string
	EvalCreateIndex uint64
	JobModifyIndex  uint64
}

// durationPtr is a shorthand for the many *time.Duration defaults.
func durationPtr(d time.Duration) *time.Duration { return &d }

// JobPlanRequest is the body of PUT /v1/job/:id/plan.
type JobPlanRequest struct {
	Job  *Job
	Diff bool
}

// JobPlanResponse is what the scheduler would do with a job, without
// doing it.
type JobPlanResponse struct {
	Annotations    *PlanAnnotations
	FailedTGAllocs map[string]*AllocationMetric
	JobModifyIndex uint64
	CreatedEvals   []*Evaluation
	Warnings       string
}

// PlanAnnotations hold per-group counts of a plan.
type PlanAnnotations struct {
	DesiredTGUpdates map[string]*DesiredUpdates
}

// DesiredUpdates counts what a plan does to one group's allocs.
type DesiredUpdates struct {
	Ignore            uint64
	Place             uint64
	Migrate           uint64
	Stop              uint64
	InPlaceUpdate     uint64
	DestructiveUpdate uint64
	Canary            uint64
	Preemptions       uint64
}

// Plan asks the servers what registering job would do (PUT
// /v1/job/:id/plan); nothing is written.
func (j *Jobs) Plan(job *Job, w *WriteOptions) (*JobPlanResponse, *WriteMeta, error) {
	if job == nil || job.ID == nil || *job.ID == "" {
		return nil, nil, fmt.Errorf("planning job: missing job ID")
	}
	var resp JobPlanResponse
	wm, err := j.c.write("PUT", "/v1/job/"+url.PathEscape(*job.ID)+"/plan", &JobPlanRequest{Job: job}, &resp, w)
	if err != nil {
		return nil, nil, err
	}
	return &resp, wm, nil
}
