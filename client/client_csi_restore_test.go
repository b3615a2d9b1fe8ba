package client

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/client/internal/testlog"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi/fake"
	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/plugins/drivers/mock"
	"github.com/berth-io/berth/testutil"
)

// restoreRig is a client on a data dir that the test kills (Shutdown,
// leaving tasks and mounts) and starts again, with one node plugin that
// outlives both processes, as the simulator's nodes have.
type restoreRig struct {
	t       *testing.T
	srv     *csiFakeServer
	plugin  *fake.Plugin
	sock    string
	dataDir string
}

func newRestoreRig(t *testing.T) *restoreRig {
	r := &restoreRig{
		t: t, srv: newCSIFakeServer(&structs.CSIVolume{ID: "vol1", Namespace: "default", PluginID: "fakeplug"}),
		sock: shortSocket(t), dataDir: t.TempDir(),
	}
	r.plugin = fake.Start(t, r.sock)
	return r
}

// start starts a client process on the rig's data dir (a new driver
// instance: the mock driver's tasks live in a registry of the test
// binary, so they outlive the client as real ones would).
func (r *restoreRig) start() *Client {
	r.t.Helper()
	cfg := &Config{
		DataDir: r.dataDir, Node: &structs.Node{Name: "n"}, RPC: r.srv, Logger: testlog.Logger(r.t),
		Drivers:           map[string]drivers.Driver{mock.Name: mock.New(hclog.NewNullLogger(), mock.Config{MountConfig: structs.MountConfigSupportAll})},
		UpdateBatchWindow: 5 * time.Millisecond, ShutdownTimeout: 500 * time.Millisecond, CSI: fastCSIConfig(),
	}
	c := newTestClient(r.t, cfg)
	r.t.Cleanup(func() { _ = c.Shutdown() })
	registerNodePlugin(r.t, c, "fakeplug", r.sock)
	return c
}

func (r *restoreRig) waitCalls(method string, n int) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	must.NoError(r.t, r.plugin.WaitForCalls(ctx, method, n), must.Sprintf("waiting for %d %s calls", n, method))
}

// released waits until the restarted client unpublished the volume on the
// node, told the servers (Unpublish), and reported the alloc's tasks
// exited, which is what lets the servers release the claim at once
// instead of after their NodeDetachGrace.
func (r *restoreRig) released(allocID string) {
	r.t.Helper()
	testutil.WaitForResult(r.t, func() (bool, error) {
		a := r.srv.alloc(allocID)
		_, unpublishes := r.srv.counts()
		switch {
		case r.plugin.Calls("NodeUnpublishVolume") < 1:
			return false, fmt.Errorf("no NodeUnpublish (publishes: %d)", r.plugin.Calls("NodePublishVolume"))
		case unpublishes < 1:
			return false, fmt.Errorf("the servers got no CSIVolume.Unpublish")
		case !a.TasksExited:
			return false, fmt.Errorf("alloc %s not reported TasksExited (client status %q)", allocID, a.ClientStatus)
		}
		return true, nil
	})
	for _, id := range mock.Running(allocID + "/") {
		r.t.Fatalf("task %s of the stopped alloc still runs", id)
	}
}

// placeRunning places a service alloc with one task using vol1 and waits
// for the volume to be published and the alloc to run.
func (r *restoreRig) placeRunning(c *Client, task *structs.Task) *structs.Allocation {
	r.t.Helper()
	a := csiTestAlloc(c.NodeID(), mock.Name, "vol1", task)
	r.srv.placeAlloc(a)
	waitStatus(r.t, r.srv.fakeServer, a.ID, structs.AllocClientStatusRunning)
	r.waitCalls("NodePublishVolume", 1)
	return a
}

