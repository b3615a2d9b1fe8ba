package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

// TestE2E_PurgeKeepsVolumeUntilTaskExits runs `job stop -purge` while a
// task that takes two seconds to exit after SIGTERM uses a volume
// (DESIGN.md §4, guarantee 2: purging a job never frees claims early). It
// watches /proc/<pid> and mountinfo from before the stop until after both
// are gone: at every observation while the task's process still exists,
// the volume's publish and staging mounts are there; once the process has
// exited the mounts go away and the claim is freed.
func TestE2E_PurgeKeepsVolumeUntilTaskExits(t *testing.T) {
	h := NewHarness(t)
	c := h.NewCluster(t, 1, 1)
	client := c.Clients[0]

	c.RunPlugin(t, h.HostpathPlugin("node"))
	c.RegisterVolume(t, &Volume{ID: "data", PluginID: "hostpath", Capabilities: []Capability{{SingleNodeWriter, FileSystem}}})
	const stopDelay = 2 * time.Second
	app := &Workload{JobID: "slow", Type: "service", Volume: "data", AccessMode: SingleNodeWriter,
		Script: SlowStopScript(stopDelay), KillTimeout: 20 * time.Second}
	c.RunJob(t, app.JobID, app.HCL(h.Root))
	alloc := c.WaitForAllocs(t, "slow", 1, api.AllocClientStatusRunning)[0]
	task := WaitForTask(t, alloc.ID, WorkloadTask)
	paths := VolumePaths(client, "hostpath", "default", "data", alloc.ID)
	m := volumeMounts(t, paths)
	must.Len(t, 1, m.publish, must.Sprintf("publish mounts before the stop: %+v", m))
	must.Len(t, 1, m.staging, must.Sprintf("staging mounts before the stop: %+v", m))

	// The stop runs in the background while this goroutine watches.
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	stop := exec.CommandContext(ctx, h.Berth, "job", "stop", "-purge", "-detach", "slow")
	stop.Env = append(os.Environ(), "BERTH_ADDR=http://"+c.Server(t).HTTPAddr())
	var stopOut bytes.Buffer // one writer for both: exec writes it from one goroutine at a time
	stop.Stdout, stop.Stderr = &stopOut, &stopOut
	must.NoError(t, stop.Start())
	stopped := time.Now()

	obs := watchTaskAndMounts(t, task, paths, claimTimeout)
	must.NoError(t, stop.Wait(), must.Sprintf("berth job stop -purge: %s", stopOut.String()))
	t.Logf("task exited %v after the stop, mounts gone %v after it; %d observations with the task alive",
		obs.taskExited.Sub(stopped).Round(time.Millisecond), obs.mountsGone.Sub(stopped).Round(time.Millisecond), obs.whileAlive)

	must.SliceEmpty(t, obs.violations, must.Sprintf("the volume was unmounted while the task's process still existed; first: %s", firstOf(obs.violations)))
	// The watch saw the task run with its mounts for most of the stop delay
	// (it polls every few milliseconds): the assertion above had something
	// to look at.
	must.Greater(t, 20, obs.whileAlive, must.Sprint("too few observations of the running task"))
	must.True(t, obs.taskExited.Sub(stopped) > stopDelay/2,
		must.Sprintf("the task exited %v after the stop: it did not take its time, so this test proves nothing", obs.taskExited.Sub(stopped)))

	v := c.WaitForClaimFreed(t, "data", alloc.ID)
	freed := findClaim(v.PastClaims, alloc.ID)
	must.Greater(t, obs.lastAlive.UnixNano(), freed.ModifyTime,
		must.Sprintf("the claim was freed at %v, before the task was last seen alive at %v", time.Unix(0, freed.ModifyTime), obs.lastAlive))
	_, _, err := c.API(t).Jobs().Info("slow", nil)
	must.True(t, api.IsNotFound(err), must.Sprintf("the purged job is still there (%v)", err))
}

// watchObservations is what watchTaskAndMounts saw.
type watchObservations struct {
	// whileAlive counts the observations with the task alive; lastAlive
	// is the last of them.
	whileAlive int
	lastAlive  time.Time
	// violations are the observations with the task alive and a mount
	// missing.
	violations []string
	// taskExited and mountsGone are when the watch first saw the task
	// gone and both mounts gone.
	taskExited, mountsGone time.Time
}

// watchTaskAndMounts busy-polls (every 2ms) mountinfo and the task's /proc
// entry until the task has exited and the volume's mounts are gone, or the
// timeout passes (which fails the test). Each observation reads mountinfo
// first, then /proc: a task seen alive after a mount was seen missing was
// alive when the mount was missing, so a violation is never a race of the
// observer's own.
func watchTaskAndMounts(t testing.TB, task Proc, paths CSIPaths, timeout time.Duration) watchObservations {
	t.Helper()
	var obs watchObservations
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		staging, err := MountsUnder(paths.Staging)
		must.NoError(t, err)
		publish, err := MountsUnder(paths.Publish)
		must.NoError(t, err)
		now := time.Now()
		alive := task.Alive()
		mounted := len(staging) > 0 && len(publish) > 0
		switch {
		case alive:
			obs.whileAlive++
			obs.lastAlive = time.Now()
			if !mounted {
				obs.violations = append(obs.violations, now.Format("15:04:05.000000")+
					": task alive, staging mounts "+describeMounts(staging)+", publish mounts "+describeMounts(publish))
			}
		case obs.taskExited.IsZero():
			obs.taskExited = now
		}
		if !alive && len(staging)+len(publish) == 0 {
			obs.mountsGone = now
			return obs
		}
		select {
		case <-deadline.C:
			t.Fatalf("after %v: task alive %t, staging mounts %s, publish mounts %s", timeout, alive, describeMounts(staging), describeMounts(publish))
		case <-tick.C:
		}
	}
}

func describeMounts(ms []Mount) string {
	if len(ms) == 0 {
		return "none"
	}
	s := ""
	for i, m := range ms {
		if i > 0 {
			s += ", "
		}
		s += m.String()
	}
	return s
}

func firstOf(ss []string) string {
	if len(ss) == 0 {
		return "none"
	}
	return ss[0]
}
