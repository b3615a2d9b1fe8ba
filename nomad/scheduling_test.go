package nomad_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil"
	"github.com/berth-io/berth/testutil/cluster"
)

// In-process scheduling tests: real servers, no client. The tests play
// the clients: they register nodes, heartbeat them, and report alloc
// status through the client RPCs.

func schedConfig(ttl time.Duration) func(c *nomad.Config) {
	return func(c *nomad.Config) {
		c.HeartbeatTTL = ttl
		c.HeartbeatGrace = ttl
		c.EvalNackDelay = 10 * time.Millisecond
	}
}

func schedServer(t *testing.T, ttl time.Duration) *cluster.Server {
	return cluster.NewServer(t, schedConfig(ttl))
}

const hostpath = "hostpath"

func schedNode(i int) *structs.Node {
	return &structs.Node{
		ID:         fmt.Sprintf("5c4ed000-0000-4000-8000-%012d", i),
		SecretID:   fmt.Sprintf("node-secret-%d", i),
		Name:       fmt.Sprintf("node-%d", i),
		Datacenter: "dc1",
		Attributes: map[string]string{"kernel.name": "linux"},
		NodeResources: &structs.NodeResources{
			CPU: 4000, MemoryMB: 4096,
		},
		Drivers: map[string]*structs.DriverInfo{
			"exec": {Detected: true, Healthy: true, MountConfig: structs.MountConfigSupportAll},
		},
		CSINodePlugins: map[string]*structs.CSIInfo{hostpath: {
			PluginID: hostpath, Healthy: true, HealthDescription: "healthy", Provider: "berth.hostpath",
			NodeInfo: &structs.CSINodeInfo{ID: fmt.Sprintf("ext-%d", i)},
		}},
	}
}

// joinNode registers a node and sends its first heartbeat.
func joinNode(t *testing.T, s *cluster.Server, n *structs.Node) *structs.NodeUpdateResponse {
	t.Helper()
	var reply structs.NodeUpdateResponse
	rpcWhileNoLeader(t, s, "Node.Register", &structs.NodeRegisterRequest{Node: n}, &reply)
	// Signed with n's own secret, not one read from s: if leadership moved,
	// the register was forwarded and s may not have applied it yet.
	return heartbeatAs(t, s, n.ID, n.SecretID)
}

// rpcWhileNoLeader calls method on s, and again while the answer is
// CodeNoLeader, as a client does: on a loaded machine the tests' short
// Raft timings can move leadership right after an election, and a write
// caught in the move fails with that code. Any other error fails the test.
func rpcWhileNoLeader(t *testing.T, s *cluster.Server, method string, args, reply any) {
	t.Helper()
	var err error
	testutil.WaitForResult(t, func() (bool, error) {
		err = s.RPC(method, args, reply)
		return structs.CodeOf(err) != structs.CodeNoLeader, err
	})
	must.NoError(t, err)
}

func heartbeat(t *testing.T, s *cluster.Server, nodeID string) *structs.NodeUpdateResponse {
	t.Helper()
	return heartbeatAs(t, s, nodeID, nodeSecret(s, nodeID))
}

func heartbeatAs(t *testing.T, s *cluster.Server, nodeID, secret string) *structs.NodeUpdateResponse {
	t.Helper()
	var reply structs.NodeUpdateResponse
	req := &structs.NodeUpdateStatusRequest{NodeID: nodeID, Status: structs.NodeStatusReady}
	req.AuthToken = secret
	rpcWhileNoLeader(t, s, "Node.UpdateStatus", req, &reply)
	return &reply
}

