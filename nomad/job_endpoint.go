package nomad

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/acl"
	"github.com/berth-io/berth/nomad/scheduler"
	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// JobEndpoint registers, stops and reads jobs ("Job.*").
type JobEndpoint struct {
	srv *Server
}

// Register creates or updates a job and, in the same Raft entry, a pending
// evaluation that makes the scheduler look at it.
func (j *JobEndpoint) Register(args *structs.JobRegisterRequest, reply *structs.JobRegisterResponse) (err error) {
	defer wire(&err)
	defer measureRPC("Job.Register", time.Now())
	if done, err := j.srv.forward("Job.Register", args, args, reply); done {
		return err
	}
	// Authorization arrives with ACLs; every caller may register today.
	job, err := jobToRegister("job register", args)
	if err != nil {
		return err
	}
	now := time.Now().UnixNano()
	job.SubmitTime = now
	eval := newJobEval(job, "", structs.EvalTriggerJobRegister, now)
	args.Job, args.Eval, args.Timestamp = job, eval, now
	args.TrackedVersions = j.srv.config.JobTrackedVersions
	_, index, err := j.srv.raftApply(structs.JobRegisterRequestType, args)
	if err != nil {
		return fmt.Errorf("registering job %q: %w", job.ID, err)
	}
	reply.EvalID = eval.ID
	reply.EvalCreateIndex = index
	reply.JobModifyIndex = index
	// The FSM applied the entry before raftApply returned; an unchanged
	// spec keeps its earlier JobModifyIndex.
	if stored, err := j.srv.State().JobByID(nil, job.Namespace, job.ID); err == nil && stored != nil {
		reply.JobModifyIndex = stored.JobModifyIndex
	}
	reply.Warnings = j.registerWarnings(job)
	reply.Index = index
	return nil
}

// jobToRegister is the job that Register (or Plan, for op "job plan")
// would store: a copy, since in-process callers share args.Job with us, in
// the request's namespace unless it names its own, and valid.
func jobToRegister(op string, args *structs.JobRegisterRequest) (*structs.Job, error) {
	if args.Job == nil {
		return nil, structs.NewError(structs.CodeInvalid, "%s: missing job", op)
	}
	job := args.Job.Copy()
	if job.Namespace == "" {
		job.Namespace = args.RequestNamespace()
	}
	if job.Namespace == structs.AllNamespaces {
		return nil, structs.NewError(structs.CodeInvalid, "job %q: namespace %q is only for listing; name one namespace", job.ID, job.Namespace)
	}
	if err := job.Validate(); err != nil {
		return nil, err
	}
	return job, nil
}

// registerWarnings points out what will keep the job from running that is
// not an error: CSI volumes it uses that are not registered yet (its
// allocs wait for them).
func (j *JobEndpoint) registerWarnings(job *structs.Job) string {
	var warns []string
	for _, tg := range job.TaskGroups {
		for _, name := range slices.Sorted(maps.Keys(tg.Volumes)) {
			v := tg.Volumes[name]
			if v.Type != structs.VolumeTypeCSI || v.PerAlloc {
				continue
			}
			vol, err := j.srv.State().CSIVolumeByID(nil, job.Namespace, v.Source)
			if err != nil || vol != nil {
				continue
			}
			warns = append(warns, fmt.Sprintf(
				"group %q: CSI volume %q is not registered in namespace %q; its allocations will wait until it is (berth volume register)",
				tg.Name, v.Source, job.Namespace))
		}
	}
	return strings.Join(warns, "\n")
}

// Deregister stops a job, or with Purge removes it, and creates the
// evaluation that stops its allocations. Purging never frees volume
// claims early: they are released as the allocations stop.
func (j *JobEndpoint) Deregister(args *structs.JobDeregisterRequest, reply *structs.JobDeregisterResponse) (err error) {
	defer wire(&err)
	defer measureRPC("Job.Deregister", time.Now())
	if done, err := j.srv.forward("Job.Deregister", args, args, reply); done {
		return err
	}
	if args.JobID == "" {
		return structs.NewError(structs.CodeInvalid, "job deregister: missing job ID")
	}
	ns := args.RequestNamespace()
	job, err := j.srv.State().JobByID(nil, ns, args.JobID)
	if err != nil {
		return err
	}
	if job == nil {
		return structs.NewError(structs.CodeNotFound, "job %q not found in namespace %q; see 'berth job status'", args.JobID, ns)
	}
	now := time.Now().UnixNano()
	eval := newJobEval(job, "", structs.EvalTriggerJobDeregister, now)
	args.Namespace, args.Eval, args.Timestamp = ns, eval, now
	args.TrackedVersions = j.srv.config.JobTrackedVersions
	_, index, err := j.srv.raftApply(structs.JobDeregisterRequestType, args)
	if err != nil {
		return fmt.Errorf("deregistering job %q: %w", args.JobID, err)
	}
	reply.EvalID = eval.ID
	reply.Index = index
	return nil
}

