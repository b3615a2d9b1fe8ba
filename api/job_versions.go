package api

import (
	"net/url"
	"strconv"
)

// Versions lists the versions the servers keep of a job, newest first
// (GET /v1/job/:id/versions). With diffs, diffs[i] is what changed from
// versions[i+1] to versions[i].
func (j *Jobs) Versions(jobID string, diffs bool, q *QueryOptions) ([]*Job, []*JobDiff, *QueryMeta, error) {
	var resp JobVersionsResponse
	qm, err := j.c.query("/v1/job/"+url.PathEscape(jobID)+"/versions", &resp, withQueryParams(q, "diffs", strconv.FormatBool(diffs)))
	if err != nil {
		return nil, nil, nil, err
	}
	return resp.Versions, resp.Diffs, qm, nil
}

// Revert registers again the spec of one of a job's kept versions, as a
// new version (PUT /v1/job/:id/revert). With enforcePriorVersion set the
// servers refuse unless the job is at that version.
func (j *Jobs) Revert(jobID string, version uint64, enforcePriorVersion *uint64, w *WriteOptions) (*JobRegisterResponse, *WriteMeta, error) {
	var resp JobRegisterResponse
	req := &JobRevertRequest{JobID: jobID, JobVersion: version, EnforcePriorVersion: enforcePriorVersion}
	wm, err := j.c.write("PUT", "/v1/job/"+url.PathEscape(jobID)+"/revert", req, &resp, w)
	if err != nil {
		return nil, nil, err
	}
	return &resp, wm, nil
}

// Stable marks one kept version of a job stable or not (PUT
// /v1/job/:id/stable). Berth has no deployments: only this sets it.
func (j *Jobs) Stable(jobID string, version uint64, stable bool, w *WriteOptions) (*WriteMeta, error) {
	var resp struct{ Index uint64 }
	req := &JobStabilityRequest{JobID: jobID, JobVersion: version, Stable: stable}
	return j.c.write("PUT", "/v1/job/"+url.PathEscape(jobID)+"/stable", req, &resp, w)
}

// JobStabilityRequest is the body of PUT /v1/job/:id/stable.
type JobStabilityRequest struct {
	JobID      string
	JobVersion uint64
	Stable     bool
}

// JobVersionsResponse is the body of GET /v1/job/:id/versions.
type JobVersionsResponse struct {
	Versions []*Job
	Diffs    []*JobDiff
}

// JobRevertRequest is the body of PUT /v1/job/:id/revert.
type JobRevertRequest struct {
	JobID               string
	JobVersion          uint64
	EnforcePriorVersion *uint64
}

// Diff types, as Nomad names them.
const (
	DiffTypeAdded   = "Added"
	DiffTypeDeleted = "Deleted"
	DiffTypeEdited  = "Edited"
	DiffTypeNone    = "None"
)

// JobDiff is what changed between two versions of a job (or between the
// job in force and a plan): a tree of objects whose leaves are fields with
// an old and a new value, each node typed Added, Deleted, Edited or None.
type JobDiff struct {
	Type       string
	ID         string
	Fields     []*FieldDiff
	Objects    []*ObjectDiff
	TaskGroups []*TaskGroupDiff
}

// TaskGroupDiff is one group's diff; in a plan, Updates counts what the
// plan does to its allocs, keyed as Nomad's CLI prints them.
type TaskGroupDiff struct {
	Type    string
	Name    string
	Fields  []*FieldDiff
	Objects []*ObjectDiff
	Tasks   []*TaskDiff
	Updates map[string]uint64
}

// TaskDiff is one task's diff.
type TaskDiff struct {
	Type        string
	Name        string
	Fields      []*FieldDiff
	Objects     []*ObjectDiff
	Annotations []string
}

// FieldDiff is one value that changed (or not, in a contextual diff).
type FieldDiff struct {
	Type        string
	Name        string
	Old, New    string
	Annotations []string
}

// ObjectDiff is a nested object's diff.
type ObjectDiff struct {
	Type    string
	Name    string
	Fields  []*FieldDiff
	Objects []*ObjectDiff
}
