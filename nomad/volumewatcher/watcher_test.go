package volumewatcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/claims"
	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// The watcher against a real state store, inside a synctest bubble: time
// is fake, so backoffs and deadlines pass at once and synctest.Wait says
// when every goroutine is idle. The fakes stand in for Raft (applying
// straight to the store) and for the controller.

type fakeWriter struct {
	store *state.StateStore

	// mu guards index, writes and nextErr.
	mu      sync.Mutex
	index   uint64
	writes  int
	nextErr []error
}

func (f *fakeWriter) nextIndex() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.index++
	return f.index
}

func (f *fakeWriter) WriteClaims(ctx context.Context, updates []*structs.CSIVolumeClaimUpdate) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.nextErr) > 0 {
		err := f.nextErr[0]
		f.nextErr = f.nextErr[1:]
		return 0, err
	}
	f.index++
	f.writes++
	return f.index, f.store.UpdateCSIVolumeClaims(f.index, updates, time.Now().UnixNano())
}

type fakeController struct {
	// mu guards everything below.
	mu      sync.Mutex
	nextErr []error
	calls   []time.Time
	claims  []*structs.CSIVolumeClaim
	// hook, when set, answers call n (from 1) instead, outside mu.
	hook func(ctx context.Context, n int, claim *structs.CSIVolumeClaim) error
}

func (f *fakeController) ControllerUnpublish(ctx context.Context, vol *structs.CSIVolume, claim *structs.CSIVolumeClaim) error {
	f.mu.Lock()
	f.calls = append(f.calls, time.Now())
	f.claims = append(f.claims, claim)
	if hook := f.hook; hook != nil {
		n := len(f.calls)
		f.mu.Unlock()
		return hook(ctx, n, claim)
	}
	defer f.mu.Unlock()
	if len(f.nextErr) > 0 {
		err := f.nextErr[0]
		f.nextErr = f.nextErr[1:]
		return err
	}
	return nil
}

func (f *fakeController) callTimes() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.calls...)
}

type harness struct {
	t      *testing.T
	store  *state.StateStore
	writer *fakeWriter
	ctrl   *fakeController
	w      *Watcher
}

const (
	hNode   = "node-1"
	hVol    = "vol"
	hPlugin = "p"
)

func newHarness(t *testing.T, controller bool, cfg func(c *Config)) *harness {
	t.Helper()
	store, err := state.NewStateStore(nil)
	must.NoError(t, err)
	h := &harness{t: t, store: store, writer: &fakeWriter{store: store}, ctrl: &fakeController{}}
	c := Config{
		State:             func() *state.StateStore { return store },
		Writer:            h.writer,
		RetryBase:         time.Second,
		RetryMax:          8 * time.Second,
		ResyncInterval:    time.Minute,
		ControllerTimeout: 10 * time.Second,
	}
	if controller {
		c.Controller = h.ctrl
	}
	if cfg != nil {
		cfg(&c)
	}
	h.w = New(c)

	node := &structs.Node{ID: hNode, Name: "n1", Status: structs.NodeStatusReady,
		CSINodePlugins: map[string]*structs.CSIInfo{hPlugin: {
			PluginID: hPlugin, Healthy: true, RequiresControllerPlugin: controller,
			NodeInfo: &structs.CSINodeInfo{ID: "ext-1"},
		}}}
	if controller {
		// A controller that attaches: claims are controller-published.
		node.CSIControllerPlugins = map[string]*structs.CSIInfo{hPlugin: {
			PluginID: hPlugin, Healthy: true, RequiresControllerPlugin: true,
			ControllerInfo: &structs.CSIControllerInfo{SupportsAttachDetach: true},
		}}
	}
	must.NoError(t, store.UpsertNode(h.writer.nextIndex(), node))
	must.NoError(t, store.UpsertCSIVolumes(h.writer.nextIndex(), []*structs.CSIVolume{{
		ID: hVol, Namespace: "default", PluginID: hPlugin, State: structs.CSIVolumeStateReady,
		RequestedCapabilities: []*structs.CSIVolumeCapability{{
			AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
		}},
	}}))
	return h
}

