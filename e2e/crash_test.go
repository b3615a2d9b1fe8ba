package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/helper/crashpoint"
	"github.com/berth-io/berth/testutil"
)

// TestE2E_ClientCrashBetweenClaimSteps SIGKILLs the client at each step
// boundary of the claim path (helper/crashpoint: after the Claim RPC,
// after NodeStage, after NodePublish on the way up; after NodeUnpublish,
// after NodeUnstage, after recording the unmount on the way down), each
// time right after the step's side effect and before the client wrote it
// down, and starts it again on the same data dir. The node-local records
// (client/state: the unsynced file) must carry the client through: after
// a crash on the way up, the alloc runs with exactly one staging and one
// publish mount of the volume and no mount point mounted twice; after a
// crash on the way down, the restarted client finishes the release by
// itself (well before the servers' NodeDetach fallback, 2 min), the claim
// is freed and no mount of the volume is left. A client that lost a
// record would leave a mount behind or the claim held.
func TestE2E_ClientCrashBetweenClaimSteps(t *testing.T) {
	h := NewHarness(t)
	h.Berth = testutil.BuildBerthTags(t, "crashpoints")
	arm := h.Path("crashpoint")
	t.Setenv(crashpoint.EnvFile, arm)
	c := h.NewCluster(t, 1, 1)
	client := c.Clients[0]
	c.RunPlugin(t, h.HostpathPlugin("node"))
	c.RegisterVolume(t, &Volume{ID: "data", PluginID: "hostpath", Capabilities: []Capability{{SingleNodeWriter, FileSystem}}})
	csiDir := filepath.Join(client.DataDir, "client", "csi")

	armAt := func(t *testing.T, p crashpoint.Point) {
		must.NoError(t, os.WriteFile(arm, []byte(p), 0o600))
	}
	// crashedAndRestarted waits for the client to kill itself at the armed
	// point, then starts it again.
	crashedAndRestarted := func(t *testing.T, p crashpoint.Point) {
		t.Helper()
		if !client.waitExit(agentStopTimeout) {
			t.Fatalf("the client did not crash at %s within %v", p, agentStopTimeout)
		}
		_, err := os.Stat(arm)
		must.True(t, errors.Is(err, os.ErrNotExist), must.Sprintf("the client exited, but not at %s: %v\n%s", p, err, client.LogSinceStart()))
		client.Restart(t)
	}
	noMountTwice := func(t *testing.T) {
		t.Helper()
		mounts, err := MountsUnder(csiDir)
		must.NoError(t, err)
		seen := map[string]bool{}
		for _, m := range mounts {
			must.False(t, seen[m.MountPoint], must.Sprintf("%s is mounted twice: %s", m.MountPoint, describeMounts(mounts)))
			seen[m.MountPoint] = true
		}
	}

	up := []crashpoint.Point{crashpoint.AllocLocal, crashpoint.CSIClaimed, crashpoint.CSIStaged, crashpoint.CSIPublished}
	for i, p := range crashpoint.All {
		t.Run(string(p), func(t *testing.T) {
			onTheWayUp := slices.Contains(up, p)
			jobID := fmt.Sprintf("app%d", i)
			app := &Workload{JobID: jobID, Type: "service", Volume: "data", AccessMode: SingleNodeWriter,
				Script: "echo ok > /data/" + jobID + "; while true; do sleep 0.1; done"}
			if onTheWayUp {
				armAt(t, p)
			}
			c.RunJob(t, jobID, app.HCL(h.Root))
			if onTheWayUp {
				crashedAndRestarted(t, p)
			}
			alloc := c.WaitForAllocs(t, jobID, 1, api.AllocClientStatusRunning)[0]
			if p == crashpoint.AllocLocal {
				// The alloc was in the node-local file only, its prerun
				// perhaps claiming: the restarted client must know it from
				// there (and so release what it claimed), not learn it
				// anew from the servers.
				must.True(t, restoredAlloc(client.LogSinceStart(), alloc.ID),
					must.Sprintf("the restarted client did not restore alloc %s:\n%s", alloc.ID, client.LogSinceStart()))
			}
			task := WaitForTask(t, alloc.ID, WorkloadTask)
			paths := VolumePaths(client, "hostpath", "default", "data", alloc.ID)
			m := volumeMounts(t, paths)
			must.Len(t, 1, m.staging, must.Sprintf("staging mounts of the volume: %s", describeMounts(m.staging)))
			must.Len(t, 1, m.publish, must.Sprintf("publish mounts of the volume: %s", describeMounts(m.publish)))
			noMountTwice(t)
			must.Eq(t, api.CSIClaimTaken, liveClaim(t, c, "data", alloc.ID).Step)

			if !onTheWayUp {
				armAt(t, p)
			}
			c.Berth(t, "job", "stop", jobID)
			if !onTheWayUp {
				crashedAndRestarted(t, p)
			}
			c.WaitForClaimFreed(t, "data", alloc.ID)
			must.False(t, task.Alive(), must.Sprint("the claim was freed while the task runs"))
			waitFor(t, claimTimeout, "the volume's mounts to be gone", func() (bool, error) {
				m := volumeMounts(t, paths)
				return len(m.staging)+len(m.publish) == 0, fmt.Errorf("mounts left: %s; %s", describeMounts(m.staging), describeMounts(m.publish))
			})
			noMountTwice(t)
		})
	}
}

// restoredAlloc reports whether a client's log says it restored allocID
// from its state.
func restoredAlloc(log, allocID string) bool {
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "restored alloc") && strings.Contains(line, allocID) {
			return true
		}
	}
	return false
}
