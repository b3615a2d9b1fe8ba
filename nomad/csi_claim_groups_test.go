package nomad_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil/cluster"
)

func groupClaim(volID, allocID, nodeID string, step structs.CSIClaimStep) *structs.CSIVolumeClaimUpdate {
	return &structs.CSIVolumeClaimUpdate{VolumeID: volID, Claim: &structs.CSIVolumeClaim{
		AllocID: allocID, NodeID: nodeID, Mode: structs.CSIVolumeClaimWrite, Step: step,
		AccessMode:     structs.CSIVolumeAccessModeSingleNodeWriter,
		AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
	}}
}

// Through Raft on a real server, a group commit answers each caller with
// its own result and the index of the one entry that carried them all.
func TestCSIClaimGroups_EachCallerGetsItsOwnResult(t *testing.T) {
	s := csiServer(t, nil, nil)
	joinNode(t, s, csiNode(0, false)) // the plugin the volumes need
	registerVolumes(t, s, "", testVolume("v1", hostpath), testVolume("v2", hostpath))

	res := s.CommitClaimGroupsForTest([][]*structs.CSIVolumeClaimUpdate{
		{groupClaim("v1", "b1", "n1", structs.CSIClaimReserved)},
		{groupClaim("v1", "b2", "n2", structs.CSIClaimReserved)}, // blocked by b1
		{groupClaim("gone", "b3", "n1", structs.CSIClaimReserved)},
		{groupClaim("v2", "b4", "n1", structs.CSIClaimTaken)},
	})
	must.SliceLen(t, 4, res)
	must.NoError(t, res[0].Err)
	must.ErrorIs(t, res[1].Err, structs.ErrNotReady)
	must.ErrorIs(t, res[2].Err, structs.ErrNotFound)
	must.NoError(t, res[3].Err)
	for _, r := range res {
		must.Eq(t, res[0].Index, r.Index)
	}
	// These allocs do not exist, so the volumewatcher may free the claims
	// at once: look for them among the past claims too.
	must.Eq(t, res[0].Index, claimOrPast(t, s, "v1", "b1").CreateIndex)
	must.Eq(t, res[3].Index, claimOrPast(t, s, "v2", "b4").CreateIndex)
	must.Nil(t, claimOrPast(t, s, "v1", "b2"))

	// A lone write goes out as a plain claim entry, with its error. (Not
	// a claim blocked by b1: the watcher may have freed b1 by now, and
	// under make test it had, once.)
	res = s.CommitClaimGroupsForTest([][]*structs.CSIVolumeClaimUpdate{
		{groupClaim("gone", "b5", "n2", structs.CSIClaimReserved)},
	})
	must.ErrorIs(t, res[0].Err, structs.ErrNotFound)
}

// claimOrPast is alloc's claim on volume volID, live or past; nil when it
// never had one.
func claimOrPast(t *testing.T, s *cluster.Server, volID, allocID string) *structs.CSIVolumeClaim {
	t.Helper()
	v, err := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, volID)
	must.NoError(t, err)
	if c := v.Claims[allocID]; c != nil {
		return c
	}
	for _, c := range v.PastClaims {
		if c.AllocID == allocID {
			return c
		}
	}
	return nil
}

// Concurrent writers through the server's group commit each get their
// own answer, whatever entries they shared.
func TestCSIClaimGroups_ConcurrentWriters(t *testing.T) {
	s := csiServer(t, nil, nil)
	joinNode(t, s, csiNode(0, false))
	const n = 40
	var vols []*structs.CSIVolume
	for i := range n {
		vols = append(vols, testVolume(fmt.Sprintf("v%d", i), hostpath))
	}
	registerVolumes(t, s, "", vols...)

	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	for i := range n {
		vol := fmt.Sprintf("v%d", i)
		wg.Go(func() {
			_, errs[2*i] = s.WriteClaimsForTest(groupClaim(vol, fmt.Sprintf("a%d", i), "n1", structs.CSIClaimTaken))
		})
		wg.Go(func() { // refused: a second writer of a single-node-writer volume
			_, errs[2*i+1] = s.WriteClaimsForTest(
				groupClaim(vol, fmt.Sprintf("x%d", i), "n2", structs.CSIClaimTaken),
				groupClaim(vol, fmt.Sprintf("x%d", i), "n2", structs.CSIClaimTaken))
		})
	}
	wg.Wait()
	for i := range n {
		// Exactly one of the two writers of each volume got it, and only
		// its claim is stored (or already freed by the volumewatcher:
		// these allocs do not exist).
		a, x := errs[2*i], errs[2*i+1]
		must.True(t, (a == nil) != (x == nil), must.Sprintf("volume v%d: %v / %v", i, a, x))
		winner, loser := fmt.Sprintf("a%d", i), fmt.Sprintf("x%d", i)
		if a != nil {
			must.ErrorIs(t, a, structs.ErrNotReady)
			winner, loser = loser, winner
		} else {
			must.ErrorIs(t, x, structs.ErrNotReady)
		}
		v, err := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, fmt.Sprintf("v%d", i))
		must.NoError(t, err)
		seen := map[string]bool{}
		for id := range v.Claims {
			seen[id] = true
		}
		for _, c := range v.PastClaims {
			seen[c.AllocID] = true
		}
		must.Eq(t, map[string]bool{winner: true}, seen, must.Sprint(loser, " was refused"))
	}
}
