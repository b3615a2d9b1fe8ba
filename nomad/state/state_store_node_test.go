package state

import (
	"testing"
	"time"

	"github.com/hashicorp/go-memdb"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

func TestNodes_UpsertGetListDelete(t *testing.T) {
	s := testStore(t)
	must.NoError(t, s.UpsertNode(10, mockNode("aaa1")))
	must.NoError(t, s.UpsertNode(11, mockNode("aab2")))
	must.NoError(t, s.UpsertNode(12, mockNode("bbb3")))

	n, err := s.NodeByID(nil, "aab2")
	must.NoError(t, err)
	must.Eq(t, 11, n.CreateIndex)
	must.Eq(t, 11, n.ModifyIndex)
	must.Eq(t, structs.NodeSchedulingEligible, n.SchedulingEligibility)

	bySecret, err := s.NodeBySecretID(nil, "secret-bbb3")
	must.NoError(t, err)
	must.Eq(t, "bbb3", bySecret.ID)
	none, err := s.NodeBySecretID(nil, "")
	must.NoError(t, err)
	must.Nil(t, none)

	iter, err := s.Nodes(nil)
	must.Eq(t, []string{"aaa1", "aab2", "bbb3"}, ids(t, iter, err))
	iter, err = s.NodesByIDPrefix(nil, "aa")
	must.Eq(t, []string{"aaa1", "aab2"}, ids(t, iter, err))

	// Update keeps CreateIndex.
	upd := mockNode("aab2")
	upd.Name = "renamed"
	must.NoError(t, s.UpsertNode(20, upd))
	n, err = s.NodeByID(nil, "aab2")
	must.NoError(t, err)
	must.Eq(t, "renamed", n.Name)
	must.Eq(t, 11, n.CreateIndex)
	must.Eq(t, 20, n.ModifyIndex)
	must.Eq(t, 20, mustIndex(t, s, TableNodes))

	must.NoError(t, s.DeleteNode(21, []string{"aaa1", "bbb3"}))
	iter, err = s.Nodes(nil)
	must.Eq(t, []string{"aab2"}, ids(t, iter, err))
	must.Eq(t, 21, mustIndex(t, s, TableNodes))

	err = s.DeleteNode(22, []string{"aab2", "missing"})
	must.ErrorIs(t, err, structs.ErrNotFound)
	n, _ = s.NodeByID(nil, "aab2")
	must.NotNil(t, n) // all or nothing
}

func TestNodes_NewNodeDefaults(t *testing.T) {
	s := testStore(t)
	n := mockNode("n1")
	n.Status = ""
	must.NoError(t, s.UpsertNode(5, n))
	got, err := s.NodeByID(nil, "n1")
	must.NoError(t, err)
	must.Eq(t, structs.NodeStatusInit, got.Status)
	must.Eq(t, "", n.Status) // the caller's object is untouched

	must.ErrorIs(t, s.UpsertNode(6, &structs.Node{}), structs.ErrInvalid)
}

func TestNodes_ReregisterKeepsDrainAndEligibility(t *testing.T) {
	s := testStore(t)
	must.NoError(t, s.UpsertNode(1, mockNode("n1")))
	must.NoError(t, s.UpdateNodeDrain(2, "n1", &structs.DrainStrategy{Deadline: 60}, false, 777))

	must.NoError(t, s.UpsertNode(3, mockNode("n1"))) // client re-registers
	n, err := s.NodeByID(nil, "n1")
	must.NoError(t, err)
	must.NotNil(t, n.DrainStrategy)
	must.Eq(t, 777, n.DrainStrategy.StartedAt)
	must.Eq(t, structs.NodeSchedulingIneligible, n.SchedulingEligibility)
}

func TestNodes_StatusDrainEligibility(t *testing.T) {
	eval := mockEval("e1", "default", "j1")
	cases := []struct {
		name    string
		write   func(s *StateStore) error
		check   func(t *testing.T, n *structs.Node)
		wantErr *structs.Error
	}{
		{
			name: "status down with eval",
			write: func(s *StateStore) error {
				return s.UpdateNodeStatus(10, "n1", structs.NodeStatusDown, "missed heartbeats", 99, eval)
			},
			check: func(t *testing.T, n *structs.Node) {
				must.Eq(t, structs.NodeStatusDown, n.Status)
				must.Eq(t, "missed heartbeats", n.StatusDescription)
				must.Eq(t, 99, n.StatusUpdatedAt)
			},
		},
		{
			name:    "bad status",
			write:   func(s *StateStore) error { return s.UpdateNodeStatus(10, "n1", "sleeping", "", 1) },
			wantErr: structs.ErrInvalid,
		},
		{
			name:    "unknown node",
			write:   func(s *StateStore) error { return s.UpdateNodeStatus(10, "nope", structs.NodeStatusDown, "", 1) },
			wantErr: structs.ErrNotFound,
		},
		{
			name: "drain makes ineligible",
			write: func(s *StateStore) error {
				return s.UpdateNodeDrain(10, "n1", &structs.DrainStrategy{}, false, 5, eval)
			},
			check: func(t *testing.T, n *structs.Node) {
				must.NotNil(t, n.DrainStrategy)
				must.Eq(t, structs.NodeSchedulingIneligible, n.SchedulingEligibility)
			},
		},
		{
			name: "drain cleared with mark eligible",
			write: func(s *StateStore) error {
				must.NoError(t, s.UpdateNodeDrain(9, "n1", &structs.DrainStrategy{}, false, 5))
				return s.UpdateNodeDrain(10, "n1", nil, true, 6, eval)
			},
			check: func(t *testing.T, n *structs.Node) {
				must.Nil(t, n.DrainStrategy)
				must.Eq(t, structs.NodeSchedulingEligible, n.SchedulingEligibility)
			},
		},
		{
			name: "drain cleared stays ineligible",
			write: func(s *StateStore) error {
				must.NoError(t, s.UpdateNodeDrain(9, "n1", &structs.DrainStrategy{}, false, 5))
				return s.UpdateNodeDrain(10, "n1", nil, false, 6, eval)
			},
			check: func(t *testing.T, n *structs.Node) {
				must.Nil(t, n.DrainStrategy)
				must.Eq(t, structs.NodeSchedulingIneligible, n.SchedulingEligibility)
			},
		},
		{
			name: "ineligible",
			write: func(s *StateStore) error {
				return s.UpdateNodeEligibility(10, "n1", structs.NodeSchedulingIneligible, 5, eval)
			},
			check: func(t *testing.T, n *structs.Node) {
				must.Eq(t, structs.NodeSchedulingIneligible, n.SchedulingEligibility)
			},
		},
		{
			name: "draining node cannot become eligible",
			write: func(s *StateStore) error {
				must.NoError(t, s.UpdateNodeDrain(9, "n1", &structs.DrainStrategy{}, false, 5))
				return s.UpdateNodeEligibility(10, "n1", structs.NodeSchedulingEligible, 6, eval)
			},
			wantErr: structs.ErrInvalid,
		},
		{
			name:    "bad eligibility",
			write:   func(s *StateStore) error { return s.UpdateNodeEligibility(10, "n1", "maybe", 6) },
			wantErr: structs.ErrInvalid,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := testStore(t)
			must.NoError(t, s.UpsertNode(1, mockNode("n1")))
			err := tc.write(s)
			if tc.wantErr != nil {
				must.ErrorIs(t, err, tc.wantErr)
				e, _ := s.EvalByID(nil, "e1")
				must.Nil(t, e) // the eval did not land without its write
				return
			}
			must.NoError(t, err)
			n, err := s.NodeByID(nil, "n1")
			must.NoError(t, err)
			must.Eq(t, 10, n.ModifyIndex)
			must.Eq(t, 1, n.CreateIndex)
			tc.check(t, n)
			e, err := s.EvalByID(nil, "e1")
			must.NoError(t, err)
			must.NotNil(t, e)
			must.Eq(t, 10, e.CreateIndex)
			must.Eq(t, 10, mustIndex(t, s, TableEvals))
			must.Eq(t, 10, mustIndex(t, s, TableNodes))
		})
	}
}