// pump heartbeats nodes every interval, like their clients would, until
// stopped (per node) or the test ends.
type pump struct {
	// mu guards nodes.
	mu     sync.Mutex
	nodes  map[string]bool
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startPump(t *testing.T, s *cluster.Server, interval time.Duration, nodeIDs ...string) *pump {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pump{nodes: map[string]bool{}, cancel: cancel}
	for _, id := range nodeIDs {
		p.nodes[id] = true
	}
	p.wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			p.mu.Lock()
			var ids []string
			for id := range p.nodes {
				ids = append(ids, id)
			}
			p.mu.Unlock()
			for _, id := range ids {
				var reply structs.NodeUpdateResponse
				// Errors (a shutting-down server) are the test's business
				// only through the state it checks.
				req := &structs.NodeUpdateStatusRequest{NodeID: id, Status: structs.NodeStatusReady}
				req.AuthToken = nodeSecret(s, id)
				_ = s.RPC("Node.UpdateStatus", req, &reply)
			}
		}
	})
	t.Cleanup(func() {
		cancel()
		p.wg.Wait()
	})
	return p
}

func (p *pump) stop(nodeID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.nodes, nodeID)
}

func schedJob(id string, count int) *structs.Job {
	return &structs.Job{
		ID: id, Name: id, Type: structs.JobTypeService, Priority: 50, Datacenters: []string{"dc1"},
		TaskGroups: []*structs.TaskGroup{{
			Name: "web", Count: count,
			Tasks: []*structs.Task{{
				Name: "web", Driver: "exec", Config: map[string]any{"command": "/bin/sleep"},
				Resources: &structs.Resources{CPU: 500, MemoryMB: 256},
			}},
		}},
	}
}

func withCSIVolume(job *structs.Job, source string) *structs.Job {
	job.TaskGroups[0].Volumes = map[string]*structs.VolumeRequest{"data": {
		Name: "data", Type: structs.VolumeTypeCSI, Source: source,
		AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
	}}
	job.TaskGroups[0].Tasks[0].VolumeMounts = []*structs.VolumeMount{{Volume: "data", Destination: "/data"}}
	return job
}

func submitJob(t *testing.T, s *cluster.Server, job *structs.Job) string {
	t.Helper()
	var reply structs.JobRegisterResponse
	rpcWhileNoLeader(t, s, "Job.Register", &structs.JobRegisterRequest{Job: job}, &reply)
	return reply.EvalID
}

// live returns the allocs of a job the servers have not stopped.
func live(t *testing.T, s *cluster.Server, jobID string) []*structs.Allocation {
	t.Helper()
	allocs, err := s.State().AllocsByJob(nil, structs.DefaultNamespace, jobID)
	must.NoError(t, err)
	var out []*structs.Allocation
	for _, a := range allocs {
		if !a.TerminalStatus() {
			out = append(out, a)
		}
	}
	return out
}

// waitLive waits until a job has n live allocs and returns them.
func waitLive(t *testing.T, s *cluster.Server, jobID string, n int) []*structs.Allocation {
	t.Helper()
	var out []*structs.Allocation
	testutil.WaitForResult(t, func() (bool, error) {
		out = live(t, s, jobID)
		if len(out) != n {
			return false, fmt.Errorf("job %s has %d live allocs, want %d", jobID, len(out), n)
		}
		return true, nil
	})
	return out
}

// waitEval waits until eval id is terminal and returns it.
func waitEval(t *testing.T, s *cluster.Server, id string) *structs.Evaluation {
	t.Helper()
	var e *structs.Evaluation
	testutil.WaitForResult(t, func() (bool, error) {
		var err error
		e, err = s.State().EvalByID(nil, id)
		if err != nil || e == nil {
			return false, fmt.Errorf("eval %s: %v", id, err)
		}
		if !e.TerminalStatus() {
			return false, fmt.Errorf("eval %s is %s", id, e.Status)
		}
		return true, nil
	})
	return e
}

// blockedEvalOf returns the job's blocked eval, or nil.
func blockedEvalOf(t *testing.T, s *cluster.Server, jobID string) *structs.Evaluation {
	t.Helper()
	evals, err := s.State().EvalsByJob(nil, structs.DefaultNamespace, jobID)
	must.NoError(t, err)
	var out *structs.Evaluation
	for _, e := range evals {
		if e.Status == structs.EvalStatusBlocked {
			must.Nil(t, out, must.Sprintf("job %s has two blocked evals", jobID))
			out = e
		}
	}
	return out
}

