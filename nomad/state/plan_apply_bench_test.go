package state

import (
	"fmt"
	"testing"

	"github.com/berth-io/berth/nomad/structs"
)

// BenchmarkUpsertPlanOneAlloc is the K=1 claim's plan as the FSM applies
// it: one new alloc of a registered job, its volume's reservation, and the
// eval that made the plan, against a volume whose past claims are full
// (the bench's one volume after a few cycles).
func BenchmarkUpsertPlanOneAlloc(b *testing.B) {
	s, err := NewStateStore(nil)
	if err != nil {
		b.Fatal(err)
	}
	index := uint64(1)
	next := func() uint64 { index++; return index }
	if err := s.UpsertCSIVolumes(next(), []*structs.CSIVolume{mockVolume("default", "data", "ebs")}); err != nil {
		b.Fatal(err)
	}
	for i := range structs.MaxPastClaims {
		for _, step := range []structs.CSIClaimStep{structs.CSIClaimReserved, structs.CSIClaimFreed} {
			if err := s.UpdateCSIVolumeClaims(next(), []*structs.CSIVolumeClaimUpdate{
				claimUpdate("default", "data", mockClaim(fmt.Sprintf("old-%d", i), "n1", step)),
			}, int64(index)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		jobID := fmt.Sprintf("job-%d", i)
		ev := mockEval("eval-"+jobID, "default", jobID)
		if err := s.RegisterJob(next(), mockJob("default", jobID), 0, ev); err != nil {
			b.Fatal(err)
		}
		job, _ := s.JobByID(nil, "default", jobID)
		allocID := fmt.Sprintf("alloc-%d", i)
		done := ev.Copy()
		done.Status = structs.EvalStatusComplete
		req := &structs.ApplyPlanResultsRequest{
			AllocsUpdated: []*structs.Allocation{mockAlloc(allocID, job, "n1")},
			CSIClaims:     []*structs.CSIVolumeClaimUpdate{claimUpdate("default", "data", mockClaim(allocID, "n1", structs.CSIClaimReserved))},
			Evals:         []*structs.Evaluation{done},
			EvalID:        ev.ID,
			Timestamp:     int64(index),
		}
		at := next()
		b.StartTimer()
		if err := s.UpsertPlanResults(at, req); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := s.UpdateCSIVolumeClaims(next(), []*structs.CSIVolumeClaimUpdate{
			claimUpdate("default", "data", mockClaim(allocID, "n1", structs.CSIClaimFreed)),
		}, int64(index)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
