package e2e

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

// TestE2E_ClientRestartKeepsTaskAndMount SIGKILLs a client whose task
// uses a volume and starts it again with the same data dir (DESIGN.md §4,
// guarantee 4): the task is the same process, still running; the volume
// is not mounted again (the staging and publish mounts have the same mount
// IDs and there is no extra mount of the volume); the claim is the same
// (same alloc, step taken). The restarted client still owns the alloc:
// stopping the job frees the claim and the mounts.
func TestE2E_ClientRestartKeepsTaskAndMount(t *testing.T) {
	h := NewHarness(t)
	c := h.NewCluster(t, 1, 1)
	client := c.Clients[0]

	c.RunPlugin(t, h.HostpathPlugin("node"))
	c.RegisterVolume(t, &Volume{ID: "data", PluginID: "hostpath", Capabilities: []Capability{{SingleNodeWriter, FileSystem}}})
	app := &Workload{JobID: "app", Type: "service", Volume: "data", AccessMode: SingleNodeWriter,
		Script: "echo started > /data/started; while true; do sleep 0.1; done"}
	c.RunJob(t, app.JobID, app.HCL(h.Root))
	alloc := c.WaitForAllocs(t, "app", 1, api.AllocClientStatusRunning)[0]
	task := WaitForTask(t, alloc.ID, WorkloadTask)
	paths := VolumePaths(client, "hostpath", "default", "data", alloc.ID)

	before := volumeMounts(t, paths)
	must.Len(t, 1, before.staging, must.Sprintf("staging mounts of the volume: %v", before.staging))
	must.Len(t, 1, before.publish, must.Sprintf("publish mounts of the volume: %v", before.publish))
	if len(before.uniqueIDs) != 2 {
		// Mountinfo's IDs are reused: a mount made again at once may get
		// the ID its predecessor had, and only the count of mounts tells.
		t.Logf("this kernel gives no unique mount IDs (statx STATX_MNT_ID_UNIQUE, Linux 6.8+): a remount may go unseen")
	}
	t.Logf("the volume's mounts: %s; %s (unique IDs %v)", describeMounts(before.staging), describeMounts(before.publish), before.uniqueIDs)
	claim := liveClaim(t, c, "data", alloc.ID)
	must.Eq(t, api.CSIClaimTaken, claim.Step)

	client.Kill(t)
	must.True(t, task.Alive(), must.Sprint("the task died with its client"))
	restarted := time.Now()
	client.Restart(t)

	// The restarted client restores the alloc; its CSI hook sets the volume
	// up again (finding the mount it made before) and records that in a
	// task event. From then on the mounts are what the restart left.
	var ev *api.TaskEvent
	waitFor(t, allocTimeout, "the restarted client to set the volume up again", func() (bool, error) {
		a, _, err := c.API(t).Allocations().Info(alloc.ID, nil)
		if err != nil {
			return false, err
		}
		ev = csiEventSince(a, WorkloadTask, restarted)
		if ev == nil {
			return false, errors.New("no CSI volume task event since the restart")
		}
		return ev.Details["step"] == "reused" || ev.Details["step"] == "mounted", fmt.Errorf("last CSI volume event: %s", ev.DisplayMessage)
	})
	must.Eq(t, "reused", ev.Details["step"], must.Sprintf("the restarted client did not re-use the mount: %s", ev.DisplayMessage))
	must.SliceEmpty(t, client.LogLines("mounting it again"), must.Sprint("the restarted client mounts the volume again"))
	c.WaitForNodesReady(t)

	must.True(t, task.Alive(), must.Sprint("the task died across the client restart"))
	again, err := FindTask(alloc.ID, WorkloadTask)
	must.NoError(t, err)
	must.Eq(t, task, again, must.Sprint("the task is another process after the restart"))

	after := volumeMounts(t, paths)
	must.Eq(t, before.staging, after.staging, must.Sprintf("the volume's staging mounts changed across the client restart: %s", describeMounts(after.staging)))
	must.Eq(t, before.publish, after.publish, must.Sprintf("the volume's publish mounts changed across the client restart: %s", describeMounts(after.publish)))
	must.Eq(t, before.uniqueIDs, after.uniqueIDs, must.Sprint("the volume was unmounted and mounted again across the client restart (new unique mount IDs)"))
	must.SliceEmpty(t, client.LogLines("volume mounted"), must.Sprint("the restarted client mounted a volume"))

	v := c.Volume(t, "data")
	must.Len(t, 1, v.Claims, must.Sprintf("claims after the restart: %v", v.Claims))
	cl := v.Claims[0]
	must.Eq(t, alloc.ID, cl.AllocID)
	must.Eq(t, api.CSIClaimTaken, cl.Step)
	must.Eq(t, claim.CreateTime, cl.CreateTime, must.Sprint("the claim was made again"))

	allocs, _, err := c.API(t).Jobs().Allocations("app", true, nil)
	must.NoError(t, err)
	must.Len(t, 1, allocs, must.Sprint("the job has another alloc after the client restart"))
	must.Eq(t, api.AllocClientStatusRunning, allocs[0].ClientStatus, must.Sprint(describeAlloc(allocs[0])))
	if ts := allocs[0].TaskStates[WorkloadTask]; ts != nil {
		must.Eq(t, 0, ts.Restarts, must.Sprint("the task restarted"))
	}

	// The restarted client still owns the alloc and its volume.
	c.Berth(t, "job", "stop", "app")
	c.WaitForClaimFreed(t, "data", alloc.ID)
	must.False(t, task.Alive(), must.Sprint("the claim was freed while the task runs"))
	waitFor(t, claimTimeout, "the volume's mounts to be gone", func() (bool, error) {
		m := volumeMounts(t, paths)
		return len(m.staging)+len(m.publish) == 0, fmt.Errorf("mounts: %+v", m)
	})
}