func TestScheduling_SpreadsCountOverNodes(t *testing.T) {
	s := schedServer(t, time.Minute)
	for i := range 3 {
		joinNode(t, s, schedNode(i))
	}
	evalID := submitJob(t, s, schedJob("web", 3))
	eval := waitEval(t, s, evalID)
	must.Eq(t, structs.EvalStatusComplete, eval.Status)
	must.Nil(t, eval.FailedTGAllocs)

	allocs := waitLive(t, s, "web", 3)
	nodes := map[string]bool{}
	names := map[string]bool{}
	for _, a := range allocs {
		nodes[a.NodeID] = true
		names[a.Name] = true
		must.Eq(t, eval.ID, a.EvalID)
		must.NotNil(t, a.Job)
	}
	must.MapLen(t, 3, nodes)
	must.Eq(t, map[string]bool{"web.web[0]": true, "web.web[1]": true, "web.web[2]": true}, names)
	job, err := s.State().JobByID(nil, structs.DefaultNamespace, "web")
	must.NoError(t, err)
	must.Eq(t, structs.JobStatusRunning, job.Status)
}

func TestScheduling_BlockedUntilANodeJoins(t *testing.T) {
	s := schedServer(t, time.Minute)
	small := schedNode(0)
	small.NodeResources.MemoryMB = 1024
	joinNode(t, s, small)
	job := schedJob("big", 2)
	job.TaskGroups[0].Tasks[0].Resources.MemoryMB = 768
	eval := waitEval(t, s, submitJob(t, s, job))

	must.Eq(t, structs.EvalStatusComplete, eval.Status)
	must.NotEq(t, "", eval.BlockedEval)
	must.Eq(t, map[string]int{"memory": 1}, eval.FailedTGAllocs["web"].DimensionExhausted)
	must.Eq(t, map[string]int{"web": 1}, eval.QueuedAllocations)
	waitLive(t, s, "big", 1)
	blocked := blockedEvalOf(t, s, "big")
	must.NotNil(t, blocked)
	must.Eq(t, eval.BlockedEval, blocked.ID)

	// A placement is not capacity: the job stays blocked on the same eval.
	tiny := schedJob("tiny", 1)
	tiny.TaskGroups[0].Tasks[0].Resources.MemoryMB = 128
	waitEval(t, s, submitJob(t, s, tiny))
	waitLive(t, s, "tiny", 1)
	must.Eq(t, blocked.ID, blockedEvalOf(t, s, "big").ID)

	joinNode(t, s, schedNode(1))
	allocs := waitLive(t, s, "big", 2)
	must.NotEq(t, allocs[0].NodeID, allocs[1].NodeID)
	testutil.WaitForResult(t, func() (bool, error) {
		old, err := s.State().EvalByID(nil, blocked.ID)
		if err != nil || old.Status != structs.EvalStatusCancelled {
			return false, fmt.Errorf("blocked eval is %s (%v)", old.Status, err)
		}
		if old.NextEval == "" {
			return false, errors.New("canceled blocked eval names no successor")
		}
		next, err := s.State().EvalByID(nil, old.NextEval)
		if err != nil || next == nil || next.Status != structs.EvalStatusComplete {
			return false, fmt.Errorf("successor not complete yet: %v %v", next, err)
		}
		must.Eq(t, structs.EvalTriggerQueuedAllocs, next.TriggeredBy)
		return true, nil
	})
	must.Nil(t, blockedEvalOf(t, s, "big"))
}