func TestNodes_BatchUpdateStatus(t *testing.T) {
	s := testStore(t)
	must.NoError(t, s.UpsertNode(1, mockNode("n1")))
	must.NoError(t, s.UpsertNode(2, mockNode("n2")))
	err := s.BatchUpdateNodeStatus(3, []*structs.NodeUpdateStatusRequest{
		{NodeID: "n1", Status: structs.NodeStatusDown, Timestamp: 7, Evals: []*structs.Evaluation{mockEval("e1", "default", "j")}},
		{NodeID: "n2", Status: structs.NodeStatusDown, Timestamp: 8},
	}, mockEval("e2", "default", "j"))
	must.NoError(t, err)
	for _, id := range []string{"n1", "n2"} {
		n, _ := s.NodeByID(nil, id)
		must.Eq(t, structs.NodeStatusDown, n.Status)
	}
	evals, err := s.EvalsByJob(nil, "default", "j")
	must.NoError(t, err)
	must.Len(t, 2, evals)

	// One unknown node fails the whole batch.
	err = s.BatchUpdateNodeStatus(4, []*structs.NodeUpdateStatusRequest{
		{NodeID: "n1", Status: structs.NodeStatusReady},
		{NodeID: "gone", Status: structs.NodeStatusReady},
	})
	must.ErrorIs(t, err, structs.ErrNotFound)
	n, _ := s.NodeByID(nil, "n1")
	must.Eq(t, structs.NodeStatusDown, n.Status)
}

