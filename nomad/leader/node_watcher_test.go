package leader

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil"
)

func watchedNode(id string) *structs.Node {
	return &structs.Node{
		ID: id, Datacenter: "dc1", Status: structs.NodeStatusReady, SchedulingEligibility: structs.NodeSchedulingEligible,
		NodeResources: &structs.NodeResources{CPU: 1000, MemoryMB: 1000},
		Drivers:       map[string]*structs.DriverInfo{"exec": {Detected: true, Healthy: true}},
	}
}

func TestDiffNodes(t *testing.T) {
	ready := watchedNode("a")
	edit := func(edit func(n *structs.Node)) *structs.Node {
		n := ready.Copy()
		edit(n)
		return n
	}
	initializing := edit(func(n *structs.Node) { n.Status = structs.NodeStatusInit })
	cases := []struct {
		name      string
		prev, cur *structs.Node
		want      nodeChanges
	}{
		{"unchanged", ready, ready, nodeChanges{}},
		{"new ready node", nil, ready, nodeChanges{schedulable: []string{"a"}, capacityGrew: true}},
		{"new initializing node", nil, initializing, nodeChanges{}},
		{"became ready", initializing, ready, nodeChanges{schedulable: []string{"a"}, capacityGrew: true}},
		{"went down", ready, edit(func(n *structs.Node) { n.Status = structs.NodeStatusDown }), nodeChanges{}},
		{"became ineligible", ready, edit(func(n *structs.Node) { n.SchedulingEligibility = structs.NodeSchedulingIneligible }), nodeChanges{}},
		{"drain cleared, eligible", edit(func(n *structs.Node) { n.DrainStrategy = &structs.DrainStrategy{} }), ready,
			nodeChanges{schedulable: []string{"a"}, capacityGrew: true}},
		{"new driver", ready, edit(func(n *structs.Node) { n.Drivers["raw_exec"] = &structs.DriverInfo{Detected: true, Healthy: true} }),
			nodeChanges{schedulable: []string{"a"}, capacityGrew: true}},
		{"driver health text only", ready, edit(func(n *structs.Node) { n.Drivers["exec"].HealthDescription = "fine" }), nodeChanges{}},
		{"plugin became healthy", edit(func(n *structs.Node) {
			n.CSINodePlugins = map[string]*structs.CSIInfo{"p": {PluginID: "p"}}
		}), edit(func(n *structs.Node) {
			n.CSINodePlugins = map[string]*structs.CSIInfo{"p": {PluginID: "p", Healthy: true}}
		}), nodeChanges{schedulable: []string{"a"}, capacityGrew: true}},
		{"status text only", ready, edit(func(n *structs.Node) { n.StatusDescription = "hello" }), nodeChanges{}},
		{"deregistered", ready, nil, nodeChanges{removed: []string{"a"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			prev, cur := map[string]*structs.Node{}, map[string]*structs.Node{}
			if tc.prev != nil {
				prev["a"] = tc.prev
			}
			if tc.cur != nil {
				cur["a"] = tc.cur
			}
			must.Eq(t, tc.want, diffNodes(prev, cur))
		})
	}
}

// flakyRaft is storeRaft that fails the next Apply when fail is set.
type flakyRaft struct {
	*storeRaft
	fail bool
}

func (r *flakyRaft) Apply(t structs.MessageType, msg any) (uint64, error) {
	if r.fail {
		r.fail = false
		return 0, errors.New("injected: no leader")
	}
	return r.storeRaft.Apply(t, msg)
}

// nodeWatchStore is K ready nodes, a system job, and a service job's
// alloc on n0003.
func nodeWatchStore(t *testing.T, k int) (*state.StateStore, *flakyRaft) {
	t.Helper()
	store, err := state.NewStateStore(nil)
	must.NoError(t, err)
	r := &flakyRaft{storeRaft: &storeRaft{store: store}}
	for i := range k {
		must.NoError(t, store.UpsertNode(r.next(), watchedNode(fmt.Sprintf("n%04d", i))))
	}
	sys := &structs.Job{ID: "sys", Name: "sys", Namespace: "default", Type: structs.JobTypeSystem, Priority: 50}
	svc := &structs.Job{ID: "svc", Name: "svc", Namespace: "default", Type: structs.JobTypeService, Priority: 50}
	must.NoError(t, store.UpsertJob(r.next(), sys))
	must.NoError(t, store.UpsertJob(r.next(), svc))
	alloc := &structs.Allocation{ID: "a1", Namespace: "default", JobID: "svc", Job: svc, NodeID: "n0003", TaskGroup: "web",
		DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusRunning}
	must.NoError(t, store.UpsertPlanResults(r.next(), &structs.ApplyPlanResultsRequest{AllocsUpdated: []*structs.Allocation{alloc}}))
	return store, r
}

// nodeEvals lists "job@node" for the node-update evals in the store.
func nodeEvals(t *testing.T, store *state.StateStore) []string {
	t.Helper()
	iter, err := store.Evals(nil, structs.AllNamespaces)
	must.NoError(t, err)
	var out []string
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		if e := raw.(*structs.Evaluation); e.TriggeredBy == structs.EvalTriggerNodeUpdate {
			out = append(out, e.JobID+"@"+e.NodeID)
		}
	}
	slices.Sort(out)
	return out
}