func TestScheduling_MissedHeartbeatsReplaceAllocs(t *testing.T) {
	ttl := 100 * time.Millisecond
	s := schedServer(t, ttl)
	var ids []string
	for i := range 3 {
		reply := joinNode(t, s, schedNode(i))
		must.Eq(t, ttl, reply.HeartbeatTTL)
		must.SliceContains(t, reply.Servers, s.Addr)
		ids = append(ids, schedNode(i).ID)
	}
	p := startPump(t, s, ttl/4, ids...)
	job := schedJob("web", 2)
	job.Constraints = []*structs.Constraint{{Operand: "distinct_hosts"}}
	submitJob(t, s, job)
	before := waitLive(t, s, "web", 2)
	victim := before[0]

	p.stop(victim.NodeID)
	testutil.WaitForResult(t, func() (bool, error) {
		n, err := s.State().NodeByID(nil, victim.NodeID)
		if err != nil || n.Status != structs.NodeStatusDown {
			return false, fmt.Errorf("node is %s (%v)", n.Status, err)
		}
		return true, nil
	})
	must.False(t, s.HeartbeatDeadlineForTest(victim.NodeID))

	var replacement *structs.Allocation
	testutil.WaitForResult(t, func() (bool, error) {
		for _, a := range live(t, s, "web") {
			if a.Name == victim.Name && a.ID != victim.ID {
				replacement = a
			}
		}
		if replacement == nil {
			return false, errors.New("no replacement yet")
		}
		return true, nil
	})
	lost, err := s.State().AllocByID(nil, victim.ID)
	must.NoError(t, err)
	must.Eq(t, structs.AllocClientStatusLost, lost.ClientStatus)
	must.Eq(t, structs.AllocDesiredStatusStop, lost.DesiredStatus)
	must.Eq(t, victim.ID, replacement.PreviousAllocation)
	must.NotEq(t, victim.NodeID, replacement.NodeID)
	must.SliceLen(t, 2, live(t, s, "web"))

	// The node comes back with its next heartbeat.
	heartbeat(t, s, victim.NodeID)
	n, err := s.State().NodeByID(nil, victim.NodeID)
	must.NoError(t, err)
	must.Eq(t, structs.NodeStatusReady, n.Status)
	must.True(t, s.HeartbeatDeadlineForTest(victim.NodeID))
}

func TestScheduling_SingleWriterVolumeRace(t *testing.T) {
	s := schedServer(t, time.Minute)
	for i := range 2 {
		joinNode(t, s, schedNode(i))
	}
	vol := &structs.CSIVolume{
		ID: "db", Name: "db", Namespace: structs.DefaultNamespace, PluginID: hostpath, State: structs.CSIVolumeStateReady,
		RequestedCapabilities: []*structs.CSIVolumeCapability{{
			AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
		}},
	}
	_, err := s.RaftApplyForTest(structs.CSIVolumeRegisterRequestType, &structs.CSIVolumeRegisterRequest{Volumes: []*structs.CSIVolume{vol}})
	must.NoError(t, err)

	// Two jobs race for the volume; two workers plan them concurrently.
	submitJob(t, s, withCSIVolume(schedJob("a", 1), "db"))
	submitJob(t, s, withCSIVolume(schedJob("b", 1), "db"))

	var winner *structs.Allocation
	var loser string
	testutil.WaitForResult(t, func() (bool, error) {
		a, b := live(t, s, "a"), live(t, s, "b")
		switch {
		case len(a)+len(b) > 1:
			t.Fatalf("both jobs placed: %d + %d allocs", len(a), len(b))
		case len(a) == 1 && blockedEvalOf(t, s, "b") != nil:
			winner, loser = a[0], "b"
		case len(b) == 1 && blockedEvalOf(t, s, "a") != nil:
			winner, loser = b[0], "a"
		default:
			return false, fmt.Errorf("waiting: a=%d b=%d allocs", len(a), len(b))
		}
		return true, nil
	})
	stored, err := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "db")
	must.NoError(t, err)
	must.MapLen(t, 1, stored.Claims)
	claim := stored.Claims[winner.ID]
	must.NotNil(t, claim)
	must.Eq(t, structs.CSIClaimReserved, claim.Step)
	must.Eq(t, winner.NodeID, claim.NodeID)
	must.Eq(t, structs.CSIVolumeClaimWrite, claim.Mode)

	blocked := blockedEvalOf(t, s, loser)
	want := fmt.Sprintf(`volume "db": single-node-writer already claimed by alloc %s on node %s (reserved, waiting for the alloc to start)`,
		winner.ID[:8], winner.NodeID[:8])
	must.MapContainsKey(t, blocked.FailedTGAllocs["web"].ConstraintFiltered, want)

	// Nothing changes until the claim is freed.
	must.SliceEmpty(t, live(t, s, loser))
	freed := claim.Copy()
	freed.Step = structs.CSIClaimFreed
	_, err = s.RaftApplyForTest(structs.CSIVolumeClaimRequestType, &structs.CSIVolumeClaimBatchRequest{
		Claims: []*structs.CSIVolumeClaimUpdate{{Namespace: structs.DefaultNamespace, VolumeID: "db", Claim: freed}},
	})
	must.NoError(t, err)

	next := waitLive(t, s, loser, 1)[0]
	stored, err = s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "db")
	must.NoError(t, err)
	must.MapLen(t, 1, stored.Claims)
	must.Eq(t, structs.CSIClaimReserved, stored.Claims[next.ID].Step)
}

