package state

import (
	"fmt"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

func claimVolume(t *testing.T, s *StateStore) *structs.CSIVolume {
	t.Helper()
	v, err := s.CSIVolumeByID(nil, "default", "data")
	must.NoError(t, err)
	must.NotNil(t, v)
	return v
}

func TestCSIClaims_Lifecycle(t *testing.T) {
	s := testStore(t)
	must.NoError(t, s.UpsertCSIVolumes(1, []*structs.CSIVolume{mockVolume("default", "data", "ebs")}))
	set := func(index uint64, ts int64, c *structs.CSIVolumeClaim) error {
		return s.UpdateCSIVolumeClaims(index, []*structs.CSIVolumeClaimUpdate{claimUpdate("default", "data", c)}, ts)
	}

	// Reserved with the placement.
	must.NoError(t, set(2, 100, mockClaim("a1", "n1", structs.CSIClaimReserved)))
	v := claimVolume(t, s)
	c := v.Claims["a1"]
	must.Eq(t, structs.CSIClaimReserved, c.Step)
	must.Eq(t, 100, c.CreateTime)
	must.Eq(t, 2, c.CreateIndex)
	must.Eq(t, structs.CSIVolumeAccessModeSingleNodeWriter, v.AccessMode)
	must.Eq(t, structs.CSIVolumeAttachmentModeFilesystem, v.AttachmentMode)
	must.Eq(t, 2, v.ModifyIndex)
	must.Eq(t, 2, mustIndex(t, s, TableCSIVolumes))

	// A second writer elsewhere is refused, naming the claim that blocks it.
	err := set(3, 101, mockClaim("b2", "n2", structs.CSIClaimReserved))
	must.ErrorIs(t, err, structs.ErrNotReady)
	must.StrContains(t, err.Error(), "a1")
	must.StrContains(t, err.Error(), `"data"`)
	_, isCoded := err.(*structs.Error) // returned as is, not wrapped
	must.True(t, isCoded)
	must.MapNotContainsKey(t, claimVolume(t, s).Claims, "b2")
	must.Eq(t, 2, mustIndex(t, s, TableCSIVolumes))

	// Taken: publish context and external node ID arrive.
	taken := mockClaim("a1", "n1", structs.CSIClaimTaken)
	taken.ExternalNodeID = "i-123"
	taken.PublishContext = map[string]string{"device": "/dev/xvdf"}
	must.NoError(t, set(4, 200, taken))
	c = claimVolume(t, s).Claims["a1"]
	must.Eq(t, structs.CSIClaimTaken, c.Step)
	must.Eq(t, 100, c.CreateTime)
	must.Eq(t, 2, c.CreateIndex)
	must.Eq(t, 200, c.ModifyTime)
	must.Eq(t, 4, c.ModifyIndex)

	// Node detached, written with only the alloc ID and step: the claim
	// keeps its identity.
	must.NoError(t, set(5, 300, &structs.CSIVolumeClaim{AllocID: "a1", Step: structs.CSIClaimNodeDetached}))
	c = claimVolume(t, s).Claims["a1"]
	must.Eq(t, structs.CSIClaimNodeDetached, c.Step)
	must.Eq(t, "n1", c.NodeID)
	must.Eq(t, "i-123", c.ExternalNodeID)
	must.Eq(t, "/dev/xvdf", c.PublishContext["device"])
	iter, err := s.CSIVolumesByNodeID(nil, "n1")
	must.Eq(t, []string{"default/data"}, ids(t, iter, err))

	// Still blocking while it is being released.
	must.ErrorIs(t, set(6, 301, mockClaim("b2", "n2", structs.CSIClaimReserved)), structs.ErrNotReady)

	detached := mockClaim("a1", "n1", structs.CSIClaimControllerDetached)
	must.NoError(t, set(7, 400, detached))
	must.Eq(t, structs.CSIClaimControllerDetached, claimVolume(t, s).Claims["a1"].Step)

	// Freed: into PastClaims, modes cleared.
	freed := mockClaim("a1", "n1", structs.CSIClaimFreed)
	must.NoError(t, set(8, 500, freed))
	v = claimVolume(t, s)
	must.MapEmpty(t, v.Claims)
	must.Len(t, 1, v.PastClaims)
	must.Eq(t, structs.CSIClaimFreed, v.PastClaims[0].Step)
	must.Eq(t, 100, v.PastClaims[0].CreateTime)
	must.Eq(t, 500, v.PastClaims[0].ModifyTime)
	must.Eq(t, structs.CSIVolumeAccessModeUnknown, v.AccessMode)
	must.Eq(t, structs.CSIVolumeAttachmentModeUnknown, v.AttachmentMode)

	// A retried release of a freed claim is a no-op, not a resurrection.
	must.NoError(t, set(9, 600, mockClaim("a1", "n1", structs.CSIClaimNodeDetached)))
	must.NoError(t, set(9, 600, mockClaim("a1", "n1", structs.CSIClaimFreed)))
	v = claimVolume(t, s)
	must.MapEmpty(t, v.Claims)
	must.Len(t, 1, v.PastClaims)
	must.Eq(t, 8, v.ModifyIndex)

	// Now the other writer fits.
	must.NoError(t, set(10, 700, mockClaim("b2", "n2", structs.CSIClaimReserved)))
	must.MapContainsKey(t, claimVolume(t, s).Claims, "b2")
}

func TestCSIClaims_ReservationChecks(t *testing.T) {
	cases := []struct {
		name     string
		access   structs.CSIVolumeAccessMode
		existing []*structs.CSIVolumeClaim
		claim    *structs.CSIVolumeClaim
		wantErr  *structs.Error
	}{
		{
			name:   "single-node-writer: first claim",
			access: structs.CSIVolumeAccessModeSingleNodeWriter,
			claim:  mockClaim("a2", "n1", structs.CSIClaimReserved),
		},
		{
			name:     "single-node-writer: second alloc on the same node",
			access:   structs.CSIVolumeAccessModeSingleNodeWriter,
			existing: []*structs.CSIVolumeClaim{mockClaim("a1", "n1", structs.CSIClaimTaken)},
			claim:    mockClaim("a2", "n1", structs.CSIClaimReserved),
			wantErr:  structs.ErrNotReady,
		},
		{
			name:     "take without reservation is checked too",
			access:   structs.CSIVolumeAccessModeSingleNodeWriter,
			existing: []*structs.CSIVolumeClaim{mockClaim("a1", "n1", structs.CSIClaimReserved)},
			claim:    mockClaim("a2", "n2", structs.CSIClaimTaken),
			wantErr:  structs.ErrNotReady,
		},
		{
			name:     "same alloc re-reserving is an update",
			access:   structs.CSIVolumeAccessModeSingleNodeWriter,
			existing: []*structs.CSIVolumeClaim{mockClaim("a1", "n1", structs.CSIClaimReserved)},
			claim:    mockClaim("a1", "n1", structs.CSIClaimReserved),
		},
		{
			name:     "multi-node-multi-writer: many",
			access:   structs.CSIVolumeAccessModeMultiNodeMultiWriter,
			existing: []*structs.CSIVolumeClaim{mockClaim("a1", "n1", structs.CSIClaimTaken)},
			claim:    mockClaim("a2", "n2", structs.CSIClaimReserved),
		},
		{
			name:     "multi-node-single-writer: second writer",
			access:   structs.CSIVolumeAccessModeMultiNodeSingleWriter,
			existing: []*structs.CSIVolumeClaim{mockClaim("a1", "n1", structs.CSIClaimTaken)},
			claim:    mockClaim("a2", "n2", structs.CSIClaimReserved),
			wantErr:  structs.ErrNotReady,
		},
		{
			name:    "unknown step",
			access:  structs.CSIVolumeAccessModeSingleNodeWriter,
			claim:   mockClaim("a1", "n1", "bogus"),
			wantErr: structs.ErrInvalid,
		},
		{
			name:    "claim without alloc",
			access:  structs.CSIVolumeAccessModeSingleNodeWriter,
			claim:   mockClaim("", "n1", structs.CSIClaimReserved),
			wantErr: structs.ErrInvalid,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := testStore(t)
			v := mockVolume("default", "data", "ebs")
			v.RequestedCapabilities[0].AccessMode = tc.access
			must.NoError(t, s.UpsertCSIVolumes(1, []*structs.CSIVolume{v}))
			for i, c := range append(tc.existing, tc.claim) {
				c.AccessMode = tc.access
				err := s.UpdateCSIVolumeClaims(uint64(2+i), []*structs.CSIVolumeClaimUpdate{claimUpdate("default", "data", c)}, 1)
				if i < len(tc.existing) {
					must.NoError(t, err)
					continue
				}
				if tc.wantErr != nil {
					must.ErrorIs(t, err, tc.wantErr)
				} else {
					must.NoError(t, err)
				}
			}
		})
	}
}