// place puts an alloc on the node with a claim at step (Reserved or
// Taken first, as the claim protocol would, then step).
func (h *harness) place(allocID string, step structs.CSIClaimStep) {
	h.t.Helper()
	first := structs.CSIClaimTaken
	if step == structs.CSIClaimReserved {
		first = step
	}
	claim := &structs.CSIVolumeClaim{
		AllocID: allocID, JobID: "web", NodeID: hNode, ExternalNodeID: "ext-1", Mode: structs.CSIVolumeClaimWrite,
		AccessMode:     h.volume().RequestedCapabilities[0].AccessMode,
		AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem, Step: first,
		ControllerPublished: h.w.cfg.Controller != nil,
	}
	must.NoError(h.t, h.store.UpsertPlanResults(h.writer.nextIndex(), &structs.ApplyPlanResultsRequest{
		AllocsUpdated: []*structs.Allocation{{ID: allocID, Namespace: "default", JobID: "web", NodeID: hNode,
			Job: &structs.Job{ID: "web", Namespace: "default", Type: structs.JobTypeService}}},
		CSIClaims: []*structs.CSIVolumeClaimUpdate{{Namespace: "default", VolumeID: hVol, Claim: claim}},
		Timestamp: time.Now().UnixNano(),
	}))
	if step != first {
		h.setStep(allocID, step)
	}
}

// setStep moves an alloc's claim to step, as an endpoint would.
func (h *harness) setStep(allocID string, step structs.CSIClaimStep) {
	h.t.Helper()
	c := h.volume().Claims[allocID].Copy()
	c.Step = step
	must.NoError(h.t, h.store.UpdateCSIVolumeClaims(h.writer.nextIndex(), []*structs.CSIVolumeClaimUpdate{{
		Namespace: "default", VolumeID: hVol, Claim: c,
	}}, time.Now().UnixNano()))
}

func (h *harness) clientUpdate(allocID, status string, tasksExited bool) {
	h.t.Helper()
	must.NoError(h.t, h.store.UpdateAllocsFromClient(h.writer.nextIndex(), []*structs.Allocation{{
		ID: allocID, ClientStatus: status, TasksExited: tasksExited, ModifyTime: time.Now().UnixNano(),
	}}))
}

func (h *harness) nodeStatus(status string) {
	h.t.Helper()
	must.NoError(h.t, h.store.UpdateNodeStatus(h.writer.nextIndex(), hNode, status, "", time.Now().UnixNano()))
}

func (h *harness) volume() *structs.CSIVolume {
	h.t.Helper()
	v, err := h.store.CSIVolumeByID(nil, "default", hVol)
	must.NoError(h.t, err)
	must.NotNil(h.t, v)
	return v
}

func (h *harness) pastClaim(allocID string) *structs.CSIVolumeClaim {
	for _, c := range h.volume().PastClaims {
		if c.AllocID == allocID {
			return c
		}
	}
	return nil
}

// run starts the watcher until the test's bubble ends.
func (h *harness) run() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.w.Run(ctx)
	}()
	h.t.Cleanup(func() {
		cancel()
		<-done
	})
}

// settle lets fake time pass and waits until every goroutine is idle.
func settle(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

func TestWatcher_FreesOnceTheClientReportsTasksExited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, false, nil)
		h.place("a1", structs.CSIClaimTaken)
		h.run()
		settle(time.Second)
		must.Eq(t, structs.CSIClaimTaken, h.volume().Claims["a1"].Step)

		// Stopped, tasks not reported exited: the client may still use it.
		h.clientUpdate("a1", structs.AllocClientStatusComplete, false)
		settle(claims.DefaultNodeDetachGrace - time.Second)
		claim := h.volume().Claims["a1"]
		must.NotNil(t, claim)
		must.Eq(t, structs.CSIClaimTaken, claim.Step)
		must.Eq(t, "", claim.LastError, must.Sprint("the usual wait for the client is not worth a Raft write"))

		h.clientUpdate("a1", structs.AllocClientStatusComplete, true)
		settle(time.Second)
		must.MapEmpty(t, h.volume().Claims)
		past := h.pastClaim("a1")
		must.NotNil(t, past)
		must.Eq(t, structs.CSIClaimFreed, past.Step)
		must.Eq(t, "", past.ReleaseReason, must.Sprint("the normal path"))
	})
}

func TestWatcher_RetriesControllerUnpublishWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, true, nil)
		h.place("a1", structs.CSIClaimNodeDetached) // the client's Unpublish got this far
		h.clientUpdate("a1", structs.AllocClientStatusComplete, false)
		h.ctrl.nextErr = []error{errors.New("rpc error: code = Unavailable"), errors.New("rpc error: code = Aborted")}
		h.run()

		synctest.Wait()
		claim := h.volume().Claims["a1"]
		must.NotNil(t, claim)
		must.Eq(t, structs.CSIClaimNodeDetached, claim.Step)
		must.Eq(t, 1, claim.Attempts)
		must.StrContains(t, claim.LastError, "Unavailable")
		must.StrContains(t, claim.LastError, hNode)
		must.Greater(t, time.Now().UnixNano(), claim.NextRetry)

		settle(30 * time.Second)
		must.MapEmpty(t, h.volume().Claims)
		calls := h.ctrl.callTimes()
		must.SliceLen(t, 3, calls)
		// Capped exponential backoff with jitter: [½, 1]·1s, then [½, 1]·2s.
		must.GreaterEq(t, 500*time.Millisecond, calls[1].Sub(calls[0]))
		must.LessEq(t, time.Second, calls[1].Sub(calls[0]))
		must.GreaterEq(t, time.Second, calls[2].Sub(calls[1]))
		must.LessEq(t, 2*time.Second, calls[2].Sub(calls[1]))
		past := h.pastClaim("a1")
		must.Eq(t, structs.CSIClaimFreed, past.Step)
		must.Eq(t, 2, past.Attempts, must.Sprint("the history of the release stays on the past claim"))
		must.Eq(t, int64(0), past.NextRetry)
	})
}

func TestWatcher_DownNodeWaitsForItsDisconnectDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, false, func(c *Config) { c.DefaultDisconnectDeadline = time.Minute })
		h.place("a1", structs.CSIClaimTaken)
		h.run()
		h.nodeStatus(structs.NodeStatusDown)
		h.clientUpdate("a1", structs.AllocClientStatusLost, false)
		downAt := time.Now()

		settle(time.Second)
		claim := h.volume().Claims["a1"]
		must.Eq(t, structs.CSIClaimTaken, claim.Step)
		must.StrContains(t, claim.LastError, "disconnect deadline", must.Sprint("operators see why it waits"))
		// Resyncs and claim GC change nothing before the deadline.
		must.NoError(t, h.w.EnqueueAll())
		settle(downAt.Add(time.Minute - time.Second).Sub(time.Now()))
		must.Eq(t, structs.CSIClaimTaken, h.volume().Claims["a1"].Step)

		settle(2 * time.Second)
		must.MapEmpty(t, h.volume().Claims)
		must.Eq(t, claims.ReasonDisconnectPassed, h.pastClaim("a1").ReleaseReason)
	})
}

func TestWatcher_DownNodeIsFencedByTheController(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, true, nil) // default deadline: 5m
		h.place("a1", structs.CSIClaimTaken)
		h.ctrl.nextErr = []error{errors.New("controller busy")}
		h.run()
		start := time.Now()
		h.nodeStatus(structs.NodeStatusDown)
		h.clientUpdate("a1", structs.AllocClientStatusLost, false)

		settle(100 * time.Millisecond)
		claim := h.volume().Claims["a1"]
		must.Eq(t, structs.CSIClaimTaken, claim.Step, must.Sprint("not freed while fencing fails"))
		must.Eq(t, 1, claim.Attempts)
		must.StrContains(t, claim.LastError, "controller busy")

		settle(5 * time.Second)
		must.MapEmpty(t, h.volume().Claims)
		must.Eq(t, claims.ReasonFenced, h.pastClaim("a1").ReleaseReason)
		must.Less(t, time.Minute, time.Since(start), must.Sprint("fencing does not wait for the deadline"))
		must.SliceLen(t, 2, h.ctrl.callTimes())
		must.Eq(t, "ext-1", h.ctrl.claims[1].ExternalNodeID)
	})
}

