package nomad_test

import (
	"errors"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil"
	"github.com/berth-io/berth/testutil/cluster"
)

func testJob(id string) *structs.Job {
	return &structs.Job{
		ID: id, Name: id, Type: structs.JobTypeService, Priority: 50, Datacenters: []string{"dc1"},
		TaskGroups: []*structs.TaskGroup{{
			Name: "web", Count: 1,
			Tasks: []*structs.Task{{Name: "web", Driver: "raw_exec", Config: map[string]any{"command": "/bin/sleep"}}},
		}},
	}
}

func registerJob(t *testing.T, s *cluster.Server, job *structs.Job) *structs.JobRegisterResponse {
	t.Helper()
	var reply structs.JobRegisterResponse
	must.NoError(t, s.RPC("Job.Register", &structs.JobRegisterRequest{Job: job}, &reply))
	return &reply
}

func getJob(t *testing.T, s *cluster.Server, ns, id string) *structs.Job {
	t.Helper()
	req := &structs.JobSpecificRequest{JobID: id}
	req.Namespace = ns
	var reply structs.SingleJobResponse
	must.NoError(t, s.RPC("Job.GetJob", req, &reply))
	return reply.Job
}

func TestJob_RegisterWritesJobAndEvalTogether(t *testing.T) {
	s := cluster.NewServer(t, nil)
	before := time.Now().UnixNano()
	job := testJob("web")
	reply := registerJob(t, s, job)
	must.NotEq(t, "", reply.EvalID)
	must.Positive(t, reply.Index)
	must.Eq(t, reply.Index, reply.EvalCreateIndex)
	must.Eq(t, reply.Index, reply.JobModifyIndex)
	must.Eq(t, "", job.Namespace) // the caller's job is untouched

	got := getJob(t, s, "", "web")
	must.NotNil(t, got)
	must.Eq(t, structs.DefaultNamespace, got.Namespace)
	must.GreaterEq(t, before, got.SubmitTime)
	must.Eq(t, structs.JobStatusPending, got.Status)

	var one structs.SingleEvalResponse
	must.NoError(t, s.RPC("Eval.GetEval", &structs.EvalSpecificRequest{EvalID: reply.EvalID}, &one))
	e := one.Eval
	must.NotNil(t, e)
	must.Eq(t, structs.EvalTriggerJobRegister, e.TriggeredBy)
	// Created pending; the leader's scheduler may have finished it since.
	must.SliceContains(t, []string{structs.EvalStatusPending, structs.EvalStatusComplete}, e.Status)
	must.Eq(t, "web", e.JobID)
	must.Eq(t, structs.JobTypeService, e.Type)
	must.Eq(t, 50, e.Priority)
	must.Eq(t, got.ModifyIndex, e.CreateIndex, must.Sprint("job and eval are one raft entry"))
	must.Positive(t, e.CreateTime)

	// Registering the same spec again makes a new eval but keeps the
	// job's version.
	again := registerJob(t, s, testJob("web"))
	must.NotEq(t, reply.EvalID, again.EvalID)
	must.Eq(t, reply.JobModifyIndex, again.JobModifyIndex)
}

func TestJob_RegisterValidates(t *testing.T) {
	s := cluster.NewServer(t, nil)
	cases := []struct {
		name string
		job  *structs.Job
		want []string
	}{
		{"missing job", nil, []string{"missing job"}},
		{"every problem at once", &structs.Job{ID: "x", Name: "x", Type: "cron", Priority: 500}, []string{
			`job "x" is invalid`, `invalid job type "cron"`, "priority 500 is out of range", "missing datacenters", "missing task groups",
		}},
		{"volume problems", func() *structs.Job {
			j := testJob("vol")
			j.TaskGroups[0].Volumes = map[string]*structs.VolumeRequest{"data": {Type: "csi", Source: "data", AccessMode: "bogus"}}
			j.TaskGroups[0].Tasks[0].VolumeMounts = []*structs.VolumeMount{{Volume: "nope"}}
			return j
		}(), []string{`access_mode "bogus" is not valid`, `names volume "nope"`, "missing destination"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := s.RPC("Job.Register", &structs.JobRegisterRequest{Job: tc.job}, &structs.JobRegisterResponse{})
			must.True(t, errors.Is(err, structs.ErrInvalid), must.Sprintf("got %v", err))
			for _, w := range tc.want {
				must.StrContains(t, err.Error(), w)
			}
		})
	}
}