// GetJob reads one job by ID or unique ID prefix; reply.Job is nil when
// there is none.
func (j *JobEndpoint) GetJob(args *structs.JobSpecificRequest, reply *structs.SingleJobResponse) (err error) {
	defer wire(&err)
	defer measureRPC("Job.GetJob", time.Now())
	if done, err := j.srv.forward("Job.GetJob", args, args, reply); done {
		return err
	}
	if args.JobID == "" {
		return structs.NewError(structs.CodeInvalid, "job read: missing job ID")
	}
	ns := args.RequestNamespace()
	return j.srv.blockingRPC(&args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, snap *state.StateSnapshot) (uint64, error) {
		job, err := jobExact(ws, snap, ns, args.JobID)
		if err != nil {
			return 0, err
		}
		reply.Job = job.Copy()
		if job != nil {
			return job.ModifyIndex, nil
		}
		return snap.Index(state.TableJobs)
	})
}

// jobExact finds the job with exactly this ID in namespace ns, or in
// every namespace when ns is "*" (an ID in several is CodeInvalid).
func jobExact(ws memdb.WatchSet, snap *state.StateSnapshot, ns, id string) (*structs.Job, error) {
	return lookupExact("job", id,
		func() (*structs.Job, error) {
			if ns == structs.AllNamespaces {
				return nil, nil
			}
			return snap.JobByID(ws, ns, id)
		},
		func() (memdb.ResultIterator, error) { return snap.JobsByIDPrefix(ws, ns, id) },
		func(j *structs.Job) string { return j.ID })
}

// GetJobVersions reads the versions the servers keep of one job (exact
// ID), newest first: the version in force, then the ones it replaced, up
// to server.job_tracked_versions. Versions is empty when there is no such
// job. With namespace "*" the job is looked up in every namespace (an ID
// in several is CodeInvalid, naming them).
func (j *JobEndpoint) GetJobVersions(args *structs.JobVersionsRequest, reply *structs.JobVersionsResponse) (err error) {
	defer wire(&err)
	defer measureRPC(structs.MethodJobGetJobVersions, time.Now())
	if done, err := j.srv.forward(structs.MethodJobGetJobVersions, args, args, reply); done {
		return err
	}
	if args.JobID == "" {
		return structs.NewError(structs.CodeInvalid, "job versions: missing job ID")
	}
	ns := args.RequestNamespace()
	return j.srv.blockingRPC(&args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, snap *state.StateSnapshot) (uint64, error) {
		job, err := jobExact(ws, snap, ns, args.JobID)
		if err != nil {
			return 0, err
		}
		reply.Versions = []*structs.Job{}
		if job == nil {
			return snap.Index(state.TableJobVersions)
		}
		vs, err := snap.JobVersionsByID(ws, job.Namespace, job.ID)
		if err != nil {
			return 0, err
		}
		for _, v := range vs {
			reply.Versions = append(reply.Versions, v.Copy())
		}
		return maxIndex(snap, state.TableJobs, state.TableJobVersions)
	})
}

