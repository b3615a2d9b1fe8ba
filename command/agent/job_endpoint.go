package agent

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/nomad/structs"
)

// Job routes, as Nomad's:
//
//	GET        /v1/jobs                    list
//	PUT|POST   /v1/jobs {"Job": {...}}     register
//	GET        /v1/job/:id                 read
//	PUT|POST   /v1/job/:id {"Job": {...}}  register
//	DELETE     /v1/job/:id[?purge=true]    stop or purge
//	GET        /v1/job/:id/allocations[?all=true]
//	GET        /v1/job/:id/evaluations
//	PUT|POST   /v1/job/:id/plan {"Job": {...}}   dry run
//	GET        /v1/job/:id/versions[?diffs=true]   kept versions, newest first
//	PUT|POST   /v1/job/:id/revert {"JobVersion": n}
//	PUT|POST   /v1/job/:id/stable {"JobVersion": n, "Stable": true}

// jobRegisterReply is Nomad's reply to a job registration.
type jobRegisterReply struct {
	EvalID          string
	EvalCreateIndex uint64
	JobModifyIndex  uint64
	Warnings        string
	Index           uint64
}

// jobDeregisterReply is Nomad's reply to a job deregistration.
type jobDeregisterReply struct {
	EvalID          string
	EvalCreateIndex uint64
	JobModifyIndex  uint64
	Index           uint64
}

func (s *HTTPServer) jobsRequest(w http.ResponseWriter, r *http.Request) (any, error) {
	switch r.Method {
	case http.MethodGet:
		return s.jobList(w, r)
	case http.MethodPut, http.MethodPost:
		return s.jobRegister(w, r, "")
	}
	return nil, methodNotAllowed(r)
}

func (s *HTTPServer) jobList(w http.ResponseWriter, r *http.Request) (any, error) {
	var args structs.GenericRequest
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var reply structs.JobListResponse
	if err := s.agent.RPC("Job.List", &args, &reply); err != nil {
		return nil, err
	}
	setMeta(w, &reply.QueryMeta)
	out := make([]*api.JobListStub, 0, len(reply.Jobs))
	for _, j := range reply.Jobs {
		out = append(out, jobStubToAPI(j))
	}
	return out, nil
}

// jobRegister registers the job in the body {"Job": ...}.
func (s *HTTPServer) jobRegister(w http.ResponseWriter, r *http.Request, pathID string) (any, error) {
	var body api.JobRegisterRequest
	if err := decodeBody(r, &body); err != nil {
		return nil, err
	}
	if body.EnforceIndex {
		// Checking here, apart from the Raft write, would race with other
		// writers and promise what it cannot keep.
		return nil, CodedError(http.StatusBadRequest,
			"registering with EnforceIndex (job run -check-index) is not supported yet; register without it")
	}
	var args structs.JobRegisterRequest
	job, err := requestJob(r, body.Job, pathID, &args.WriteRequest)
	if err != nil {
		return nil, err
	}
	args.Job = job
	var reply structs.JobRegisterResponse
	if err := s.agent.RPC("Job.Register", &args, &reply); err != nil {
		return nil, err
	}
	setIndex(w, reply.Index)
	return jobRegisterReply{
		EvalID: reply.EvalID, EvalCreateIndex: reply.EvalCreateIndex, JobModifyIndex: reply.JobModifyIndex,
		Warnings: joinWarnings(reply.Warnings, ephemeralDiskWarning(body.Job)), Index: reply.Index,
	}, nil
}

// ephemeralDiskWarning says, for a job whose groups ask for ephemeral
// disk, that Berth does not reserve it ("" when none asks).
func ephemeralDiskWarning(j *api.Job) string {
	var groups []string
	for _, tg := range j.TaskGroups {
		if tg != nil && tg.EphemeralDisk != nil && tg.EphemeralDisk.SizeMB != nil {
			groups = append(groups, strconv.Quote(deref(tg.Name)))
		}
	}
	if len(groups) == 0 {
		return ""
	}
	return "ephemeral_disk size of group " + strings.Join(groups, ", ") +
		" is not reserved: Berth places allocs by CPU and memory only, and an alloc's directory uses the client's data_dir as it needs"
}

func joinWarnings(ws ...string) string {
	var out []string
	for _, w := range ws {
		if w != "" {
			out = append(out, w)
		}
	}
	return strings.Join(out, "\n")
}