func TestWatcher_GoneAllocOnALiveNodeIsNeverFreedEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, true, nil)
		h.place("a1", structs.CSIClaimTaken)
		h.run()
		h.clientUpdate("a1", structs.AllocClientStatusComplete, false)
		must.NoError(t, h.store.DeleteAllocs(h.writer.nextIndex(), []string{"a1"}))

		settle(10 * time.Minute) // many resyncs
		must.NoError(t, h.w.EnqueueAll())
		settle(time.Second)
		claim := h.volume().Claims["a1"]
		must.NotNil(t, claim)
		must.Eq(t, structs.CSIClaimTaken, claim.Step)
		must.StrContains(t, claim.LastError, "garbage collected")
		must.SliceEmpty(t, h.ctrl.callTimes())

		// The node's unpublish, when it comes, finishes the release.
		h.setStep("a1", structs.CSIClaimNodeDetached)
		settle(time.Second)
		must.MapEmpty(t, h.volume().Claims)
		must.SliceLen(t, 1, h.ctrl.callTimes())
	})
}

func TestWatcher_ResumesUnfinishedClaimsWhenItStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Several claims of one volume on one node: a multi-writer volume.
		h := newHarness(t, true, nil)
		vol := h.volume().Copy()
		vol.RequestedCapabilities[0].AccessMode = structs.CSIVolumeAccessModeMultiNodeMultiWriter
		must.NoError(t, h.store.UpsertCSIVolumes(h.writer.nextIndex(), []*structs.CSIVolume{vol}))
		for _, id := range []string{"a1", "a2", "a3"} {
			h.place(id, structs.CSIClaimTaken)
		}
		// A previous leader's progress, in Raft.
		h.setStep("a1", structs.CSIClaimNodeDetached)
		h.setStep("a2", structs.CSIClaimControllerDetached)
		h.run()
		settle(time.Second)

		v := h.volume()
		must.MapLen(t, 1, v.Claims)
		must.MapContainsKey(t, v.Claims, "a3")
		must.NotNil(t, h.pastClaim("a1"))
		must.NotNil(t, h.pastClaim("a2"))
		must.SliceEmpty(t, h.ctrl.callTimes(), must.Sprint("a3 still uses the volume on the node: no controller unpublish"))
	})
}

func TestWatcher_ReleaseNamedClaimsAndKick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, true, nil)
		vol := h.volume().Copy()
		vol.RequestedCapabilities[0].AccessMode = structs.CSIVolumeAccessModeMultiNodeMultiWriter
		must.NoError(t, h.store.UpsertCSIVolumes(h.writer.nextIndex(), []*structs.CSIVolume{vol}))
		h.place("a1", structs.CSIClaimNodeDetached)
		h.place("a2", structs.CSIClaimControllerDetached)
		h.ctrl.nextErr = []error{errors.New("boom")}
		ctx := context.Background()

		// Only the named claim; the watcher is not running.
		must.NoError(t, h.w.Release(ctx, "default", hVol, ReleaseOptions{AllocIDs: []string{"a1"}}))
		v := h.volume()
		must.MapLen(t, 2, v.Claims)
		must.Eq(t, 1, v.Claims["a1"].Attempts)
		must.Eq(t, structs.CSIClaimControllerDetached, v.Claims["a2"].Step)

		// Within the backoff nothing is called again...
		must.NoError(t, h.w.Release(ctx, "default", hVol, ReleaseOptions{AllocIDs: []string{"a1"}}))
		must.SliceLen(t, 1, h.ctrl.callTimes())
		// ...unless asked to.
		must.NoError(t, h.w.Release(ctx, "default", hVol, ReleaseOptions{AllocIDs: []string{"a1"}, IgnoreBackoff: true}))
		must.SliceLen(t, 2, h.ctrl.callTimes())
		v = h.volume()
		must.MapLen(t, 1, v.Claims)
		must.MapContainsKey(t, v.Claims, "a2")

		must.NoError(t, h.w.Release(ctx, "default", hVol, ReleaseOptions{}))
		must.MapEmpty(t, h.volume().Claims)
		// A volume that is gone, or has no claims, is done.
		must.NoError(t, h.w.Release(ctx, "default", hVol, ReleaseOptions{}))
		must.NoError(t, h.w.Release(ctx, "default", "nope", ReleaseOptions{}))
	})
}

