package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/client"
	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil"
)

// These tests run whole in-process clusters: servers with their
// schedulers, and clients running tasks with the mock driver.

func mockJob(id, typ string, count int, config map[string]any) *structs.Job {
	return &structs.Job{
		ID: id, Name: id, Namespace: structs.DefaultNamespace, Type: typ, Priority: 50,
		Datacenters: []string{"dc*"},
		TaskGroups: []*structs.TaskGroup{{
			Name:  "g",
			Count: count,
			RestartPolicy: &structs.RestartPolicy{
				Attempts: 0, Interval: time.Minute, Delay: 10 * time.Millisecond, Mode: structs.RestartPolicyModeFail,
			},
			ReschedulePolicy: &structs.ReschedulePolicy{
				Attempts: 1, Interval: time.Hour, Delay: 10 * time.Millisecond, DelayFunction: "constant", MaxDelay: time.Second,
			},
			Tasks: []*structs.Task{{
				Name: "t", Driver: "mock", Config: config,
				Resources:   &structs.Resources{CPU: 100, MemoryMB: 64},
				KillTimeout: time.Second,
			}},
		}},
	}
}

func registerJob(t *testing.T, s *Server, job *structs.Job) *structs.JobRegisterResponse {
	t.Helper()
	var resp structs.JobRegisterResponse
	must.NoError(t, s.RPC("Job.Register", &structs.JobRegisterRequest{Job: job}, &resp))
	return &resp
}

// allocsWithStatus returns the job's allocs whose client status is one
// of statuses and whose desired status is run.
func allocsWithStatus(t *testing.T, s *Server, jobID string, statuses ...string) []*structs.Allocation {
	t.Helper()
	allocs, err := s.State().AllocsByJob(nil, structs.DefaultNamespace, jobID)
	must.NoError(t, err)
	var out []*structs.Allocation
	for _, a := range allocs {
		for _, st := range statuses {
			if a.ClientStatus == st && a.DesiredStatus == structs.AllocDesiredStatusRun {
				out = append(out, a)
			}
		}
	}
	return out
}

func waitForAllocs(t *testing.T, s *Server, jobID string, n int, statuses ...string) []*structs.Allocation {
	t.Helper()
	var got []*structs.Allocation
	testutil.WaitForResult(t, func() (bool, error) {
		got = allocsWithStatus(t, s, jobID, statuses...)
		if len(got) != n {
			return false, fmt.Errorf("job %q has %d allocs %v, want %d", jobID, len(got), statuses, n)
		}
		return true, nil
	})
	return got
}

func startClients(t *testing.T, s *Server, n int) []*client.Client {
	t.Helper()
	return startClientsWith(t, s, n, nil)
}

func startClientsWith(t *testing.T, s *Server, n int, cb func(*client.Config)) []*client.Client {
	t.Helper()
	out := make([]*client.Client, n)
	for i := range n {
		out[i] = NewClient(t, s, fmt.Sprintf("client-%d", i), cb)
	}
	for _, c := range out {
		WaitForNodeReady(t, s, c)
	}
	return out
}

func TestScheduling_ServiceCountSpreadsOverClients(t *testing.T) {
	s := NewServer(t, nil)
	startClients(t, s, 3)
	registerJob(t, s, mockJob("web", structs.JobTypeService, 3, nil))
	allocs := waitForAllocs(t, s, "web", 3, structs.AllocClientStatusRunning)
	nodes := map[string]bool{}
	for _, a := range allocs {
		nodes[a.NodeID] = true
	}
	must.MapLen(t, 3, nodes, must.Sprintf("3 allocs should spread over 3 nodes"))
}

func TestScheduling_BatchJobCompletes(t *testing.T) {
	s := NewServer(t, nil)
	startClients(t, s, 1)
	registerJob(t, s, mockJob("once", structs.JobTypeBatch, 1, map[string]any{"run_for": "20ms"}))
	waitForAllocs(t, s, "once", 1, structs.AllocClientStatusComplete)
	testutil.WaitForResult(t, func() (bool, error) {
		j, err := s.State().JobByID(nil, structs.DefaultNamespace, "once")
		if err != nil || j == nil {
			return false, fmt.Errorf("job: %v", err)
		}
		return j.Status == structs.JobStatusDead, fmt.Errorf("job status %q, want dead", j.Status)
	})
}

func TestScheduling_SystemJobRunsOnEveryNodeIncludingLateJoiners(t *testing.T) {
	s := NewServer(t, nil)
	startClients(t, s, 2)
	registerJob(t, s, mockJob("agentd", structs.JobTypeSystem, 1, nil))
	waitForAllocs(t, s, "agentd", 2, structs.AllocClientStatusRunning)

	late := NewClient(t, s, "late", nil)
	WaitForNodeReady(t, s, late)
	allocs := waitForAllocs(t, s, "agentd", 3, structs.AllocClientStatusRunning)
	onLate := false
	for _, a := range allocs {
		onLate = onLate || a.NodeID == late.NodeID()
	}
	must.True(t, onLate, must.Sprintf("the node that joined later has no system alloc"))
}

