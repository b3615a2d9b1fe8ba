package nomad_test

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil/cluster"
)

// reportStats reports as node n does, signed with its secret.
func reportStats(s *cluster.Server, n *structs.Node, samples ...*structs.CSIVolumeStatsSample) error {
	req := &structs.CSIVolumeStatsReportRequest{NodeID: n.ID, Samples: samples}
	req.AuthToken = n.SecretID
	return s.RPC(structs.MethodCSIVolumeReportStats, req, &structs.GenericResponse{})
}

func statsSample(vol string, used int64, cond *structs.CSIVolumeCondition) *structs.CSIVolumeStatsSample {
	return &structs.CSIVolumeStatsSample{Namespace: structs.DefaultNamespace, VolumeID: vol, Stats: &structs.CSIVolumeStats{
		UsedBytes: used, AvailableBytes: 1000 - used, TotalBytes: 1000, UsedInodes: 3, AvailableInodes: 97,
		Condition: cond, SampledAt: 42,
	}}
}

// A node's stats report shows on the volume per node, through a follower
// too (reports and reads go to the leader); a later report replaces the
// node's earlier one, so a volume missing from it loses that node's
// sample; nothing is written to Raft; an unknown node is refused.
func TestCSIVolume_ReportStats(t *testing.T) {
	servers := cluster.NewCluster(t, 3, nil)
	leader := cluster.WaitForLeader(t, servers...)
	f := followers(servers, leader)[0]
	n1 := registerPluginNode(t, f, 1, "hostpath")
	n2 := registerPluginNode(t, f, 2, "hostpath")
	registerVolumes(t, f, "", testVolume("v1", "hostpath"), testVolume("v2", "hostpath"))
	before := getVolume(t, f, "", "v1").ModifyIndex
	idx, err := leader.State().LatestIndex()
	must.NoError(t, err)

	must.NoError(t, reportStats(f, n1, statsSample("v1", 100, nil), statsSample("v2", 7, nil)))
	must.NoError(t, reportStats(f, n2, statsSample("v1", 200, &structs.CSIVolumeCondition{Abnormal: true, Message: "I/O errors"})))
	got := getVolume(t, f, "", "v1")
	must.MapLen(t, 2, got.Stats)
	must.Eq(t, &structs.CSIVolumeStats{NodeID: n1.ID, UsedBytes: 100, AvailableBytes: 900, TotalBytes: 1000,
		UsedInodes: 3, AvailableInodes: 97, SampledAt: 42}, got.Stats[n1.ID])
	must.Eq(t, &structs.CSIVolumeCondition{Abnormal: true, Message: "I/O errors"}, got.Stats[n2.ID].Condition)
	must.Eq(t, before, got.ModifyIndex, must.Sprint("stats do not touch the volume"))
	after, err := leader.State().LatestIndex()
	must.NoError(t, err)
	must.Eq(t, idx, after, must.Sprint("stats are not written to Raft"))

	// Node 1 no longer publishes v1.
	must.NoError(t, reportStats(f, n1, statsSample("v2", 8, nil)))
	got = getVolume(t, f, "", "v1")
	must.MapLen(t, 1, got.Stats)
	must.MapContainsKey(t, got.Stats, n2.ID)
	must.Eq(t, int64(8), getVolume(t, f, "", "v2").Stats[n1.ID].UsedBytes)
	// An empty report clears the node.
	must.NoError(t, reportStats(f, n1))
	must.MapEmpty(t, getVolume(t, f, "", "v2").Stats)

	err = reportStats(f, &structs.Node{ID: "no-such-node"}, statsSample("v1", 1, nil))
	must.ErrorIs(t, err, structs.ErrPermissionDenied, must.Sprint("only a registered node, with its secret, reports"))
	req := &structs.CSIVolumeStatsReportRequest{NodeID: n2.ID, Samples: []*structs.CSIVolumeStatsSample{statsSample("v1", 1, nil)}}
	req.AuthToken = n1.SecretID
	err = f.RPC(structs.MethodCSIVolumeReportStats, req, &structs.GenericResponse{})
	must.ErrorIs(t, err, structs.ErrPermissionDenied, must.Sprint("node 1 cannot report for node 2"))
	must.Eq(t, int64(200), getVolume(t, f, "", "v1").Stats[n2.ID].UsedBytes)
	err = reportStats(f, n1, &structs.CSIVolumeStatsSample{VolumeID: "v1"})
	must.ErrorIs(t, err, structs.ErrInvalid)
}