func TestWatcher_RetriesFailedWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, false, nil)
		h.place("a1", structs.CSIClaimNodeDetached)
		h.writer.mu.Lock()
		h.writer.nextErr = []error{errors.New("not the leader"), errors.New("not the leader")}
		h.writer.mu.Unlock()
		h.run()
		synctest.Wait()
		must.MapLen(t, 1, h.volume().Claims)
		settle(10 * time.Second)
		must.MapEmpty(t, h.volume().Claims)
	})
}

func TestWatcher_ScanCountsUnfinishedClaims(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, false, nil)
		vol := h.volume().Copy()
		vol.RequestedCapabilities[0].AccessMode = structs.CSIVolumeAccessModeMultiNodeMultiWriter
		must.NoError(t, h.store.UpsertCSIVolumes(h.writer.nextIndex(), []*structs.CSIVolume{vol}))
		h.place("busy", structs.CSIClaimTaken)
		h.place("stopped", structs.CSIClaimTaken)
		h.clientUpdate("stopped", structs.AllocClientStatusComplete, false)

		sc := &scanner{}
		g, err := h.w.scan(sc, true)
		must.NoError(t, err)
		must.Eq(t, gauges{backlog: 1}, g)
		must.Eq(t, 1, h.w.queue.Len())

		time.Sleep(time.Minute)
		g, err = h.w.scan(sc, false)
		must.NoError(t, err)
		must.Eq(t, gauges{backlog: 1, oldest: time.Minute}, g)
	})
}

// fakeDetacher is a NodeDetacher with scripted answers.
type fakeDetacher struct {
	// mu guards everything below.
	mu      sync.Mutex
	nextErr []error
	calls   []time.Time
}

func (f *fakeDetacher) NodeDetach(ctx context.Context, vol *structs.CSIVolume, claim *structs.CSIVolumeClaim) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, time.Now())
	if len(f.nextErr) > 0 {
		err := f.nextErr[0]
		f.nextErr = f.nextErr[1:]
		return err
	}
	return nil
}

func (f *fakeDetacher) callTimes() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.calls...)
}

// TestWatcher_AsksTheClientOfAGoneAllocToUnpublish: an alloc garbage
// collected before its client unpublished (the client lost it) is
// unpublished at the servers' request; the client refusing (a task still
// runs) is retried with backoff and recorded; then the usual controller
// unpublish frees the claim.
func TestWatcher_AsksTheClientOfAGoneAllocToUnpublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		det := &fakeDetacher{nextErr: []error{errors.New("alloc a1 still runs on node n1")}}
		h := newHarness(t, true, func(c *Config) { c.NodeDetacher = det })
		h.place("a1", structs.CSIClaimTaken)
		h.run()
		h.clientUpdate("a1", structs.AllocClientStatusComplete, false)
		must.NoError(t, h.store.DeleteAllocs(h.writer.nextIndex(), []string{"a1"}))
		// Past the watcher's scan interval (50ms), short of the first
		// retry's backoff (at least half the 1s base).
		settle(100 * time.Millisecond)

		claim := h.volume().Claims["a1"]
		must.NotNil(t, claim)
		must.Eq(t, structs.CSIClaimTaken, claim.Step, must.Sprint("freed although the client refused"))
		must.Eq(t, 1, claim.Attempts)
		must.StrContains(t, claim.LastError, "still runs")
		must.SliceEmpty(t, h.ctrl.callTimes(), must.Sprint("controller unpublish before the node side was done"))

		settle(2 * time.Second) // past the first backoff (1s base)
		must.MapEmpty(t, h.volume().Claims)
		past := h.pastClaim("a1")
		must.NotNil(t, past)
		must.Eq(t, claims.ReasonServerDetach, past.ReleaseReason)
		calls := det.callTimes()
		must.SliceLen(t, 2, calls)
		must.True(t, calls[1].Sub(calls[0]) >= 500*time.Millisecond, must.Sprint("retried without backoff"))
		must.SliceLen(t, 1, h.ctrl.callTimes())
	})
}