func TestNode_GetClientAllocs(t *testing.T) {
	s := schedServer(t, time.Minute)
	node := schedNode(0)
	joinNode(t, s, node)
	submitJob(t, s, schedJob("web", 1))
	waitLive(t, s, "web", 1)

	var reply structs.NodeAllocsResponse
	err := s.RPC("Node.GetClientAllocs", &structs.NodeSpecificRequest{NodeID: node.ID, SecretID: "wrong"}, &reply)
	must.True(t, errors.Is(err, structs.ErrPermissionDenied), must.Sprintf("got %v", err))
	err = s.RPC("Node.GetClientAllocs", &structs.NodeSpecificRequest{NodeID: node.ID}, &reply)
	must.True(t, errors.Is(err, structs.ErrPermissionDenied), must.Sprintf("got %v", err))

	ok := &structs.NodeSpecificRequest{NodeID: node.ID, SecretID: node.SecretID}
	ok.AuthToken = node.SecretID
	must.NoError(t, s.RPC("Node.GetClientAllocs", ok, &reply))
	must.SliceLen(t, 1, reply.Allocs)
	must.NotNil(t, reply.Allocs[0].Job)
	must.Eq(t, reply.Allocs[0].ModifyIndex, reply.Index)

	// A blocking query returns when the node gets another alloc.
	type result struct {
		reply structs.NodeAllocsResponse
		err   error
	}
	done := make(chan result, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		var r result
		req := &structs.NodeSpecificRequest{NodeID: node.ID, SecretID: node.SecretID}
		req.AuthToken = node.SecretID
		req.MinQueryIndex = reply.Index
		req.MaxQueryTime = 10 * time.Second
		r.err = s.RPC("Node.GetClientAllocs", req, &r.reply)
		done <- r
	})
	t.Cleanup(wg.Wait)
	submitJob(t, s, schedJob("api", 1))
	r := <-done
	must.NoError(t, r.err)
	must.SliceLen(t, 2, r.reply.Allocs)
	must.Greater(t, reply.Index, r.reply.Index)

	// Once stopped, "web"'s alloc comes in full to the query that sees the
	// stop, and as a stub to the next: the client has it already. "api",
	// still live, always comes in full; a client that starts over (index
	// 0) gets everything in full.
	web := live(t, s, "web")[0]
	stopJob(t, s, "web", false)
	waitStopped(t, s, web.ID)
	byID := func(req *structs.NodeSpecificRequest) (map[string]*structs.Allocation, uint64) {
		t.Helper()
		var reply structs.NodeAllocsResponse
		must.NoError(t, s.RPC("Node.GetClientAllocs", req, &reply))
		out := map[string]*structs.Allocation{}
		for _, a := range reply.Allocs {
			out[a.ID] = a
		}
		must.MapLen(t, 2, out)
		return out, reply.Index
	}
	req := &structs.NodeSpecificRequest{NodeID: node.ID, SecretID: node.SecretID}
	req.AuthToken = node.SecretID
	req.MinQueryIndex = r.reply.Index
	seen, index := byID(req)
	must.NotNil(t, seen[web.ID].Job, must.Sprint("the stop is news: in full"))
	must.Eq(t, structs.AllocDesiredStatusStop, seen[web.ID].DesiredStatus)

	req.MinQueryIndex = index
	req.MaxQueryTime = time.Millisecond // nothing new: times out
	again, _ := byID(req)
	stub := again[web.ID]
	must.Nil(t, stub.Job, must.Sprint("a stopped alloc the client has is a stub"))
	must.Nil(t, stub.TaskStates)
	must.True(t, stub.TerminalStatus())
	must.Eq(t, seen[web.ID].AllocModifyIndex, stub.AllocModifyIndex)
	for id, a := range again {
		if id != web.ID {
			must.NotNil(t, a.Job, must.Sprint("a live alloc is always in full"))
		}
	}

	req.MinQueryIndex = 0
	fresh, _ := byID(req)
	must.NotNil(t, fresh[web.ID].Job, must.Sprint("a client starting over gets everything in full"))
}