// volMounts are a volume's mounts on a client, with the unique mount ID
// (UniqueMountID) of each mount point, 0 where the kernel gives none.
type volMounts struct {
	staging, publish []Mount
	uniqueIDs        map[string]uint64
}

// volumeMounts lists the mounts below a volume's staging and publish dirs.
func volumeMounts(t testing.TB, p CSIPaths) volMounts {
	t.Helper()
	var m volMounts
	var err error
	m.staging, err = MountsUnder(p.Staging)
	must.NoError(t, err)
	m.publish, err = MountsUnder(p.Publish)
	must.NoError(t, err)
	m.uniqueIDs = map[string]uint64{}
	for _, mt := range append(slices.Clone(m.staging), m.publish...) {
		id, ok, err := UniqueMountID(mt.MountPoint)
		if err == nil && ok {
			m.uniqueIDs[mt.MountPoint] = id
		}
	}
	return m
}

// liveClaim returns an alloc's live claim on a volume.
func liveClaim(t testing.TB, c *Cluster, volID, allocID string) *api.CSIVolumeClaim {
	t.Helper()
	v := c.Volume(t, volID)
	i := slices.IndexFunc(v.Claims, func(cl *api.CSIVolumeClaim) bool { return cl.AllocID == allocID })
	if i < 0 {
		t.Fatalf("volume %s has no live claim of alloc %s: %v", volID, allocID, v.Claims)
	}
	return v.Claims[i]
}

// csiEventType is the type of the task events the client's CSI hook
// records (client/allocrunner.EventCSIVolume).
const csiEventType = "CSI Volume"

// csiEventSince returns a task's last CSI volume event recorded after t.
func csiEventSince(a *api.Allocation, task string, t time.Time) *api.TaskEvent {
	ts := a.TaskStates[task]
	if ts == nil {
		return nil
	}
	var last *api.TaskEvent
	for _, e := range ts.Events {
		if e.Type == csiEventType && e.Time > t.UnixNano() {
			last = e
		}
	}
	return last
}