// Revert registers again the spec of one of a job's kept versions: a new
// version, with the evaluation that makes the scheduler apply it. The
// version in force, and a version no longer kept, are refused with the
// way out. Reverting to a spec that mounts CSI volumes needs what
// registering it needs (csi-mount-volume).
func (j *JobEndpoint) Revert(args *structs.JobRevertRequest, reply *structs.JobRegisterResponse) (err error) {
	defer wire(&err)
	defer measureRPC(structs.MethodJobRevert, time.Now())
	if done, err := j.srv.forward(structs.MethodJobRevert, args, args, reply); done {
		return err
	}
	if args.JobID == "" {
		return structs.NewError(structs.CodeInvalid, "job revert: missing job ID")
	}
	ns := args.RequestNamespace()
	if ns == structs.AllNamespaces {
		return structs.NewError(structs.CodeInvalid, "job revert %q: namespace %q is only for listing; name the job's namespace", args.JobID, ns)
	}
	snap, err := j.srv.State().Snapshot()
	if err != nil {
		return err
	}
	cur, err := snap.JobByID(nil, ns, args.JobID)
	if err != nil {
		return err
	}
	if cur == nil {
		return structs.NewError(structs.CodeNotFound, "job %q not found in namespace %q; see 'berth job status'", args.JobID, ns)
	}
	if args.EnforcePriorVersion != nil && *args.EnforcePriorVersion != cur.Version {
		return structs.NewError(structs.CodeConflict, "job %q is at version %d, not %d as the revert required; see 'berth job history %s'",
			args.JobID, cur.Version, *args.EnforcePriorVersion, args.JobID)
	}
	if args.JobVersion == cur.Version {
		return structs.NewError(structs.CodeInvalid, "job %q is already at version %d; name an earlier version from 'berth job history %s'",
			args.JobID, cur.Version, args.JobID)
	}
	old, err := snap.JobByIDAndVersion(nil, ns, args.JobID, args.JobVersion)
	if err != nil {
		return err
	}
	if old == nil {
		return structs.NewError(structs.CodeNotFound, "job %q has no version %d kept (the servers keep the last %d); see 'berth job history %s'",
			args.JobID, args.JobVersion, j.trackedVersions(), args.JobID)
	}
	reg := &structs.JobRegisterRequest{Job: old.Copy(), WriteRequest: args.WriteRequest}
	reg.Namespace = ns
	// The revert was authorized as a submit; the spec it brings back is
	// authorized as its registration would be.
	if _, _, err := j.srv.authorize(structs.MethodJobRegister, reg); err != nil {
		return err
	}
	return j.Register(reg, reply)
}

// Stable marks one kept version of a job stable (or not), as Nomad's
// deployments do when one succeeds; Berth has none, so only this sets it.
func (j *JobEndpoint) Stable(args *structs.JobStabilityRequest, reply *structs.GenericResponse) (err error) {
	defer wire(&err)
	defer measureRPC(structs.MethodJobStable, time.Now())
	if done, err := j.srv.forward(structs.MethodJobStable, args, args, reply); done {
		return err
	}
	if args.JobID == "" {
		return structs.NewError(structs.CodeInvalid, "job stability: missing job ID")
	}
	ns := args.RequestNamespace()
	if ns == structs.AllNamespaces {
		return structs.NewError(structs.CodeInvalid, "job stability %q: namespace %q is only for listing; name the job's namespace", args.JobID, ns)
	}
	v, err := j.srv.State().JobByIDAndVersion(nil, ns, args.JobID, args.JobVersion)
	if err != nil {
		return err
	}
	if v == nil {
		return structs.NewError(structs.CodeNotFound, "job %q has no version %d kept in namespace %q; see 'berth job history %s'",
			args.JobID, args.JobVersion, ns, args.JobID)
	}
	args.Namespace = ns
	_, index, err := j.srv.raftApply(structs.JobStabilityRequestType, args)
	if err != nil {
		return fmt.Errorf("marking version %d of job %q: %w", args.JobVersion, args.JobID, err)
	}
	reply.Index = index
	return nil
}

// trackedVersions is how many versions of a job this server keeps.
func (j *JobEndpoint) trackedVersions() int {
	if n := j.srv.config.JobTrackedVersions; n > 0 {
		return n
	}
	return structs.DefaultJobTrackedVersions
}