func TestCSIClaims_BatchIsAllOrNothing(t *testing.T) {
	s := testStore(t)
	must.NoError(t, s.UpsertCSIVolumes(1, []*structs.CSIVolume{mockVolume("default", "data", "ebs")}))
	// Two reservations of one single-writer volume in one entry: the
	// second sees the first and the whole write fails.
	err := s.UpdateCSIVolumeClaims(2, []*structs.CSIVolumeClaimUpdate{
		claimUpdate("default", "data", mockClaim("a1", "n1", structs.CSIClaimReserved)),
		claimUpdate("default", "data", mockClaim("a2", "n2", structs.CSIClaimReserved)),
	}, 1)
	must.ErrorIs(t, err, structs.ErrNotReady)
	must.MapEmpty(t, claimVolume(t, s).Claims)

	// An unknown volume fails the write, naming it.
	err = s.UpdateCSIVolumeClaims(3, []*structs.CSIVolumeClaimUpdate{
		claimUpdate("default", "data", mockClaim("a1", "n1", structs.CSIClaimReserved)),
		claimUpdate("default", "missing", mockClaim("a1", "n1", structs.CSIClaimReserved)),
	}, 1)
	must.ErrorIs(t, err, structs.ErrNotFound)
	must.StrContains(t, err.Error(), `"missing"`)
	must.MapEmpty(t, claimVolume(t, s).Claims)

	// A conflicting reservation in a plan fails the placement with it.
	job := mockJob("default", "web")
	must.NoError(t, s.UpdateCSIVolumeClaims(4, []*structs.CSIVolumeClaimUpdate{
		claimUpdate("default", "data", mockClaim("a1", "n1", structs.CSIClaimTaken)),
	}, 1))
	err = s.UpsertPlanResults(5, &structs.ApplyPlanResultsRequest{
		AllocsUpdated: []*structs.Allocation{mockAlloc("a2", job, "n2")},
		CSIClaims:     []*structs.CSIVolumeClaimUpdate{claimUpdate("default", "data", mockClaim("a2", "n2", structs.CSIClaimReserved))},
	})
	must.ErrorIs(t, err, structs.ErrNotReady)
	a, _ := s.AllocByID(nil, "a2")
	must.Nil(t, a)
}