func TestJob_RegisterWarnsAboutMissingVolumes(t *testing.T) {
	s := cluster.NewServer(t, nil)
	registerPluginNode(t, s, 1, "hostpath")
	registerVolumes(t, s, "", testVolume("present", "hostpath"))
	job := testJob("db")
	job.TaskGroups[0].Volumes = map[string]*structs.VolumeRequest{
		"a": {Type: "csi", Source: "present", AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem},
		"b": {Type: "csi", Source: "missing", AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem},
	}
	reply := registerJob(t, s, job)
	must.StrContains(t, reply.Warnings, `CSI volume "missing" is not registered`)
	must.StrNotContains(t, reply.Warnings, `"present"`)
}

func TestJob_Deregister(t *testing.T) {
	s := cluster.NewServer(t, nil)
	registerJob(t, s, testJob("stopme"))
	registerJob(t, s, testJob("purgeme"))

	var reply structs.JobDeregisterResponse
	must.NoError(t, s.RPC("Job.Deregister", &structs.JobDeregisterRequest{JobID: "stopme"}, &reply))
	must.NotEq(t, "", reply.EvalID)
	stopped := getJob(t, s, "", "stopme")
	must.True(t, stopped.Stop)

	var eval structs.SingleEvalResponse
	must.NoError(t, s.RPC("Eval.GetEval", &structs.EvalSpecificRequest{EvalID: reply.EvalID}, &eval))
	must.Eq(t, structs.EvalTriggerJobDeregister, eval.Eval.TriggeredBy)
	must.Eq(t, "stopme", eval.Eval.JobID)

	must.NoError(t, s.RPC("Job.Deregister", &structs.JobDeregisterRequest{JobID: "purgeme", Purge: true}, &reply))
	must.Nil(t, getJob(t, s, "", "purgeme"))

	err := s.RPC("Job.Deregister", &structs.JobDeregisterRequest{JobID: "nope"}, &reply)
	must.True(t, errors.Is(err, structs.ErrNotFound), must.Sprintf("got %v", err))
	must.StrContains(t, err.Error(), `job "nope" not found`)
	err = s.RPC("Job.Deregister", &structs.JobDeregisterRequest{}, &reply)
	must.True(t, errors.Is(err, structs.ErrInvalid))
}

func TestJob_GetByPrefixAndList(t *testing.T) {
	s := cluster.NewServer(t, nil)
	for _, id := range []string{"api", "api-gw", "batch", "cache", "db"} {
		registerJob(t, s, testJob(id))
	}
	prod := testJob("api")
	prod.Namespace = "prod"
	registerJob(t, s, prod)

	must.Eq(t, "api", getJob(t, s, "", "api").ID)
	must.Nil(t, getJob(t, s, "", "ba"), must.Sprint("reads are exact: a prefix names nothing"))
	must.Eq(t, "prod", getJob(t, s, "prod", "api").Namespace)
	must.Nil(t, getJob(t, s, "", "zzz"))
	err := s.RPC("Job.GetJob", &structs.JobSpecificRequest{JobID: "api", QueryOptions: structs.QueryOptions{Namespace: "*"}}, &structs.SingleJobResponse{})
	must.True(t, errors.Is(err, structs.ErrInvalid))
	must.StrContains(t, err.Error(), `job ID "api" exists in 2 namespaces`)

	list := func(q structs.QueryOptions) ([]string, string) {
		var reply structs.JobListResponse
		must.NoError(t, s.RPC("Job.List", &structs.GenericRequest{QueryOptions: q}, &reply))
		ids := []string{}
		for _, j := range reply.Jobs {
			ids = append(ids, j.Namespace+"/"+j.ID)
		}
		return ids, reply.NextToken
	}
	ids, _ := list(structs.QueryOptions{})
	must.Eq(t, []string{"default/api", "default/api-gw", "default/batch", "default/cache", "default/db"}, ids)
	ids, _ = list(structs.QueryOptions{Namespace: "*", Prefix: "api"})
	must.Eq(t, []string{"default/api", "default/api-gw", "prod/api"}, ids)
	ids, next := list(structs.QueryOptions{PerPage: 3, Filter: `ID != "api-gw"`})
	must.Eq(t, []string{"default/api", "default/batch", "default/cache"}, ids)
	must.Eq(t, "default.db", next)
	ids, next = list(structs.QueryOptions{PerPage: 3, NextToken: next})
	must.Eq(t, []string{"default/db"}, ids)
	must.Eq(t, "", next)
}