// List lists the jobs of a namespace ("*" for all), by ID prefix, one page
// at a time, filtered over the list stubs.
func (j *JobEndpoint) List(args *structs.GenericRequest, reply *structs.JobListResponse) (err error) {
	defer wire(&err)
	defer measureRPC("Job.List", time.Now())
	if done, err := j.srv.forward("Job.List", args, args, reply); done {
		return err
	}
	ns := args.RequestNamespace()
	return j.srv.blockingRPC(&args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, snap *state.StateSnapshot) (uint64, error) {
		iter, err := snap.JobsByIDPrefix(ws, ns, args.Prefix)
		if err == nil {
			iter, err = visible(j.srv, &args.QueryOptions, acl.CapListJobs, iter, func(j *structs.Job) string { return j.Namespace })
		}
		if err != nil {
			return 0, err
		}
		p, err := paginate(iter, &args.QueryOptions,
			func(j *structs.Job) pageKey { return nsKey(j.Namespace, j.ID) },
			(*structs.Job).Stub)
		if err != nil {
			return 0, err
		}
		for _, stub := range p.Items {
			if stub.JobSummary, err = jobSummary(ws, snap, stub.Namespace, stub.ID); err != nil {
				return 0, err
			}
		}
		reply.Jobs, reply.NextToken = p.Items, p.NextToken
		// The summaries change with allocs and evals, not only jobs.
		return maxIndex(snap, state.TableJobs, state.TableAllocs, state.TableEvals)
	})
}

// jobSummary counts the allocs of one job; nil when the job is gone.
func jobSummary(ws memdb.WatchSet, snap *state.StateSnapshot, ns, id string) (*structs.JobSummary, error) {
	job, err := snap.JobByID(ws, ns, id)
	if err != nil || job == nil {
		return nil, err
	}
	allocs, err := snap.AllocsByJob(ws, ns, id)
	if err != nil {
		return nil, err
	}
	evals, err := snap.EvalsByJob(ws, ns, id)
	if err != nil {
		return nil, err
	}
	return structs.SummarizeJob(job, allocs, evals), nil
}

// maxIndex is the highest index of tables.
func maxIndex(snap *state.StateSnapshot, tables ...string) (uint64, error) {
	var out uint64
	for _, t := range tables {
		i, err := snap.Index(t)
		if err != nil {
			return 0, err
		}
		out = max(out, i)
	}
	return out, nil
}

// Allocations lists a job's allocations. Without All, allocations of an
// earlier job of the same ID (purged and registered again) are left out.
func (j *JobEndpoint) Allocations(args *structs.JobSpecificRequest, reply *structs.AllocListResponse) (err error) {
	defer wire(&err)
	defer measureRPC("Job.Allocations", time.Now())
	if done, err := j.srv.forward("Job.Allocations", args, args, reply); done {
		return err
	}
	if args.JobID == "" {
		return structs.NewError(structs.CodeInvalid, "job allocations: missing job ID")
	}
	ns := args.RequestNamespace()
	return j.srv.blockingRPC(&args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, snap *state.StateSnapshot) (uint64, error) {
		allocs, err := snap.AllocsByJob(ws, ns, args.JobID)
		if err != nil {
			return 0, err
		}
		job, err := snap.JobByID(ws, ns, args.JobID)
		if err != nil {
			return 0, err
		}
		reply.Allocations = []*structs.AllocListStub{}
		for _, a := range allocs {
			if !args.All && job != nil && a.Job != nil && a.Job.CreateIndex != job.CreateIndex {
				continue
			}
			reply.Allocations = append(reply.Allocations, a.Stub())
		}
		return snap.Index(state.TableAllocs)
	})
}

// Evaluations lists a job's evaluations.
func (j *JobEndpoint) Evaluations(args *structs.JobSpecificRequest, reply *structs.EvalListResponse) (err error) {
	defer wire(&err)
	defer measureRPC("Job.Evaluations", time.Now())
	if done, err := j.srv.forward("Job.Evaluations", args, args, reply); done {
		return err
	}
	if args.JobID == "" {
		return structs.NewError(structs.CodeInvalid, "job evaluations: missing job ID")
	}
	ns := args.RequestNamespace()
	return j.srv.blockingRPC(&args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, snap *state.StateSnapshot) (uint64, error) {
		evals, err := snap.EvalsByJob(ws, ns, args.JobID)
		if err != nil {
			return 0, err
		}
		reply.Evaluations = make([]*structs.Evaluation, 0, len(evals))
		for _, e := range evals {
			reply.Evaluations = append(reply.Evaluations, e.Copy())
		}
		return snap.Index(state.TableEvals)
	})
}