func TestNode_UpdateAllocFailedIsRescheduled(t *testing.T) {
	s := schedServer(t, time.Minute)
	for i := range 2 {
		joinNode(t, s, schedNode(i))
	}
	job := schedJob("web", 1)
	job.TaskGroups[0].ReschedulePolicy = &structs.ReschedulePolicy{Attempts: 1, Interval: time.Hour, DelayFunction: "constant"}
	submitJob(t, s, job)
	first := waitLive(t, s, "web", 1)[0]

	running := &structs.Allocation{ID: first.ID, NodeID: first.NodeID, ClientStatus: structs.AllocClientStatusRunning,
		TaskStates: map[string]*structs.TaskState{"web": {State: structs.TaskStateRunning}}}
	var reply structs.GenericResponse
	update := func(a *structs.Allocation) *structs.AllocUpdateRequest {
		req := &structs.AllocUpdateRequest{Alloc: []*structs.Allocation{a}}
		req.AuthToken = nodeSecret(s, a.NodeID)
		return req
	}
	must.NoError(t, s.RPC("Node.UpdateAlloc", update(running), &reply))
	a, err := s.State().AllocByID(nil, first.ID)
	must.NoError(t, err)
	must.Eq(t, structs.AllocClientStatusRunning, a.ClientStatus)
	must.Eq(t, structs.TaskStateRunning, a.TaskStates["web"].State)

	failed := &structs.Allocation{ID: first.ID, NodeID: first.NodeID, ClientStatus: structs.AllocClientStatusFailed, ClientDescription: "exit 1"}
	must.NoError(t, s.RPC("Node.UpdateAlloc", update(failed), &reply))
	var next *structs.Allocation
	testutil.WaitForResult(t, func() (bool, error) {
		for _, a := range live(t, s, "web") {
			if a.PreviousAllocation == first.ID {
				next = a
				return true, nil
			}
		}
		return false, errors.New("not rescheduled yet")
	})
	must.NotEq(t, first.NodeID, next.NodeID)
	must.SliceLen(t, 1, next.RescheduleTracker.Events)

	// The attempt is used up: the next failure is not rescheduled.
	failed.ID, failed.NodeID = next.ID, next.NodeID
	must.NoError(t, s.RPC("Node.UpdateAlloc", update(failed), &reply))
	evals, err := s.State().EvalsByJob(nil, structs.DefaultNamespace, "web")
	must.NoError(t, err)
	for _, e := range evals {
		if e.TriggeredBy == structs.EvalTriggerRetryFailedAlloc {
			waitEval(t, s, e.ID)
		}
	}
	must.SliceEmpty(t, live(t, s, "web"))
}

