package stream

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-memdb"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

func jobBatch(index uint64, ns, id string) Batch {
	return FromChanges(index, memdb.Changes{{Table: state.TableJobs,
		After: &structs.Job{ID: id, Namespace: ns}}})
}

func next(t *testing.T, s *Subscription) Batch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := s.Next(ctx)
	must.NoError(t, err)
	return b
}

func TestBroker_ResumesAfterAnIndex(t *testing.T) {
	br := NewBroker(8)
	for i := uint64(1); i <= 5; i++ {
		br.Publish(jobBatch(10*i, "default", "j"))
	}
	s := br.Subscribe(Request{Index: 30})
	defer s.Close()
	must.Eq(t, 40, next(t, s).Index)
	must.Eq(t, 50, next(t, s).Index)

	// Index 0: only what is published from now on.
	s0 := br.Subscribe(Request{})
	defer s0.Close()
	br.Publish(jobBatch(60, "default", "j"))
	must.Eq(t, 60, next(t, s0).Index)
	must.Eq(t, 60, next(t, s).Index)
	must.Eq(t, 2, br.Subscribers())

	// An index older than the buffer starts at its oldest batch.
	for i := uint64(7); i <= 20; i++ {
		br.Publish(jobBatch(10*i, "default", "j"))
	}
	old := br.Subscribe(Request{Index: 5})
	defer old.Close()
	must.Eq(t, 130, next(t, old).Index) // 20-8+1 = 13th batch
}

func TestBroker_TopicKeyAndNamespaceFilters(t *testing.T) {
	br := NewBroker(16)
	jobs := br.Subscribe(Request{Topics: map[string][]string{TopicJob: {"web"}}, Namespace: "default"})
	vols := br.Subscribe(Request{Topics: map[string][]string{TopicCSIVolume: nil, TopicClaim: {"a1"}}, Namespace: "*"})
	all := br.Subscribe(Request{Topics: map[string][]string{TopicAll: {"*"}}, Namespace: "prod"})

	br.Publish(jobBatch(1, "default", "db"))  // wanted by no one
	br.Publish(jobBatch(2, "prod", "web"))    // all
	br.Publish(jobBatch(3, "default", "web")) // jobs
	vol := &structs.CSIVolume{ID: "data", Namespace: "prod", PluginID: "ebs",
		Claims: map[string]*structs.CSIVolumeClaim{"a1": {AllocID: "a1", NodeID: "n1", Step: structs.CSIClaimReserved}}}
	br.Publish(FromChanges(4, memdb.Changes{{Table: state.TableCSIVolumes, After: vol}}))
	br.Publish(FromChanges(5, memdb.Changes{{Table: state.TableNodes, After: &structs.Node{ID: "n1"}}}))

	b := next(t, jobs)
	must.Eq(t, 3, b.Index)
	must.Eq(t, "web", b.Events[0].Key)

	b = next(t, vols)
	must.Eq(t, 4, b.Index)
	must.Len(t, 2, b.Events)
	must.Eq(t, TopicCSIVolume, b.Events[0].Topic)
	must.Eq(t, TypeCSIVolumeRegistered, b.Events[0].Type)
	must.Eq(t, TopicClaim, b.Events[1].Topic)
	c := b.Events[1].Payload.(*Claim)
	must.Eq(t, "a1", c.AllocID)
	must.Eq(t, structs.CSIClaimReserved, c.To)

	must.Eq(t, 2, next(t, all).Index)
	b = next(t, all)
	must.Eq(t, 4, b.Index) // the prod volume and its claim
	must.Len(t, 2, b.Events)
	b = next(t, all)
	must.Eq(t, 5, b.Index) // nodes have no namespace: always pass
	must.Eq(t, TypeNodeRegistration, b.Events[0].Type)
}

func TestBroker_SlowConsumerIsDroppedAndPublishNeverWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		br := NewBroker(4)
		slow := br.Subscribe(Request{})
		defer slow.Close()
		// Publishing far more than the buffer holds returns at once: no
		// subscriber is waited for (this would deadlock the bubble if it
		// blocked).
		for i := uint64(1); i <= 100; i++ {
			br.Publish(jobBatch(i, "default", "j"))
		}
		_, err := slow.Next(t.Context())
		must.ErrorIs(t, err, ErrDropped)
		must.Eq(t, 1, br.Drops())

		// A subscriber that keeps up is not dropped, and waits for the
		// next publish without spinning.
		fast := br.Subscribe(Request{Index: 99})
		defer fast.Close()
		must.Eq(t, 100, next(t, fast).Index)
		got := make(chan uint64)
		go func() {
			b, err := fast.Next(t.Context())
			must.NoError(t, err)
			got <- b.Index
		}()
		synctest.Wait() // durably blocked in Next
		br.Publish(jobBatch(101, "default", "j"))
		must.Eq(t, 101, <-got)
		must.Eq(t, 1, br.Drops())
	})
}