// TestWatcher_ShorterGraceAsksTheClientSooner: Config.NodeDetachGrace
// (the server's CSINodeDetachGrace; the simulator shortens it) is how long
// a stopped alloc's client gets to unpublish by itself; past it, the
// watcher asks the client, and no earlier.
func TestWatcher_ShorterGraceAsksTheClientSooner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		det := &fakeDetacher{}
		h := newHarness(t, false, func(c *Config) {
			c.NodeDetacher = det
			c.NodeDetachGrace = 3 * time.Second
		})
		h.place("a1", structs.CSIClaimTaken)
		h.run()
		stopped := time.Now()
		h.clientUpdate("a1", structs.AllocClientStatusComplete, false)
		settle(2 * time.Second)
		must.Eq(t, structs.CSIClaimTaken, h.volume().Claims["a1"].Step)
		must.SliceEmpty(t, det.callTimes(), must.Sprint("asked the client inside the grace"))

		settle(2 * time.Second)
		calls := det.callTimes()
		must.SliceLen(t, 1, calls)
		must.True(t, calls[0].Sub(stopped) >= 3*time.Second, must.Sprint("asked before the grace ended"))
		must.MapEmpty(t, h.volume().Claims)
		must.Eq(t, claims.ReasonServerDetach, h.pastClaim("a1").ReleaseReason)
	})
}

// Scans space out with their cost, so that a leader with many claimed
// volumes does not spend its CPU rescanning them while claims churn.
func TestScanGap(t *testing.T) {
	must.Eq(t, minScanInterval, scanGap(0))
	must.Eq(t, minScanInterval, scanGap(minScanInterval/scanCostFactor))
	must.Eq(t, 400*time.Millisecond, scanGap(40*time.Millisecond))
}

