package e2e

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

// TestE2E_LeaderKilledWhileStopping runs a service job with a volume on a
// cluster of three servers and two clients, stops the job and at once
// SIGKILLs the leader, while the task (which takes five seconds to exit) is
// still stopping: a new leader finishes the claim protocol and the claim
// is freed (DESIGN.md §4: the volumewatcher's progress is in Raft and
// survives leader changes). Then every server is stopped and started again
// with its data dir: the volume and its past claims are as they were, and
// the servers elect a leader.
func TestE2E_LeaderKilledWhileStopping(t *testing.T) {
	h := NewHarness(t)
	c := h.NewCluster(t, 3, 2)
	// Longer than an election takes, so that a claim freed before the task
	// exited would be freed while it still runs, for the checks to see.
	const stopDelay = 5 * time.Second

	c.RunPlugin(t, h.HostpathPlugin("node"))
	c.RegisterVolume(t, &Volume{ID: "data", PluginID: "hostpath", Capabilities: []Capability{{SingleNodeWriter, FileSystem}}})
	app := &Workload{JobID: "app", Type: "service", Volume: "data", AccessMode: SingleNodeWriter,
		Script: SlowStopScript(stopDelay), KillTimeout: 20 * time.Second}
	c.RunJob(t, app.JobID, app.HCL(h.Root))
	alloc := c.WaitForAllocs(t, "app", 1, api.AllocClientStatusRunning)[0]
	task := WaitForTask(t, alloc.ID, WorkloadTask)
	must.Eq(t, api.CSIClaimTaken, liveClaim(t, c, "data", alloc.ID).Step)

	leader := c.WaitForLeader(t)
	follower := c.Follower(t)
	// The stop goes through a follower (it forwards to the leader) so the
	// CLI's agent survives; it returns once the stop is committed.
	out, err := c.BerthOn(follower, "job", "stop", "-detach", "app")
	must.NoError(t, err, must.Sprintf("berth job stop: %s", out))
	leader.Kill(t)
	// The stop had not finished when the leader died: the task still runs
	// (it takes stopDelay to exit), so its claim cannot have been freed.
	aliveAt := time.Now()
	must.True(t, task.Alive(), must.Sprint("the task had exited before the leader was killed: the test proves nothing"))

	newLeader := c.WaitForLeader(t)
	must.NotEq(t, leader.Name, newLeader.Name)
	t.Logf("leader %s killed, %s leads now", leader.Name, newLeader.Name)
	v := c.WaitForClaimFreed(t, "data", alloc.ID)
	must.SliceEmpty(t, v.Claims)
	freed := findClaim(v.PastClaims, alloc.ID)
	must.Greater(t, aliveAt.UnixNano(), freed.ModifyTime, must.Sprintf("the claim was freed at %v, while the task still ran (alive at %v)", time.Unix(0, freed.ModifyTime), aliveAt))
	must.False(t, task.Alive(), must.Sprint("the claim was freed while the task runs"))

	// Restart every server from its data dir. From the moment they are up,
	// read the volume through each of them: reads wait for a leader, and
	// the first ones reach it right after its election.
	for _, s := range c.RunningServers() {
		s.Stop(t)
	}
	for _, s := range c.Servers {
		s.Restart(t)
	}
	reads := readVolumeThroughEach(t, c.Servers, "data", 20)
	restarted := c.WaitForLeader(t)
	t.Logf("after the restart %s leads; %d reads of the volume", restarted.Name, len(reads))
	for _, r := range reads {
		if r.vol == nil {
			t.Errorf("a read of volume %q through %s right after the restart found no such volume", "data", r.server)
			continue
		}
		if len(r.vol.Claims) > 0 || !slices.EqualFunc(r.vol.PastClaims, v.PastClaims, claimsEqual) {
			t.Errorf("a read of volume %q through %s right after the restart (index %d) differs from the state before it:\nclaims %s\npast claims %s\nbefore: past claims %s",
				"data", r.server, r.index, describeClaims(r.vol.Claims), describeClaims(r.vol.PastClaims), describeClaims(v.PastClaims))
		}
	}

	after := c.Volume(t, "data")
	must.Eq(t, v.ID, after.ID)
	must.Eq(t, v.PluginID, after.PluginID)
	must.Eq(t, v.CreateIndex, after.CreateIndex)
	must.SliceEmpty(t, after.Claims, must.Sprint("live claims after the restart"))
	must.Eq(t, v.PastClaims, after.PastClaims, must.Sprint("past claims changed across the restart"))
	past := findClaim(after.PastClaims, alloc.ID)
	must.NotNil(t, past)
	must.Eq(t, api.CSIClaimFreed, past.Step)

	// The restarted cluster still works: the clients are back and the
	// volume can be claimed again.
	c.WaitForNodesReady(t)
	c.WaitForPlugin(t, "hostpath", 0, len(c.Clients))
	again := &Workload{JobID: "again", Type: "batch", Volume: "data", AccessMode: SingleNodeWriter, Script: "echo again > /data/again"}
	c.RunJob(t, again.JobID, again.HCL(h.Root))
	a2 := c.WaitForAllocs(t, "again", 1, api.AllocClientStatusComplete)[0]
	c.WaitForClaimFreed(t, "data", a2.ID)
}

// volumeRead is one successful read of a volume; vol is nil when the
// server said it does not exist.
type volumeRead struct {
	server string
	index  uint64
	vol    *api.CSIVolume
}

// readVolumeThroughEach reads a volume through each of the servers, n
// successful reads each, one goroutine per server reading as fast as it
// can; failed reads (no leader yet) are retried every 2ms. It returns the
// successful reads.
func readVolumeThroughEach(t testing.TB, servers []*Agent, id string, n int) []volumeRead {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), leaderTimeout)
	defer cancel()
	var (
		wg   sync.WaitGroup
		lock sync.Mutex // guards out
		out  []volumeRead
	)
	for _, s := range servers {
		client := s.API(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			retry := time.NewTicker(2 * time.Millisecond)
			defer retry.Stop()
			for ok := 0; ok < n && ctx.Err() == nil; {
				v, meta, err := client.CSIVolumes().Info(id, (&api.QueryOptions{}).WithContext(ctx))
				if api.IsNotFound(err) {
					// The volume exists: a server that cannot find it
					// answers from state it has not caught up on.
					v, meta, err = nil, &api.QueryMeta{}, nil
				}
				if err != nil {
					select {
					case <-ctx.Done():
					case <-retry.C:
					}
					continue
				}
				ok++
				lock.Lock()
				out = append(out, volumeRead{server: s.Name, index: meta.LastIndex, vol: v})
				lock.Unlock()
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("reading volume %s through every server: %v", id, ctx.Err())
	}
	return out
}

// claimsEqual compares two claims field by field.
func claimsEqual(a, b *api.CSIVolumeClaim) bool {
	if a == nil || b == nil {
		return a == b
	}
	return reflect.DeepEqual(a, b)
}

func describeClaims(cs []*api.CSIVolumeClaim) string {
	if len(cs) == 0 {
		return "none"
	}
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("{alloc %s node %s step %s modified %d}", c.AllocID, c.NodeID, c.Step, c.ModifyTime))
	}
	return strings.Join(parts, ", ")
}