// requestJob turns the job of a register or plan body into the servers'
// job: it fills Nomad's defaults (the upstream client sends jobs
// uncanonicalized), and a job without a namespace takes the one in the
// query string. pathID, when set, must match the job's ID.
func requestJob(r *http.Request, job *api.Job, pathID string, wr *structs.WriteRequest) (*structs.Job, error) {
	if job == nil {
		return nil, CodedError(http.StatusBadRequest, `request body has no job: want {"Job": {...}}`)
	}
	if pathID != "" && deref(job.ID) != pathID {
		return nil, CodedError(http.StatusBadRequest,
			"job ID "+strconv.Quote(deref(job.ID))+" in the body does not match "+strconv.Quote(pathID)+" in the path")
	}
	parseWrite(r, wr)
	if deref(job.Namespace) == "" && wr.Namespace != "" {
		job.Namespace = ptr(wr.Namespace)
	}
	job.Canonicalize()
	return apiJobToStructs(job), nil
}

// jobPlanRequest is the body of PUT /v1/job/:id/plan, as Nomad's client
// sends it.
type jobPlanRequest struct {
	Job            *api.Job
	Diff           bool
	PolicyOverride bool
}

// jobPlanReply is Nomad's reply to a plan. Diff is set when the request
// asks for it.
type jobPlanReply struct {
	Annotations        *nomad.PlanAnnotations
	FailedTGAllocs     map[string]*api.AllocationMetric
	JobModifyIndex     uint64
	CreatedEvals       []*api.Evaluation
	Diff               *JobDiff
	NextPeriodicLaunch time.Time
	Warnings           string
	Index              uint64
}

// jobPlan is a dry run of a registration: what the scheduler would do.
func (s *HTTPServer) jobPlan(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	if r.Method != http.MethodPut && r.Method != http.MethodPost {
		return nil, methodNotAllowed(r)
	}
	var body jobPlanRequest
	if err := decodeBody(r, &body); err != nil {
		return nil, err
	}
	var args structs.JobRegisterRequest
	job, err := requestJob(r, body.Job, id, &args.WriteRequest)
	if err != nil {
		return nil, err
	}
	args.Job = job
	// The registered job to diff against, read before the plan: a plan is
	// a dry run, so a register between the two only makes the diff as
	// stale as the plan itself would be.
	var existing structs.SingleJobResponse
	if body.Diff {
		get := structs.JobSpecificRequest{JobID: job.ID}
		get.Namespace, get.AuthToken = job.Namespace, args.AuthToken
		if err := s.agent.RPC(structs.MethodJobGetJob, &get, &existing); err != nil && !isNotFound(err) {
			return nil, err
		}
	}
	var reply nomad.JobPlanResponse
	if err := s.agent.RPC("Job.Plan", &args, &reply); err != nil {
		return nil, err
	}
	setIndex(w, reply.Index)
	out := jobPlanReply{
		Annotations: reply.Annotations, JobModifyIndex: reply.JobModifyIndex,
		CreatedEvals: evalsToAPI(reply.CreatedEvals), Warnings: reply.Warnings, Index: reply.Index,
	}
	if body.Diff {
		var updates map[string]*nomad.DesiredUpdates
		if reply.Annotations != nil {
			updates = reply.Annotations.DesiredTGUpdates
		}
		region := s.agent.config.Region
		var old *api.Job
		if existing.Job != nil {
			old = jobToAPI(existing.Job, region)
		}
		out.Diff = diffJobs(old, jobToAPI(job, region), updates)
	}
	if len(reply.FailedTGAllocs) > 0 {
		out.FailedTGAllocs = evalToAPI(&structs.Evaluation{FailedTGAllocs: reply.FailedTGAllocs}).FailedTGAllocs
	}
	return out, nil
}