// newJobEval makes a pending evaluation of job; nodeID is set for
// evaluations caused by a node change.
func newJobEval(job *structs.Job, nodeID, trigger string, now int64) *structs.Evaluation {
	return structs.NewJobEval(helper.UUID(), job, nodeID, trigger, now)
}

// JobPlanResponse is Job.Plan's reply, in the shape of Nomad's: what the
// scheduler would do with the job, per task group, and what it could not
// place. (Like the other job request types it belongs in structs/job.go;
// it sits here until that file takes it.)
type JobPlanResponse struct {
	// Annotations count, per task group, what the plan would do.
	Annotations *PlanAnnotations
	// FailedTGAllocs says, per task group, why placements would fail.
	FailedTGAllocs map[string]*structs.AllocMetric
	// JobModifyIndex is the registered job's, 0 for a new job: pass it to
	// a register that must not race another change.
	JobModifyIndex uint64
	// CreatedEvals are the evals the plan would create (a blocked eval
	// for placements that failed).
	CreatedEvals []*structs.Evaluation
	Warnings     string
	structs.WriteMeta
}

// PlanAnnotations hold the per-group counts of a plan.
type PlanAnnotations struct {
	DesiredTGUpdates map[string]*DesiredUpdates
}

// DesiredUpdates counts what a plan does to one task group's allocs.
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

// Plan is a dry run of Register: the job's scheduler runs against a
// snapshot of the current state in which the job is already registered,
// through a planner that records the plan instead of committing it.
// Nothing is written.
func (j *JobEndpoint) Plan(args *structs.JobRegisterRequest, reply *JobPlanResponse) (err error) {
	defer wire(&err)
	defer measureRPC("Job.Plan", time.Now())
	if done, err := j.srv.forward("Job.Plan", args, args, reply); done {
		return err
	}
	job, err := jobToRegister("job plan", args)
	if err != nil {
		return err
	}
	snap, err := j.srv.State().Snapshot()
	if err != nil {
		return err
	}
	existing, err := snap.JobByID(nil, job.Namespace, job.ID)
	if err != nil {
		return err
	}
	latest, err := snap.LatestIndex()
	if err != nil {
		return err
	}
	now := time.Now()
	proposed := proposedJob(existing, job, latest+1, now.UnixNano())

	eval := newJobEval(proposed, "", structs.EvalTriggerJobRegister, now.UnixNano())
	eval.JobModifyIndex = proposed.JobModifyIndex
	planner := &dryRunPlanner{}
	sched := scheduler.New(dryRunState{StateSnapshot: snap, job: proposed}, planner, scheduler.Options{
		Logger: j.srv.logger.Named("plan"),
	})
	if err := sched.Process(j.srv.ctx, eval); err != nil {
		return fmt.Errorf("planning job %q: %w", job.ID, err)
	}
	if planner.eval != nil && planner.eval.Status == structs.EvalStatusFailed && planner.plan == nil {
		return structs.NewError(structs.CodeInvalid, "planning job %q: %s", job.ID, planner.eval.StatusDescription)
	}
	reply.Annotations, err = planAnnotations(snap, proposed, planner.plan)
	if err != nil {
		return err
	}
	if planner.eval != nil && len(planner.eval.FailedTGAllocs) > 0 {
		reply.FailedTGAllocs = planner.eval.FailedTGAllocs
	}
	reply.CreatedEvals = planner.created
	if existing != nil {
		reply.JobModifyIndex = existing.JobModifyIndex
	}
	reply.Warnings = j.registerWarnings(proposed)
	reply.Index = latest
	return nil
}

// proposedJob is job as the store would hold it once registered at index:
// an unchanged spec keeps the registered version, so the plan shows no
// updates for it.
func proposedJob(existing, job *structs.Job, index uint64, now int64) *structs.Job {
	p := job.Copy()
	p.SubmitTime = now
	p.ModifyIndex = index
	if existing == nil {
		p.CreateIndex, p.JobModifyIndex, p.Version = index, index, 0
		p.Status = structs.JobStatusPending
		return p
	}
	p.CreateIndex, p.Status = existing.CreateIndex, existing.Status
	if sameJobSpec(existing, p) {
		p.Version, p.JobModifyIndex, p.ModifyIndex = existing.Version, existing.JobModifyIndex, existing.ModifyIndex
	} else {
		p.Version, p.JobModifyIndex = existing.Version+1, index
	}
	return p
}