// Before each ControllerUnpublish the watcher writes the call's deadline
// on the claim (UnpublishUntil), and the call ends by it: a new leader
// reads it from state. A call whose answer never came (the node session
// broke) leaves it there; the claim is then not freed until it, plus the
// clock skew, passed, even after a later call succeeded, and
// claims.UnpublishHold keeps a publish of the volume to the node waiting
// meanwhile (seed 4060).
func TestWatcher_AnAbandonedUnpublishKeepsItsDeadlineInState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, true, nil) // ControllerTimeout 10s
		h.place("a1", structs.CSIClaimNodeDetached)
		h.clientUpdate("a1", structs.AllocClientStatusComplete, false)
		var (
			mu        sync.Mutex
			deadlines []time.Time // each call's ctx deadline
			stored    []int64     // the claim's UnpublishUntil in state during each call
		)
		h.ctrl.hook = func(ctx context.Context, n int, claim *structs.CSIVolumeClaim) error {
			v, err := h.store.CSIVolumeByID(nil, "default", hVol)
			if err != nil || v == nil || v.Claims["a1"] == nil {
				return fmt.Errorf("reading the claim during the call: %v", err)
			}
			d, _ := ctx.Deadline()
			mu.Lock()
			deadlines, stored = append(deadlines, d), append(stored, v.Claims["a1"].UnpublishUntil)
			mu.Unlock()
			if n == 1 {
				return fmt.Errorf("calling CSIController.Unpublish: the node session broke (EOF): %w", claims.ErrMayStillRun)
			}
			return nil
		}
		start := time.Now()
		h.run()

		synctest.Wait()
		claim := h.volume().Claims["a1"]
		must.Eq(t, structs.CSIClaimNodeDetached, claim.Step)
		must.Eq(t, 1, claim.Attempts)
		first := start.Add(10 * time.Second)
		must.Eq(t, first.UnixNano(), claim.UnpublishUntil, must.Sprint("an unanswered call keeps its deadline"))
		mu.Lock()
		must.Eq(t, []time.Time{first}, deadlines, must.Sprint("the call ends at the deadline in state"))
		must.Eq(t, []int64{first.UnixNano()}, stored, must.Sprint("the deadline is in state before the call"))
		mu.Unlock()

		// The retry succeeds: the volume is detached, but the first call may
		// still land until its deadline plus the clock skew.
		settle(2 * time.Second)
		must.SliceLen(t, 2, h.ctrl.callTimes())
		claim = h.volume().Claims["a1"]
		must.NotNil(t, claim, must.Sprint("freed while the first call may still land"))
		must.Eq(t, structs.CSIClaimControllerDetached, claim.Step)
		must.Eq(t, first.UnixNano(), claim.UnpublishUntil)
		must.StrContains(t, claim.LastError, "may still be running")
		mu.Lock()
		must.LessEq(t, stored[1], deadlines[1].UnixNano(), must.Sprint("the retry's deadline is in state too"))
		mu.Unlock()
		holder, until := claims.UnpublishHold(h.volume(), "ext-1", time.Now())
		must.NotNil(t, holder)
		must.Eq(t, first.Add(claims.ClockSkew), until)

		settle(time.Until(until) - time.Millisecond)
		must.MapNotEmpty(t, h.volume().Claims)
		settle(2 * time.Millisecond)
		must.MapEmpty(t, h.volume().Claims)
		must.Eq(t, structs.CSIClaimFreed, h.pastClaim("a1").Step)
		must.SliceLen(t, 2, h.ctrl.callTimes())
	})
}

// A call that was answered is over, failed or not: it holds nothing, so
// the claim is freed as soon as a retry succeeds.
func TestWatcher_AnAnsweredUnpublishHoldsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, true, nil)
		h.place("a1", structs.CSIClaimNodeDetached)
		h.clientUpdate("a1", structs.AllocClientStatusComplete, false)
		h.ctrl.nextErr = []error{errors.New("rpc error: code = Unavailable")}
		h.run()

		synctest.Wait()
		claim := h.volume().Claims["a1"]
		must.Eq(t, 1, claim.Attempts)
		must.Eq(t, int64(0), claim.UnpublishUntil, must.Sprint("the answered call's deadline is dropped"))
		settle(time.Second)
		must.MapEmpty(t, h.volume().Claims)
		past := h.pastClaim("a1")
		must.Eq(t, int64(0), past.UnpublishUntil)
	})
}