func (s *HTTPServer) jobRequest(w http.ResponseWriter, r *http.Request) (any, error) {
	rest := trimPath(r, "/v1/job/")
	switch {
	case strings.HasSuffix(rest, "/allocations"):
		return s.jobAllocations(w, r, strings.TrimSuffix(rest, "/allocations"))
	case strings.HasSuffix(rest, "/evaluations"):
		return s.jobEvaluations(w, r, strings.TrimSuffix(rest, "/evaluations"))
	case strings.HasSuffix(rest, "/plan"):
		return s.jobPlan(w, r, strings.TrimSuffix(rest, "/plan"))
	case strings.HasSuffix(rest, "/summary"):
		return s.jobSummary(w, r, strings.TrimSuffix(rest, "/summary"))
	case strings.HasSuffix(rest, "/versions"):
		return s.jobVersions(w, r, strings.TrimSuffix(rest, "/versions"))
	case strings.HasSuffix(rest, "/revert"):
		return s.jobRevert(w, r, strings.TrimSuffix(rest, "/revert"))
	case strings.HasSuffix(rest, "/stable"):
		return s.jobStable(w, r, strings.TrimSuffix(rest, "/stable"))
	case strings.HasSuffix(rest, "/deployments"):
		return s.jobDeployments(w, r, strings.TrimSuffix(rest, "/deployments"))
	case rest == "" || strings.Contains(rest, "/"):
		return nil, CodedError(http.StatusNotFound, "no such endpoint: "+r.URL.Path)
	}
	switch r.Method {
	case http.MethodGet:
		return s.jobGet(w, r, rest)
	case http.MethodPut, http.MethodPost:
		return s.jobRegister(w, r, rest)
	case http.MethodDelete:
		return s.jobDeregister(w, r, rest)
	}
	return nil, methodNotAllowed(r)
}

func (s *HTTPServer) jobGet(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	args := structs.JobSpecificRequest{JobID: id}
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var reply structs.SingleJobResponse
	if err := s.agent.RPC("Job.GetJob", &args, &reply); err != nil {
		return nil, err
	}
	setMeta(w, &reply.QueryMeta)
	if reply.Job == nil {
		return nil, CodedError(http.StatusNotFound, "job not found")
	}
	return jobToAPI(reply.Job, s.agent.config.Region), nil
}

func (s *HTTPServer) jobDeregister(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	args := structs.JobDeregisterRequest{JobID: id}
	parseWrite(r, &args.WriteRequest)
	if p := r.URL.Query().Get("purge"); p != "" {
		purge, err := strconv.ParseBool(p)
		if err != nil {
			return nil, CodedError(http.StatusBadRequest, "invalid purge "+strconv.Quote(p)+": want true or false")
		}
		args.Purge = purge
	}
	var reply structs.JobDeregisterResponse
	if err := s.agent.RPC("Job.Deregister", &args, &reply); err != nil {
		return nil, err
	}
	setIndex(w, reply.Index)
	return jobDeregisterReply{EvalID: reply.EvalID, EvalCreateIndex: reply.Index, JobModifyIndex: reply.Index, Index: reply.Index}, nil
}

func (s *HTTPServer) jobAllocations(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	args := structs.JobSpecificRequest{JobID: id, All: r.URL.Query().Get("all") == "true"}
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var reply structs.AllocListResponse
	if err := s.agent.RPC("Job.Allocations", &args, &reply); err != nil {
		return nil, err
	}
	setMeta(w, &reply.QueryMeta)
	return allocStubsToAPI(reply.Allocations), nil
}

func (s *HTTPServer) jobEvaluations(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	args := structs.JobSpecificRequest{JobID: id}
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var reply structs.EvalListResponse
	if err := s.agent.RPC("Job.Evaluations", &args, &reply); err != nil {
		return nil, err
	}
	setMeta(w, &reply.QueryMeta)
	return evalsToAPI(reply.Evaluations), nil
}

// jobSummary is GET /v1/job/:id/summary: the job's allocs counted by
// state, per group, as the list stubs carry it. The ID is exact.
func (s *HTTPServer) jobSummary(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	var args structs.GenericRequest
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	args.Prefix = id
	var reply structs.JobListResponse
	if err := s.agent.RPC(structs.MethodJobList, &args, &reply); err != nil {
		return nil, err
	}
	setMeta(w, &reply.QueryMeta)
	for _, j := range reply.Jobs {
		if j.ID == id && j.JobSummary != nil {
			return j.JobSummary, nil
		}
	}
	return nil, CodedError(http.StatusNotFound, "job not found")
}

// jobVersionsReply is Nomad's reply to GET /v1/job/:id/versions.
type jobVersionsReply struct {
	Versions []*api.Job
	Diffs    []*JobDiff
	Index    uint64
}