func TestJob_AllocationsAndEvaluations(t *testing.T) {
	s := cluster.NewServer(t, nil)
	node := registerPluginNode(t, s, 1, "hostpath")
	registerVolumes(t, s, "", testVolume("v", "hostpath"))
	first := registerJob(t, s, testJob("web"))
	stored := getJob(t, s, "", "web")
	placeClaimingAlloc(t, s, stored, "alloc-1", node.ID, "v", structs.CSIClaimReserved)

	var allocs structs.AllocListResponse
	must.NoError(t, s.RPC("Job.Allocations", &structs.JobSpecificRequest{JobID: "web"}, &allocs))
	must.SliceLen(t, 1, allocs.Allocations)
	must.Eq(t, "alloc-1", allocs.Allocations[0].ID)
	must.Eq(t, node.ID, allocs.Allocations[0].NodeID)

	// Purged and registered again: the old job's allocs show only with All.
	var purge structs.JobDeregisterResponse
	must.NoError(t, s.RPC("Job.Deregister", &structs.JobDeregisterRequest{JobID: "web", Purge: true}, &purge))
	again := registerJob(t, s, testJob("web"))
	must.NoError(t, s.RPC("Job.Allocations", &structs.JobSpecificRequest{JobID: "web"}, &allocs))
	must.SliceEmpty(t, allocs.Allocations)
	must.NoError(t, s.RPC("Job.Allocations", &structs.JobSpecificRequest{JobID: "web", All: true}, &allocs))
	must.SliceLen(t, 1, allocs.Allocations)

	// The evals of register, purge and register again; the scheduler may
	// have added blocked evals of its own.
	var evals structs.EvalListResponse
	must.NoError(t, s.RPC("Job.Evaluations", &structs.JobSpecificRequest{JobID: "web"}, &evals))
	var ids []string
	for _, e := range evals.Evaluations {
		must.Eq(t, "web", e.JobID)
		ids = append(ids, e.ID)
	}
	must.SliceContainsSubset(t, ids, []string{first.EvalID, purge.EvalID, again.EvalID})

	must.NoError(t, s.RPC("Job.Allocations", &structs.JobSpecificRequest{JobID: "none"}, &allocs))
	must.SliceEmpty(t, allocs.Allocations)
}

func TestJob_GetBlocksUntilTheJobChanges(t *testing.T) {
	s := cluster.NewServer(t, nil)
	first := registerJob(t, s, testJob("web"))
	done := make(chan *structs.SingleJobResponse, 1)
	go func() {
		req := &structs.JobSpecificRequest{JobID: "web"}
		req.MinQueryIndex, req.MaxQueryTime = first.Index, 20*time.Second
		var reply structs.SingleJobResponse
		if err := s.RPC("Job.GetJob", req, &reply); err != nil {
			t.Error(err)
		}
		done <- &reply
	}()
	// A write to another job does not wake it: the index of one job is its
	// own ModifyIndex.
	registerJob(t, s, testJob("other"))
	select {
	case r := <-done:
		t.Fatalf("returned after a write to another job, at index %d", r.Index)
	default:
	}
	j := testJob("web")
	j.Meta = map[string]string{"v": "2"}
	second := registerJob(t, s, j)
	select {
	case r := <-done:
		must.Eq(t, second.Index, r.Index)
		must.Eq(t, "2", r.Job.Meta["v"])
	case <-time.After(15 * time.Second):
		t.Fatal("blocking get did not return after the job changed")
	}
}