// A deadline the client's Unpublish wrote with NodeDetached
// (UnpublishDeadline) serves the call without a write of the watcher's
// own, so that release takes the two entries it took before deadlines
// were persisted; a call under it that is never answered keeps it, as
// under the watcher's own. Another watcher (a new leader) did not issue
// it, and writes its own before calling.
func TestWatcher_AnIssuedDeadlineSparesTheWriteBeforeTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, true, nil) // ControllerTimeout 10s
		shared := h.volume().Copy()   // three claims at once on the node
		shared.RequestedCapabilities[0].AccessMode = structs.CSIVolumeAccessModeMultiNodeMultiWriter
		must.NoError(t, h.store.UpsertCSIVolumes(h.writer.nextIndex(), []*structs.CSIVolume{shared}))
		var (
			mu        sync.Mutex
			deadlines []time.Time
		)
		h.ctrl.hook = func(ctx context.Context, n int, claim *structs.CSIVolumeClaim) error {
			d, _ := ctx.Deadline()
			mu.Lock()
			deadlines = append(deadlines, d)
			mu.Unlock()
			if claim.AllocID == "a2" {
				return fmt.Errorf("the node session broke: %w", claims.ErrMayStillRun)
			}
			return nil
		}
		// As the Unpublish endpoint does: NodeDetached and the deadline in
		// one entry, then a pass.
		nodeDetached := func(w *Watcher, allocID string) int64 {
			c := h.volume().Claims[allocID].Copy()
			c.Step = structs.CSIClaimNodeDetached
			c.UnpublishUntil = w.UnpublishDeadline("default", hVol, c)
			must.NoError(t, h.store.UpdateCSIVolumeClaims(h.writer.nextIndex(), []*structs.CSIVolumeClaimUpdate{{
				Namespace: "default", VolumeID: hVol, Claim: c,
			}}, time.Now().UnixNano()))
			return c.UnpublishUntil
		}
		writes := func() int {
			h.writer.mu.Lock()
			defer h.writer.mu.Unlock()
			return h.writer.writes
		}

		h.place("a1", structs.CSIClaimTaken)
		until := nodeDetached(h.w, "a1")
		must.Eq(t, time.Now().Add(10*time.Second).UnixNano(), until)
		before := writes()
		must.NoError(t, h.w.Release(t.Context(), "default", hVol, ReleaseOptions{AllocIDs: []string{"a1"}}))
		must.Eq(t, 1, writes()-before, must.Sprint("one entry: controller-detached and freed"))
		must.Nil(t, h.volume().Claims["a1"])
		mu.Lock()
		must.Eq(t, []time.Time{time.Unix(0, until)}, deadlines, must.Sprint("the call ends at the deadline written"))
		mu.Unlock()

		h.place("a2", structs.CSIClaimTaken)
		until = nodeDetached(h.w, "a2")
		before = writes()
		must.NoError(t, h.w.Release(t.Context(), "default", hVol, ReleaseOptions{AllocIDs: []string{"a2"}}))
		must.Eq(t, 1, writes()-before, must.Sprint("one entry: the failure"))
		c := h.volume().Claims["a2"]
		must.Eq(t, structs.CSIClaimNodeDetached, c.Step)
		must.Eq(t, until, c.UnpublishUntil, must.Sprint("an unanswered call keeps the deadline it ran under"))

		// A deadline issued by another watcher is one whose calls this one
		// cannot know: it writes its own first, and keeps the other's.
		h.place("a3", structs.CSIClaimTaken)
		other := New(h.w.cfg)
		until = nodeDetached(other, "a3")
		settle(time.Second)
		before = writes()
		must.NoError(t, h.w.Release(t.Context(), "default", hVol, ReleaseOptions{AllocIDs: []string{"a3"}}))
		must.Eq(t, 2, writes()-before, must.Sprint("its deadline first, then controller-detached"))
		c = h.volume().Claims["a3"]
		must.Eq(t, structs.CSIClaimControllerDetached, c.Step)
		must.Eq(t, until, c.UnpublishUntil)
	})
}

// A caller that gives up waiting for a volume's lock is told who holds
// it and for how long, and the error is still the context's; once the
// holder unlocks (twice is safe), the next caller takes it and becomes
// the one named.
func TestWatcher_LockTimeoutNamesTheHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := New(Config{})
		unlock, err := w.Lock(t.Context(), "default", "db", "claiming volume \"db\" for alloc a1")
		must.NoError(t, err)

		time.Sleep(3 * time.Second)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		_, err = w.Lock(ctx, "default", "db", "unpublishing volume \"db\" for alloc a2")
		must.ErrorIs(t, err, context.DeadlineExceeded)
		must.ErrorContains(t, err, "held for 5s by claiming volume \"db\" for alloc a1")

		unlock()
		unlock()
		next, err := w.Lock(t.Context(), "default", "db", "the next")
		must.NoError(t, err)
		defer next()
		ctx2, cancel2 := context.WithTimeout(t.Context(), time.Second)
		defer cancel2()
		_, err = w.Lock(ctx2, "default", "db", "another")
		must.ErrorContains(t, err, "by the next")
	})
}