func TestNodes_WatchGetAndList(t *testing.T) {
	s := testStore(t)
	must.NoError(t, s.UpsertNode(1, mockNode("n1")))

	wsMissing := memdb.NewWatchSet()
	n, err := s.NodeByID(wsMissing, "n2")
	must.NoError(t, err)
	must.Nil(t, n)
	wsGet := memdb.NewWatchSet()
	_, err = s.NodeByID(wsGet, "n1")
	must.NoError(t, err)
	wsList := memdb.NewWatchSet()
	_, err = s.Nodes(wsList)
	must.NoError(t, err)

	must.NoError(t, s.UpsertNode(2, mockNode("n2")))
	must.True(t, watchFired(wsMissing)) // an insert wakes a get of the missing key
	must.True(t, watchFired(wsList))

	must.NoError(t, s.UpdateNodeStatus(3, "n1", structs.NodeStatusDown, "", 1))
	must.True(t, watchFired(wsGet))
}

// TestDrainingNodes: the drainer's read lists exactly the nodes with a
// drain strategy, as drains are set, kept across a re-registration, and
// cleared.
func TestDrainingNodes(t *testing.T) {
	s := testStore(t)
	for i, id := range []string{"n1", "n2", "n3"} {
		must.NoError(t, s.UpsertNode(uint64(1+i), mockNode(id)))
	}
	draining := func() []string {
		iter, err := s.DrainingNodes(nil)
		return ids(t, iter, err)
	}
	must.SliceEmpty(t, draining())
	must.NoError(t, s.UpdateNodeDrain(10, "n2", &structs.DrainStrategy{Deadline: time.Hour}, false, 1))
	must.NoError(t, s.UpdateNodeDrain(11, "n3", &structs.DrainStrategy{Deadline: time.Hour}, false, 1))
	must.Eq(t, []string{"n2", "n3"}, draining())
	must.NoError(t, s.UpsertNode(12, mockNode("n2"))) // the drain outlives a re-registration
	must.NoError(t, s.UpdateNodeDrain(13, "n3", nil, true, 2))
	must.Eq(t, []string{"n2"}, draining())
}