// TestClient_RestoredClientReleasesAStoppedAllocsVolume: a client killed
// (left its tasks and mounts, as an agent that dies does) while, or just
// after, the servers stopped one of its allocs with a CSI volume
// published, unpublishes the volume by itself once it is started again
// from its state dir, and reports TasksExited — without the servers'
// NodeDetach, which waits NodeDetachGrace (seeds 40071, 40859: the claim
// stayed taken with the volume published on the restarted node).
func TestClient_RestoredClientReleasesAStoppedAllocsVolume(t *testing.T) {
	t.Run("stopped while the client is down", func(t *testing.T) {
		r := newRestoreRig(t)
		c1 := r.start()
		a := r.placeRunning(c1, &structs.Task{Name: "db", KillTimeout: 100 * time.Millisecond})
		must.NoError(t, c1.Shutdown())
		must.SliceNotEmpty(t, mock.Running(a.ID+"/"), must.Sprint("a killed client leaves its tasks running"))

		r.srv.stopAlloc(a.ID)
		r.start()
		r.released(a.ID)
	})

	t.Run("stopped and garbage collected while the client is down", func(t *testing.T) {
		r := newRestoreRig(t)
		c1 := r.start()
		a := r.placeRunning(c1, &structs.Task{Name: "db", KillTimeout: 100 * time.Millisecond})
		must.NoError(t, c1.Shutdown())
		r.srv.stopAlloc(a.ID)
		r.srv.gcAlloc(a.ID)

		c2 := r.start()
		// The servers no longer list the alloc: the client destroys it,
		// which kills its task and releases its volume first.
		testutil.WaitForResult(t, func() (bool, error) {
			_, unpublishes := r.srv.counts()
			switch {
			case r.plugin.Calls("NodeUnpublishVolume") < 1:
				return false, fmt.Errorf("no NodeUnpublish")
			case unpublishes < 1:
				return false, fmt.Errorf("the servers got no CSIVolume.Unpublish")
			case len(c2.AllocIDs()) > 0:
				return false, fmt.Errorf("the client still runs %v", c2.AllocIDs())
			}
			return true, nil
		})
		must.SliceEmpty(t, mock.Running(a.ID+"/"))
	})

	t.Run("killed while the stopped alloc's release runs", func(t *testing.T) {
		r := newRestoreRig(t)
		c1 := r.start()
		a := r.placeRunning(c1, &structs.Task{Name: "db", KillTimeout: 100 * time.Millisecond})
		r.plugin.SetHang("NodeUnpublishVolume", true)
		r.srv.stopAlloc(a.ID)
		r.waitCalls("NodeUnpublishVolume", 1)
		must.NoError(t, c1.Shutdown())
		r.plugin.ClearFaults()

		r.start()
		r.released(a.ID)
	})

	t.Run("killed while the stopped alloc's task is being killed", func(t *testing.T) {
		r := newRestoreRig(t)
		c1 := r.start()
		// The task takes its whole kill timeout to exit: the client is
		// killed before it does, and the task goes on running.
		a := r.placeRunning(c1, &structs.Task{Name: "db", KillTimeout: time.Hour,
			Config: map[string]any{"kill_after": "2h"}})
		r.srv.stopAlloc(a.ID)
		testutil.WaitForResult(t, func() (bool, error) {
			got, err := c1.Alloc(a.ID)
			if err != nil {
				return false, err
			}
			if got.DesiredStatus != structs.AllocDesiredStatusStop {
				return false, fmt.Errorf("the client has not received the stop")
			}
			return true, nil
		})
		must.NoError(t, c1.Shutdown())
		must.SliceNotEmpty(t, mock.Running(a.ID+"/"))
		must.Eq(t, 0, r.plugin.Calls("NodeUnpublishVolume"))

		claims, _ := r.srv.counts()
		c2 := r.start()
		// Nothing newer comes from the servers: the restored client must
		// act on the stop it had stored, and kill the task again (a second
		// Killing event: the first is the killed client's).
		testutil.WaitForResult(t, func() (bool, error) {
			got, err := c2.Alloc(a.ID)
			if err != nil {
				return false, err
			}
			if n := countEvents(got.TaskStates["db"], "Killing"); n < 2 {
				return false, fmt.Errorf("the restored client is not killing the task of the stopped alloc (%d Killing events)", n)
			}
			return true, nil
		})
		// The kill takes the task's kill timeout; end it as the driver
		// would at the deadline.
		for _, id := range mock.Running(a.ID + "/") {
			must.NoError(t, mock.ExitTask(id, 137))
		}
		r.released(a.ID)
		after, _ := r.srv.counts()
		must.Eq(t, claims, after, must.Sprint("the restored client claimed the volume again for a stopped alloc"))
	})
}

func countEvents(ts *structs.TaskState, typ string) int {
	n := 0
	if ts == nil {
		return 0
	}
	for _, ev := range ts.Events {
		if ev.Type == typ {
			n++
		}
	}
	return n
}
