package state

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

func TestCSIClaims_HistoryRecordsEachTransition(t *testing.T) {
	s := testStore(t)
	must.NoError(t, s.UpsertCSIVolumes(1, []*structs.CSIVolume{mockVolume("default", "data", "ebs")}))
	set := func(index uint64, ts int64, c *structs.CSIVolumeClaim) {
		t.Helper()
		must.NoError(t, s.UpdateCSIVolumeClaims(index, []*structs.CSIVolumeClaimUpdate{claimUpdate("default", "data", c)}, ts))
	}

	set(2, 100, mockClaim("a1", "n1", structs.CSIClaimReserved))
	set(3, 200, mockClaim("a1", "n1", structs.CSIClaimTaken))
	set(4, 250, mockClaim("a1", "n1", structs.CSIClaimTaken)) // no change: no entry
	set(5, 300, &structs.CSIVolumeClaim{AllocID: "a1", Step: structs.CSIClaimNodeDetached})
	failed := &structs.CSIVolumeClaim{AllocID: "a1", Step: structs.CSIClaimNodeDetached, LastError: "controller unpublish: unavailable", Attempts: 1}
	set(6, 400, failed)
	// A writer sending a history of its own cannot rewrite the timeline.
	forged := mockClaim("a1", "n1", structs.CSIClaimControllerDetached)
	forged.History = []structs.CSIClaimTransition{{To: structs.CSIClaimFreed}}
	set(7, 500, forged)

	h := claimVolume(t, s).Claims["a1"].History
	must.Eq(t, []structs.CSIClaimTransition{
		{From: "", To: structs.CSIClaimReserved, Time: 100, Index: 2},
		{From: structs.CSIClaimReserved, To: structs.CSIClaimTaken, Time: 200, Index: 3},
		{From: structs.CSIClaimTaken, To: structs.CSIClaimNodeDetached, Time: 300, Index: 5},
		{From: structs.CSIClaimNodeDetached, To: structs.CSIClaimNodeDetached, Time: 400, Index: 6,
			Error: "controller unpublish: unavailable", Attempts: 1},
		{From: structs.CSIClaimNodeDetached, To: structs.CSIClaimControllerDetached, Time: 500, Index: 7},
	}, h)

	// Freed: the past claim keeps its timeline, ending at freed.
	set(8, 600, mockClaim("a1", "n1", structs.CSIClaimFreed))
	v := claimVolume(t, s)
	past := v.PastClaims[len(v.PastClaims)-1]
	must.Len(t, 6, past.History)
	must.Eq(t, structs.CSIClaimFreed, past.History[5].To)
	// The stored earlier entries are untouched by the append.
	must.Len(t, 5, h)
}

func TestCSIClaims_HistoryIsCapped(t *testing.T) {
	s := testStore(t)
	must.NoError(t, s.UpsertCSIVolumes(1, []*structs.CSIVolume{mockVolume("default", "data", "ebs")}))
	must.NoError(t, s.UpdateCSIVolumeClaims(2, []*structs.CSIVolumeClaimUpdate{
		claimUpdate("default", "data", mockClaim("a1", "n1", structs.CSIClaimTaken))}, 1))
	for i := 1; i <= 40; i++ {
		c := &structs.CSIVolumeClaim{AllocID: "a1", Step: structs.CSIClaimNodeDetached, LastError: "unavailable", Attempts: i}
		must.NoError(t, s.UpdateCSIVolumeClaims(uint64(2+i), []*structs.CSIVolumeClaimUpdate{claimUpdate("default", "data", c)}, int64(i)))
	}
	h := claimVolume(t, s).Claims["a1"].History
	must.Len(t, structs.MaxClaimHistory, h)
	must.Eq(t, 40, h[len(h)-1].Attempts) // the newest kept
	must.Eq(t, 40-structs.MaxClaimHistory+1, h[0].Attempts)
}