// jobVersions lists the versions the servers keep of a job (exact ID),
// newest first. With ?diffs=true, Diffs[i] is the change from Versions[i+1]
// to Versions[i], as Nomad's; the diffs are of the API form of both, like
// a plan's, so defaults filled at registration never show as changes.
func (s *HTTPServer) jobVersions(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	q := r.URL.Query()
	diffs := false
	if v := q.Get("diffs"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, CodedError(http.StatusBadRequest, "invalid diffs "+strconv.Quote(v)+": want true or false")
		}
		diffs = b
	}
	for _, k := range []string{"diff_version", "diff_tag"} {
		if q.Get(k) != "" {
			return nil, CodedError(http.StatusBadRequest, k+" is not supported: Berth diffs each version against the one before it (diffs=true); compare two versions with 'berth job history -p'")
		}
	}
	args := structs.JobVersionsRequest{JobID: id}
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var reply structs.JobVersionsResponse
	if err := s.agent.RPC(structs.MethodJobGetJobVersions, &args, &reply); err != nil {
		return nil, err
	}
	setMeta(w, &reply.QueryMeta)
	if len(reply.Versions) == 0 {
		return nil, CodedError(http.StatusNotFound, "job versions not found")
	}
	region := s.agent.config.Region
	out := jobVersionsReply{Versions: make([]*api.Job, len(reply.Versions)), Index: reply.Index}
	for i, v := range reply.Versions {
		out.Versions[i] = jobToAPI(v, region)
	}
	if diffs {
		out.Diffs = make([]*JobDiff, 0, len(out.Versions))
		for i := 0; i+1 < len(out.Versions); i++ {
			out.Diffs = append(out.Diffs, diffJobs(out.Versions[i+1], out.Versions[i], nil))
		}
	}
	return out, nil
}

// jobRevert is PUT /v1/job/:id/revert: register again a kept version's
// spec. The body's JobID, when set, must be the path's.
func (s *HTTPServer) jobRevert(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	if r.Method != http.MethodPut && r.Method != http.MethodPost {
		return nil, methodNotAllowed(r)
	}
	var body api.JobRevertRequest
	if err := decodeBody(r, &body); err != nil {
		return nil, err
	}
	if body.JobID != "" && body.JobID != id {
		return nil, CodedError(http.StatusBadRequest, "job ID "+strconv.Quote(body.JobID)+" in the body does not match "+strconv.Quote(id)+" in the path")
	}
	args := structs.JobRevertRequest{JobID: id, JobVersion: body.JobVersion, EnforcePriorVersion: body.EnforcePriorVersion}
	parseWrite(r, &args.WriteRequest)
	var reply structs.JobRegisterResponse
	if err := s.agent.RPC(structs.MethodJobRevert, &args, &reply); err != nil {
		return nil, err
	}
	setIndex(w, reply.Index)
	return jobRegisterReply{
		EvalID: reply.EvalID, EvalCreateIndex: reply.EvalCreateIndex, JobModifyIndex: reply.JobModifyIndex,
		Warnings: reply.Warnings, Index: reply.Index,
	}, nil
}

// jobStabilityReply is Nomad's reply to PUT /v1/job/:id/stable.
type jobStabilityReply struct {
	JobModifyIndex uint64
	Index          uint64
}

// jobStable is PUT /v1/job/:id/stable: mark a kept version stable or
// not. The body's JobID, when set, must be the path's.
func (s *HTTPServer) jobStable(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	if r.Method != http.MethodPut && r.Method != http.MethodPost {
		return nil, methodNotAllowed(r)
	}
	var body api.JobStabilityRequest
	if err := decodeBody(r, &body); err != nil {
		return nil, err
	}
	if body.JobID != "" && body.JobID != id {
		return nil, CodedError(http.StatusBadRequest, "job ID "+strconv.Quote(body.JobID)+" in the body does not match "+strconv.Quote(id)+" in the path")
	}
	args := structs.JobStabilityRequest{JobID: id, JobVersion: body.JobVersion, Stable: body.Stable}
	parseWrite(r, &args.WriteRequest)
	var reply structs.GenericResponse
	if err := s.agent.RPC(structs.MethodJobStable, &args, &reply); err != nil {
		return nil, err
	}
	setIndex(w, reply.Index)
	return jobStabilityReply{JobModifyIndex: reply.Index, Index: reply.Index}, nil
}

// jobDeployments is GET /v1/job/:id/deployments: always empty, as Berth
// has no deployments (updates are applied by the scheduler directly). The
// job must exist.
func (s *HTTPServer) jobDeployments(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	if _, err := s.jobGet(w, r, id); err != nil {
		return nil, err
	}
	return []struct{}{}, nil
}