func TestJob_Plan(t *testing.T) {
	s := cluster.NewServer(t, nil)
	node := testNode(1)
	node.Status = structs.NodeStatusReady
	node.Drivers = map[string]*structs.DriverInfo{"raw_exec": {Detected: true, Healthy: true}}
	node.NodeResources = &structs.NodeResources{CPU: 4000, MemoryMB: 8192}
	must.NoError(t, s.RPC("Node.Register", &structs.NodeRegisterRequest{Node: node}, &structs.NodeUpdateResponse{}))

	plan := func(job *structs.Job) *nomad.JobPlanResponse {
		t.Helper()
		var reply nomad.JobPlanResponse
		must.NoError(t, s.RPC("Job.Plan", &structs.JobRegisterRequest{Job: job}, &reply))
		return &reply
	}
	withCount := func(n int, change func(j *structs.Job)) *structs.Job {
		j := testJob("web")
		j.TaskGroups[0].Count = n
		if change != nil {
			change(j)
		}
		return j
	}

	before, err := s.State().LatestIndex()
	must.NoError(t, err)
	p := plan(withCount(2, nil))
	must.Eq(t, &nomad.DesiredUpdates{Place: 2}, p.Annotations.DesiredTGUpdates["web"])
	must.MapEmpty(t, p.FailedTGAllocs)
	must.SliceEmpty(t, p.CreatedEvals)
	must.Eq(t, uint64(0), p.JobModifyIndex)
	// A dry run writes nothing.
	must.Nil(t, getJob(t, s, "", "web"))
	after, err := s.State().LatestIndex()
	must.NoError(t, err)
	must.Eq(t, before, after)

	p = plan(withCount(1, func(j *structs.Job) {
		j.Constraints = []*structs.Constraint{{LTarget: "${attr.kernel.name}", Operand: "=", RTarget: "plan9"}}
	}))
	must.Eq(t, uint64(0), p.Annotations.DesiredTGUpdates["web"].Place)
	must.MapContainsKey(t, p.FailedTGAllocs, "web")
	must.SliceLen(t, 1, p.CreatedEvals)
	must.Eq(t, structs.EvalStatusBlocked, p.CreatedEvals[0].Status)

	// Registered for real, the leader's scheduler places it; plans are
	// then relative to what runs.
	reg := registerJob(t, s, withCount(2, nil))
	testutil.WaitForResult(t, func() (bool, error) {
		var allocs structs.AllocListResponse
		err := s.RPC("Job.Allocations", &structs.JobSpecificRequest{JobID: "web"}, &allocs)
		return len(allocs.Allocations) == 2, err
	})
	cases := []struct {
		name string
		job  *structs.Job
		want nomad.DesiredUpdates
	}{
		{"unchanged", withCount(2, nil), nomad.DesiredUpdates{Ignore: 2}},
		{"task changed", withCount(2, func(j *structs.Job) { j.TaskGroups[0].Tasks[0].Env = map[string]string{"A": "b"} }),
			nomad.DesiredUpdates{DestructiveUpdate: 2}},
		{"scaled up", withCount(3, nil), nomad.DesiredUpdates{InPlaceUpdate: 2, Place: 1}},
		{"scaled down", withCount(1, nil), nomad.DesiredUpdates{InPlaceUpdate: 1, Stop: 1}},
		{"stopped", withCount(2, func(j *structs.Job) { j.Stop = true }), nomad.DesiredUpdates{Stop: 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := plan(tc.job)
			must.Eq(t, &tc.want, p.Annotations.DesiredTGUpdates["web"])
			must.Eq(t, reg.JobModifyIndex, p.JobModifyIndex)
		})
	}

	err = s.RPC("Job.Plan", &structs.JobRegisterRequest{Job: &structs.Job{ID: "x"}}, &nomad.JobPlanResponse{})
	must.True(t, errors.Is(err, structs.ErrInvalid), must.Sprintf("got %v", err))
}