// TestNodePass_ReadsOnlyWhatChanged (issue 20): after its first pass the
// node watcher reads the nodes written since its last pass, not all of
// them, and still acts on every change: a fingerprint change, a node
// going down, a new node, a deletion (which alone rereads the table), and
// a change whose reaction failed once.
func TestNodePass_ReadsOnlyWhatChanged(t *testing.T) {
	const k = 200
	store, r := nodeWatchStore(t, k)
	sc := NewTerm(Config{State: func() *state.StateStore { return store }, Raft: r,
		HeartbeatTTL: time.Minute, HeartbeatGrace: time.Minute})
	sc.readStart()
	s := sc.srv
	view, err := s.nodePass(sc, nil)
	must.NoError(t, err)
	must.Eq(t, k, s.nodesRead.Load(), must.Sprint("the first pass reads every node"))
	must.MapLen(t, k, view.nodes)
	_, tracked := sc.HeartbeatDeadline("n0100")
	must.True(t, tracked)
	must.SliceEmpty(t, nodeEvals(t, store))

	pass := func(wantRead uint64) {
		t.Helper()
		before := s.nodesRead.Load()
		next, err := s.nodePass(sc, view)
		must.NoError(t, err)
		must.Eq(t, wantRead, s.nodesRead.Load()-before, must.Sprint("nodes read by this pass"))
		view = next
	}

	// A fingerprint change: one node read, the system job evaluated on it.
	n := watchedNode("n0007")
	n.Drivers["raw_exec"] = &structs.DriverInfo{Detected: true, Healthy: true}
	must.NoError(t, store.UpsertNode(r.next(), n))
	pass(1)
	must.Eq(t, []string{"sys@n0007"}, nodeEvals(t, store))

	// Nothing written: nothing read.
	pass(0)

	// A node goes down: its heartbeat deadline goes.
	must.NoError(t, store.UpdateNodeStatus(r.next(), "n0009", structs.NodeStatusDown, "missed heartbeats", 1))
	pass(1)
	_, tracked = sc.HeartbeatDeadline("n0009")
	must.False(t, tracked)
	must.Eq(t, structs.NodeStatusDown, view.nodes["n0009"].Status)

	// A new node: tracked, and the system job evaluated on it.
	must.NoError(t, store.UpsertNode(r.next(), watchedNode("new")))
	pass(1)
	_, tracked = sc.HeartbeatDeadline("new")
	must.True(t, tracked)
	must.Eq(t, []string{"sys@n0007", "sys@new"}, nodeEvals(t, store))

	// The reaction to a change fails: the pass is retried from the same
	// view and the change is still seen.
	n = watchedNode("n0011")
	n.Attributes = map[string]string{"kernel.name": "linux"}
	must.NoError(t, store.UpsertNode(r.next(), n))
	r.fail = true
	_, err = s.nodePass(sc, view)
	must.Error(t, err)
	pass(1)
	must.Eq(t, []string{"sys@n0007", "sys@n0011", "sys@new"}, nodeEvals(t, store))

	// A deletion leaves no row to find by index: that pass reads every
	// node, and the deleted node's live alloc gets its job evaluated.
	must.NoError(t, store.DeleteNode(r.next(), []string{"n0003"}))
	pass(k) // k nodes + "new" - n0003
	must.Eq(t, []string{"svc@n0003", "sys@n0007", "sys@n0011", "sys@new"}, nodeEvals(t, store))
	_, tracked = sc.HeartbeatDeadline("n0003")
	must.False(t, tracked)
	// And the next change is read alone again.
	must.NoError(t, store.UpdateNodeStatus(r.next(), "n0009", structs.NodeStatusReady, "", 2))
	pass(1)
	_, tracked = sc.HeartbeatDeadline("n0009")
	must.True(t, tracked)
}