func TestBroker_ResetDropsSubscribers(t *testing.T) {
	br := NewBroker(4)
	s := br.Subscribe(Request{})
	defer s.Close()
	br.Publish(jobBatch(1, "default", "j"))
	br.Reset()
	_, err := s.Next(context.Background())
	must.ErrorIs(t, err, ErrDropped)
	// A new subscriber after the reset sees only new batches.
	s2 := br.Subscribe(Request{Index: 0})
	defer s2.Close()
	br.Publish(jobBatch(9, "default", "j"))
	must.Eq(t, 9, next(t, s2).Index)
}

func TestFromChanges_ClaimTransitions(t *testing.T) {
	old := &structs.CSIVolume{ID: "data", Namespace: "default", PluginID: "ebs", Claims: map[string]*structs.CSIVolumeClaim{
		"a1": {AllocID: "a1", NodeID: "n1", Step: structs.CSIClaimTaken},
		"a2": {AllocID: "a2", NodeID: "n2", Step: structs.CSIClaimControllerDetached},
		"a3": {AllocID: "a3", NodeID: "n3", Step: structs.CSIClaimTaken},
	}}
	v := &structs.CSIVolume{ID: "data", Namespace: "default", PluginID: "ebs", Claims: map[string]*structs.CSIVolumeClaim{
		"a1": {AllocID: "a1", NodeID: "n1", Step: structs.CSIClaimNodeDetached, LastError: "unavailable", Attempts: 2},
		"a3": {AllocID: "a3", NodeID: "n3", Step: structs.CSIClaimTaken}, // unchanged: no event
	}, PastClaims: []*structs.CSIVolumeClaim{{AllocID: "a2", NodeID: "n2", Step: structs.CSIClaimFreed}}}
	b := FromChanges(7, memdb.Changes{{Table: state.TableCSIVolumes, Before: old, After: v}})
	must.Len(t, 3, b.Events)
	must.Eq(t, TypeCSIVolumeClaim, b.Events[0].Type)
	c1, c2 := b.Events[1].Payload.(*Claim), b.Events[2].Payload.(*Claim)
	must.Eq(t, Claim{VolumeID: "data", Namespace: "default", PluginID: "ebs", AllocID: "a1", NodeID: "n1",
		From: structs.CSIClaimTaken, To: structs.CSIClaimNodeDetached, Error: "unavailable", Attempts: 2}, *c1)
	must.Eq(t, "a2", c2.AllocID)
	must.Eq(t, structs.CSIClaimControllerDetached, c2.From)
	must.Eq(t, structs.CSIClaimFreed, c2.To)
	for _, e := range b.Events {
		must.Eq(t, 7, e.Index)
	}
}

// TestFromChanges_PluginEventCarriesTheChangedInstances: the store's
// plugin row has no instance maps; its event shows the counts and the
// instances that write set, so a node write's event names that node.
func TestFromChanges_PluginEventCarriesTheChangedInstances(t *testing.T) {
	summary := &structs.CSIPlugin{ID: "ebs", NodesHealthy: 1, NodesExpected: 2}
	in := &structs.CSIPluginInstance{PluginID: "ebs", NodeID: "n2", Node: &structs.CSIInfo{PluginID: "ebs"}}
	b := FromChanges(9, memdb.Changes{
		{Table: state.TableCSIPlugins, After: summary},
		{Table: state.TableCSIPluginInstances, After: in},
	})
	must.Len(t, 1, b.Events)
	p := b.Events[0].Payload.(*structs.CSIPlugin)
	must.Eq(t, map[string]*structs.CSIInfo{"n2": in.Node}, p.Nodes)
	must.Nil(t, p.Controllers)
	must.Eq(t, 2, p.NodesExpected)
	must.Nil(t, summary.Nodes) // the store's row is left alone
}