func TestScheduling_SystemJobFollowsNodes(t *testing.T) {
	s := schedServer(t, time.Minute)
	joinNode(t, s, schedNode(0))
	job := schedJob("agent", 1)
	job.Type = structs.JobTypeSystem
	submitJob(t, s, job)
	waitLive(t, s, "agent", 1)

	// Registered but not yet heartbeating: not ready, no alloc.
	var reply structs.NodeUpdateResponse
	must.NoError(t, s.RPC("Node.Register", &structs.NodeRegisterRequest{Node: schedNode(1)}, &reply))
	must.SliceLen(t, 1, live(t, s, "agent"))
	heartbeat(t, s, schedNode(1).ID)
	allocs := waitLive(t, s, "agent", 2)
	must.NotEq(t, allocs[0].NodeID, allocs[1].NodeID)
}

func TestScheduling_DrainMovesAllocsAndCompletes(t *testing.T) {
	s := schedServer(t, time.Minute)
	for i := range 2 {
		joinNode(t, s, schedNode(i))
	}
	submitJob(t, s, schedJob("web", 4))
	waitLive(t, s, "web", 4)
	drained := schedNode(0).ID

	var reply structs.NodeUpdateResponse
	must.NoError(t, s.RPC("Node.UpdateDrain", &structs.NodeUpdateDrainRequest{
		NodeID: drained, DrainStrategy: &structs.DrainStrategy{Deadline: time.Hour},
	}, &reply))
	testutil.WaitForResult(t, func() (bool, error) {
		allocs := live(t, s, "web")
		for _, a := range allocs {
			if a.NodeID == drained {
				return false, fmt.Errorf("alloc %s still on the drained node", a.Name)
			}
		}
		if len(allocs) != 4 {
			return false, fmt.Errorf("%d live allocs", len(allocs))
		}
		n, err := s.State().NodeByID(nil, drained)
		if err != nil || n.DrainStrategy != nil {
			return false, fmt.Errorf("drain not complete yet (%v)", err)
		}
		must.Eq(t, structs.NodeSchedulingIneligible, n.SchedulingEligibility)
		return true, nil
	})
}

func TestScheduling_FailoverKeepsBlockedAndPendingWork(t *testing.T) {
	servers := cluster.NewCluster(t, 3, func(_ int, c *nomad.Config) { schedConfig(time.Minute)(c) })
	leader := cluster.WaitForLeader(t, servers...)
	small := schedNode(0)
	small.NodeResources.MemoryMB = 512
	joinNode(t, leader, small)
	job := schedJob("big", 1)
	job.TaskGroups[0].Tasks[0].Resources.MemoryMB = 1024
	eval := waitEval(t, leader, submitJob(t, leader, job))
	must.NotEq(t, "", eval.BlockedEval)

	leader.Shutdown()
	var rest []*cluster.Server
	for _, s := range servers {
		if s != leader {
			rest = append(rest, s)
		}
	}
	leader = cluster.WaitForLeader(t, rest...)
	// The new leader retries the old term's blocked eval once; it stays
	// blocked (one blocked eval for the job) until capacity appears.
	testutil.WaitForResult(t, func() (bool, error) {
		b := blockedEvalOf(t, leader, "big")
		if b == nil || b.ID == eval.BlockedEval {
			return false, errors.New("blocked eval not retried yet")
		}
		return true, nil
	})
	joinNode(t, leader, schedNode(1))
	waitLive(t, leader, "big", 1)

	submitJob(t, leader, schedJob("web", 2))
	waitLive(t, leader, "web", 2)
	for _, s := range rest {
		if !strings.EqualFold(s.Addr, leader.Addr) {
			waitLive(t, s, "web", 2) // replicated
		}
	}
}