// TestWatchNodes_LoopReadsOnlyWhatChanged runs the watcher's loop: a node
// going down and one registering are handled, and reading them cost two
// node reads, not two of the table.
func TestWatchNodes_LoopReadsOnlyWhatChanged(t *testing.T) {
	const k = 100
	store, r := nodeWatchStore(t, k)
	sc := NewTerm(Config{State: func() *state.StateStore { return store }, Raft: r,
		HeartbeatTTL: time.Minute, HeartbeatGrace: time.Minute})
	sc.readStart()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { sc.srv.watchNodes(ctx, sc) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	testutil.WaitForResult(t, func() (bool, error) {
		_, ok := sc.HeartbeatDeadline("n0042")
		return ok, fmt.Errorf("the first pass never tracked n0042")
	})
	first := sc.srv.nodesRead.Load()
	must.Eq(t, k, first)

	r.mu.Lock()
	down := r.next()
	r.mu.Unlock()
	must.NoError(t, store.UpdateNodeStatus(down, "n0042", structs.NodeStatusDown, "", 1))
	testutil.WaitForResult(t, func() (bool, error) {
		_, ok := sc.HeartbeatDeadline("n0042")
		return !ok, fmt.Errorf("n0042 is down but keeps its heartbeat deadline")
	})
	r.mu.Lock()
	reg := r.next()
	r.mu.Unlock()
	must.NoError(t, store.UpsertNode(reg, watchedNode("late")))
	testutil.WaitForResult(t, func() (bool, error) {
		_, ok := sc.HeartbeatDeadline("late")
		return ok, fmt.Errorf("the new node was never tracked")
	})
	must.Eq(t, first+2, sc.srv.nodesRead.Load())
}

// BenchmarkNodePass measures one node watcher pass after one node write
// with K nodes (issue 20): "changed" is the pass as it runs now, reading
// the node written; "reread" is what every pass did before, reading and
// diffing every node.
func BenchmarkNodePass(b *testing.B) {
	for _, k := range []int{100, 1000, 5000} {
		for _, kind := range []string{"changed", "reread"} {
			b.Run(fmt.Sprintf("K=%d/%s", k, kind), func(b *testing.B) {
				store, err := state.NewStateStore(nil)
				if err != nil {
					b.Fatal(err)
				}
				r := &storeRaft{store: store}
				for i := range k {
					if err := store.UpsertNode(r.next(), watchedNode(fmt.Sprintf("n%05d", i))); err != nil {
						b.Fatal(err)
					}
				}
				sc := NewTerm(Config{State: func() *state.StateStore { return store }, Raft: r,
					HeartbeatTTL: time.Minute, HeartbeatGrace: time.Minute})
				sc.readStart()
				view, err := sc.srv.nodePass(sc, nil)
				if err != nil {
					b.Fatal(err)
				}
				n := watchedNode("n00000")
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					n = n.Copy()
					n.StatusDescription = fmt.Sprint(i) // a write the watcher reads and ignores
					if err := store.UpsertNode(r.next(), n); err != nil {
						b.Fatal(err)
					}
					switch kind {
					case "changed":
						if view, err = sc.srv.nodePass(sc, view); err != nil {
							b.Fatal(err)
						}
					case "reread":
						snap, err := store.Snapshot()
						if err != nil {
							b.Fatal(err)
						}
						cur, err := readNodes(snap)
						if err != nil {
							b.Fatal(err)
						}
						diffNodes(view.nodes, cur)
						view.nodes = cur
					}
				}
			})
		}
	}
}