func TestScheduling_FailingTaskIsRescheduled(t *testing.T) {
	s := NewServer(t, nil)
	startClients(t, s, 2)
	// Exits 1 after 20ms; restart attempts 0 with mode fail, so the alloc
	// fails at once and reschedule (1 attempt) replaces it.
	registerJob(t, s, mockJob("flaky", structs.JobTypeService, 1, map[string]any{"run_for": "20ms", "exit_code": 1}))
	testutil.WaitForResult(t, func() (bool, error) {
		allocs, err := s.State().AllocsByJob(nil, structs.DefaultNamespace, "flaky")
		if err != nil {
			return false, err
		}
		var failed, replacements int
		for _, a := range allocs {
			if a.ClientStatus == structs.AllocClientStatusFailed {
				failed++
			}
			if a.PreviousAllocation != "" {
				replacements++
			}
		}
		if failed < 1 || replacements < 1 {
			return false, fmt.Errorf("%d allocs: %d failed, %d replacements", len(allocs), failed, replacements)
		}
		return true, nil
	})
}

func TestScheduling_JobStopStopsAllAllocs(t *testing.T) {
	s := NewServer(t, nil)
	startClients(t, s, 2)
	registerJob(t, s, mockJob("web", structs.JobTypeService, 2, nil))
	waitForAllocs(t, s, "web", 2, structs.AllocClientStatusRunning)

	var resp structs.JobDeregisterResponse
	must.NoError(t, s.RPC("Job.Deregister", &structs.JobDeregisterRequest{JobID: "web"}, &resp))
	testutil.WaitForResult(t, func() (bool, error) {
		allocs, err := s.State().AllocsByJob(nil, structs.DefaultNamespace, "web")
		if err != nil {
			return false, err
		}
		for _, a := range allocs {
			if !a.ClientTerminalStatus() {
				return false, fmt.Errorf("alloc %s is still %s/%s", a.ID[:8], a.DesiredStatus, a.ClientStatus)
			}
		}
		return len(allocs) == 2, nil
	})
}

func TestScheduling_SilentNodeGoesDownAndAllocsAreReplaced(t *testing.T) {
	s := NewServer(t, func(c *nomad.Config) { FastHeartbeats(c) })
	// Not dev mode: a client that goes away leaves its tasks running and
	// reports nothing, like a client whose machine lost the network.
	clients := startClientsWith(t, s, 2, func(c *client.Config) { c.DevMode = false })
	registerJob(t, s, mockJob("web", structs.JobTypeService, 1, nil))
	first := waitForAllocs(t, s, "web", 1, structs.AllocClientStatusRunning)[0]

	// The client on the alloc's node stops heartbeating.
	for _, c := range clients {
		if c.NodeID() == first.NodeID {
			c.Shutdown()
		}
	}
	testutil.WaitForResult(t, func() (bool, error) {
		n, err := s.State().NodeByID(nil, first.NodeID)
		if err != nil {
			return false, err
		}
		return n.Status == structs.NodeStatusDown, fmt.Errorf("node status %q, want down", n.Status)
	})
	testutil.WaitForResult(t, func() (bool, error) {
		a, err := s.State().AllocByID(nil, first.ID)
		if err != nil {
			return false, err
		}
		return a.ClientStatus == structs.AllocClientStatusLost, fmt.Errorf("alloc status %q, want lost", a.ClientStatus)
	})
	repl := waitForAllocs(t, s, "web", 1, structs.AllocClientStatusRunning)[0]
	must.NotEq(t, first.NodeID, repl.NodeID)
}

func TestScheduling_DrainMovesAllocs(t *testing.T) {
	s := NewServer(t, nil)
	startClients(t, s, 2)
	registerJob(t, s, mockJob("web", structs.JobTypeService, 1, nil))
	first := waitForAllocs(t, s, "web", 1, structs.AllocClientStatusRunning)[0]

	var resp structs.NodeUpdateResponse
	must.NoError(t, s.RPC("Node.UpdateDrain", &structs.NodeUpdateDrainRequest{
		NodeID: first.NodeID, DrainStrategy: &structs.DrainStrategy{Deadline: time.Minute},
	}, &resp))
	testutil.WaitForResult(t, func() (bool, error) {
		running := allocsWithStatus(t, s, "web", structs.AllocClientStatusRunning)
		if len(running) != 1 || running[0].NodeID == first.NodeID {
			return false, fmt.Errorf("alloc not moved off the draining node yet (%d running)", len(running))
		}
		return true, nil
	})
}

func TestScheduling_BlockedPlacementPlacesWhenNodeJoins(t *testing.T) {
	s := NewServer(t, nil)
	reg := registerJob(t, s, mockJob("web", structs.JobTypeService, 1, nil))
	testutil.WaitForResult(t, func() (bool, error) {
		evals, err := s.State().EvalsByJob(nil, structs.DefaultNamespace, "web")
		if err != nil {
			return false, err
		}
		for _, e := range evals {
			if e.Status == structs.EvalStatusBlocked {
				return true, nil
			}
		}
		return false, fmt.Errorf("no blocked eval yet (register eval %s)", reg.EvalID)
	})
	startClients(t, s, 1)
	waitForAllocs(t, s, "web", 1, structs.AllocClientStatusRunning)
}