func TestCSIClaims_PastClaimsBounded(t *testing.T) {
	s := testStore(t)
	must.NoError(t, s.UpsertCSIVolumes(1, []*structs.CSIVolume{mockVolume("default", "data", "ebs")}))
	index := uint64(2)
	total := structs.MaxPastClaims + 3
	for i := range total {
		alloc := fmt.Sprintf("a%02d", i)
		for _, step := range []structs.CSIClaimStep{structs.CSIClaimReserved, structs.CSIClaimFreed} {
			must.NoError(t, s.UpdateCSIVolumeClaims(index, []*structs.CSIVolumeClaimUpdate{
				claimUpdate("default", "data", mockClaim(alloc, "n1", step)),
			}, int64(index)))
			index++
		}
	}
	v := claimVolume(t, s)
	must.Len(t, structs.MaxPastClaims, v.PastClaims)
	must.Eq(t, "a03", v.PastClaims[0].AllocID) // the oldest three dropped
	must.Eq(t, fmt.Sprintf("a%02d", total-1), v.PastClaims[len(v.PastClaims)-1].AllocID)
}

func TestCSIClaims_ModesFollowOldestClaim(t *testing.T) {
	s := testStore(t)
	v := mockVolume("default", "data", "nfs")
	v.RequestedCapabilities[0].AccessMode = structs.CSIVolumeAccessModeMultiNodeReader
	must.NoError(t, s.UpsertCSIVolumes(1, []*structs.CSIVolume{v}))
	reader := func(alloc string, step structs.CSIClaimStep) *structs.CSIVolumeClaimUpdate {
		c := mockClaim(alloc, "n-"+alloc, step)
		c.Mode = structs.CSIVolumeClaimRead
		c.AccessMode = structs.CSIVolumeAccessModeMultiNodeReader
		return claimUpdate("default", "data", c)
	}
	must.NoError(t, s.UpdateCSIVolumeClaims(2, []*structs.CSIVolumeClaimUpdate{reader("z", structs.CSIClaimReserved)}, 1))
	must.NoError(t, s.UpdateCSIVolumeClaims(3, []*structs.CSIVolumeClaimUpdate{reader("a", structs.CSIClaimReserved)}, 1))
	must.Eq(t, structs.CSIVolumeAccessModeMultiNodeReader, claimVolume(t, s).AccessMode)

	must.NoError(t, s.UpdateCSIVolumeClaims(4, []*structs.CSIVolumeClaimUpdate{reader("z", structs.CSIClaimFreed)}, 1))
	must.Eq(t, structs.CSIVolumeAccessModeMultiNodeReader, claimVolume(t, s).AccessMode) // "a" still holds it
	must.NoError(t, s.UpdateCSIVolumeClaims(5, []*structs.CSIVolumeClaimUpdate{reader("a", structs.CSIClaimFreed)}, 1))
	must.Eq(t, structs.CSIVolumeAccessModeUnknown, claimVolume(t, s).AccessMode)

	// A writer is refused on a reader-only volume.
	w := mockClaim("w", "n1", structs.CSIClaimReserved)
	w.AccessMode = structs.CSIVolumeAccessModeMultiNodeReader
	err := s.UpdateCSIVolumeClaims(6, []*structs.CSIVolumeClaimUpdate{claimUpdate("default", "data", w)}, 1)
	must.ErrorIs(t, err, structs.ErrInvalid)
}