// sameJobSpec reports whether a and b differ only in what the servers
// own: status, version, submit time and indexes.
func sameJobSpec(a, b *structs.Job) bool {
	strip := func(j *structs.Job) structs.Job {
		c := *j
		c.Status, c.Version, c.SubmitTime = "", 0, 0
		c.CreateIndex, c.ModifyIndex, c.JobModifyIndex = 0, 0, 0
		return c
	}
	return reflect.DeepEqual(strip(a), strip(b))
}

// dryRunState is a snapshot in which the planned job is registered.
type dryRunState struct {
	*state.StateSnapshot
	job *structs.Job
}

func (p dryRunState) JobByID(ws memdb.WatchSet, ns, id string) (*structs.Job, error) {
	if ns == p.job.Namespace && id == p.job.ID {
		return p.job, nil
	}
	return p.StateSnapshot.JobByID(ws, ns, id)
}

// dryRunPlanner records what a scheduler would write and writes nothing:
// every plan "commits" in full.
type dryRunPlanner struct {
	plan    *structs.Plan
	eval    *structs.Evaluation
	created []*structs.Evaluation
}

func (p *dryRunPlanner) SubmitPlan(_ context.Context, plan *structs.Plan) (*structs.PlanResult, scheduler.State, error) {
	p.plan = plan
	return &structs.PlanResult{NodeUpdate: plan.NodeUpdate, NodeAllocation: plan.NodeAllocation, CSIClaims: plan.CSIClaims}, nil, nil
}

func (p *dryRunPlanner) UpdateEval(_ context.Context, eval *structs.Evaluation) error {
	p.eval = eval
	return nil
}

func (p *dryRunPlanner) CreateEval(_ context.Context, eval *structs.Evaluation) error {
	p.created = append(p.created, eval)
	return nil
}

// planAnnotations counts what plan does to each of job's groups:
//
//	new alloc replacing one the plan stops ──► migrate (its node drains) or destructive update
//	new alloc otherwise                     ──► place
//	existing alloc in the plan              ──► in-place update
//	stop not replaced                       ──► stop
//	live alloc the plan leaves alone        ──► ignore
func planAnnotations(snap *state.StateSnapshot, job *structs.Job, plan *structs.Plan) (*PlanAnnotations, error) {
	out := &PlanAnnotations{DesiredTGUpdates: map[string]*DesiredUpdates{}}
	group := func(name string) *DesiredUpdates {
		if out.DesiredTGUpdates[name] == nil {
			out.DesiredTGUpdates[name] = &DesiredUpdates{}
		}
		return out.DesiredTGUpdates[name]
	}
	for _, tg := range job.TaskGroups {
		group(tg.Name)
	}
	if plan == nil {
		plan = &structs.Plan{}
	}
	touched := map[string]bool{}
	stopped := map[string]*structs.Allocation{}
	for _, updates := range plan.NodeUpdate {
		for _, u := range updates {
			a, err := snap.AllocByID(nil, u.AllocID)
			if err != nil {
				return nil, err
			}
			touched[u.AllocID] = true
			if a != nil {
				stopped[a.ID] = a
				group(a.TaskGroup).Stop++
			}
		}
	}
	for _, allocs := range plan.NodeAllocation {
		for _, a := range allocs {
			touched[a.ID] = true
			existing, err := snap.AllocByID(nil, a.ID)
			if err != nil {
				return nil, err
			}
			g := group(a.TaskGroup)
			prev := stopped[a.PreviousAllocation]
			switch {
			case existing != nil:
				g.InPlaceUpdate++
			case prev != nil:
				group(prev.TaskGroup).Stop--
				node, err := snap.NodeByID(nil, prev.NodeID)
				if err != nil {
					return nil, err
				}
				if node != nil && node.DrainStrategy != nil {
					g.Migrate++
				} else {
					g.DestructiveUpdate++
				}
			default:
				g.Place++
			}
		}
	}
	allocs, err := snap.AllocsByJob(nil, job.Namespace, job.ID)
	if err != nil {
		return nil, err
	}
	for _, a := range allocs {
		if !touched[a.ID] && !a.TerminalStatus() {
			group(a.TaskGroup).Ignore++
		}
	}
	return out, nil
}