// TestCSIClaims_IllegalStepsRefused: the store refuses every step the
// claim protocol does not allow from the stored one, so no writer (a
// stale endpoint, a replayed entry) can move a releasing claim back into
// use or free one that skipped its release; a plan re-reserving a claim
// that went further leaves it as it is.
func TestCSIClaims_IllegalStepsRefused(t *testing.T) {
	all := []structs.CSIClaimStep{structs.CSIClaimReserved, structs.CSIClaimTaken, structs.CSIClaimNodeDetached,
		structs.CSIClaimControllerDetached, structs.CSIClaimNeedsOperator, structs.CSIClaimFreed}
	for _, from := range all[:len(all)-1] {
		for _, to := range all {
			t.Run(string(from)+"→"+string(to), func(t *testing.T) {
				s := testStore(t)
				must.NoError(t, s.UpsertCSIVolumes(1, []*structs.CSIVolume{mockVolume("default", "data", "p")}))
				first := mockClaim("a1", "n1", structs.CSIClaimReserved)
				if from != structs.CSIClaimReserved {
					first.Step = structs.CSIClaimTaken
				}
				must.NoError(t, s.UpdateCSIVolumeClaims(2, []*structs.CSIVolumeClaimUpdate{claimUpdate("default", "data", first)}, 1))
				if from != first.Step {
					c := mockClaim("a1", "n1", from)
					// Reach from through legal steps.
					path := map[structs.CSIClaimStep][]structs.CSIClaimStep{
						structs.CSIClaimNodeDetached:       {structs.CSIClaimNodeDetached},
						structs.CSIClaimControllerDetached: {structs.CSIClaimNodeDetached, structs.CSIClaimControllerDetached},
						structs.CSIClaimNeedsOperator:      {structs.CSIClaimNeedsOperator},
					}[from]
					for i, step := range path {
						c.Step = step
						must.NoError(t, s.UpdateCSIVolumeClaims(uint64(3+i), []*structs.CSIVolumeClaimUpdate{claimUpdate("default", "data", c.Copy())}, 2))
					}
				}
				err := s.UpdateCSIVolumeClaims(10, []*structs.CSIVolumeClaimUpdate{claimUpdate("default", "data", mockClaim("a1", "n1", to))}, 3)
				stored := claimVolume(t, s).Claims["a1"]
				switch {
				case from.CanMoveTo(to):
					must.NoError(t, err)
					if to == structs.CSIClaimFreed {
						must.Nil(t, stored)
					} else {
						must.Eq(t, to, stored.Step)
					}
				case to == structs.CSIClaimReserved:
					must.NoError(t, err, must.Sprint("a re-reservation is a no-op"))
					must.Eq(t, from, stored.Step)
				default:
					must.ErrorIs(t, err, structs.ErrConflict)
					must.StrContains(t, err.Error(), "cannot move from step "+string(from)+" to step "+string(to))
					must.Eq(t, from, stored.Step, must.Sprint("a refused step changes nothing"))
				}
			})
		}
	}
	// The table the store enforces is the protocol's: spot-check it.
	must.False(t, structs.CSIClaimNodeDetached.CanMoveTo(structs.CSIClaimTaken))
	must.False(t, structs.CSIClaimTaken.CanMoveTo(structs.CSIClaimFreed))
	must.True(t, structs.CSIClaimNeedsOperator.CanMoveTo(structs.CSIClaimNodeDetached))
}
