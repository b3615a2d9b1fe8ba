package state

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

func TestCSIVolumes_UpsertGetListDelete(t *testing.T) {
	s := testStore(t)
	must.NoError(t, s.UpsertCSIVolumes(1, []*structs.CSIVolume{
		mockVolume("default", "data1", "ebs"),
		mockVolume("default", "data2", "nfs"),
		mockVolume("prod", "data1", "ebs"),
	}))
	v, err := s.CSIVolumeByID(nil, "prod", "data1")
	must.NoError(t, err)
	must.Eq(t, "ebs", v.PluginID)
	must.Eq(t, 1, v.CreateIndex)

	iter, err := s.CSIVolumes(nil, "default")
	must.Eq(t, []string{"default/data1", "default/data2"}, ids(t, iter, err))
	iter, err = s.CSIVolumes(nil, structs.AllNamespaces)
	must.Eq(t, []string{"default/data1", "default/data2", "prod/data1"}, ids(t, iter, err))
	iter, err = s.CSIVolumesByIDPrefix(nil, "default", "data")
	must.Eq(t, []string{"default/data1", "default/data2"}, ids(t, iter, err))
	iter, err = s.CSIVolumesByIDPrefix(nil, structs.AllNamespaces, "data1")
	must.Eq(t, []string{"default/data1", "prod/data1"}, ids(t, iter, err))
	iter, err = s.CSIVolumesByPluginID(nil, "default", "ebs")
	must.Eq(t, []string{"default/data1"}, ids(t, iter, err))
	iter, err = s.CSIVolumesByPluginID(nil, structs.AllNamespaces, "ebs")
	must.Eq(t, []string{"default/data1", "prod/data1"}, ids(t, iter, err))

	must.NoError(t, s.DeleteCSIVolumes(2, "prod", []string{"data1"}, false))
	v, err = s.CSIVolumeByID(nil, "prod", "data1")
	must.NoError(t, err)
	must.Nil(t, v)
	must.Eq(t, 2, mustIndex(t, s, TableCSIVolumes))

	err = s.DeleteCSIVolumes(3, "default", []string{"data1", "nope"}, false)
	must.ErrorIs(t, err, structs.ErrNotFound)
	must.StrContains(t, err.Error(), `"nope"`)
	v, _ = s.CSIVolumeByID(nil, "default", "data1")
	must.NotNil(t, v) // all or nothing
}

func TestCSIVolumes_RegisterKeepsClaims(t *testing.T) {
	s := testStore(t)
	must.NoError(t, s.UpsertCSIVolumes(1, []*structs.CSIVolume{mockVolume("default", "data", "ebs")}))
	must.NoError(t, s.UpdateCSIVolumeClaims(2, []*structs.CSIVolumeClaimUpdate{
		claimUpdate("default", "data", mockClaim("a1", "n1", structs.CSIClaimReserved)),
	}, 50))

	upd := mockVolume("default", "data", "ebs")
	upd.Parameters = map[string]string{"type": "hdd"}
	upd.Claims = nil // a register never drops claims ...
	must.NoError(t, s.UpsertCSIVolumes(3, []*structs.CSIVolume{upd}))
	v, _ := s.CSIVolumeByID(nil, "default", "data")
	must.Eq(t, "hdd", v.Parameters["type"])
	must.MapContainsKey(t, v.Claims, "a1")
	must.Eq(t, structs.CSIVolumeAccessModeSingleNodeWriter, v.AccessMode)
	must.Eq(t, 1, v.CreateIndex)
	must.Eq(t, 3, v.ModifyIndex)

	// ... nor adds one.
	fresh := mockVolume("default", "other", "ebs")
	fresh.Claims = map[string]*structs.CSIVolumeClaim{"x": mockClaim("x", "n1", structs.CSIClaimTaken)}
	must.NoError(t, s.UpsertCSIVolumes(4, []*structs.CSIVolume{fresh}))
	v, _ = s.CSIVolumeByID(nil, "default", "other")
	must.MapEmpty(t, v.Claims)
}

func TestCSIVolumes_ByClaimNode(t *testing.T) {
	s := testStore(t)
	multi := mockVolume("default", "shared", "nfs")
	multi.RequestedCapabilities[0].AccessMode = structs.CSIVolumeAccessModeMultiNodeMultiWriter
	must.NoError(t, s.UpsertCSIVolumes(1, []*structs.CSIVolume{multi, mockVolume("prod", "data", "ebs")}))

	shared := func(allocID, nodeID string) *structs.CSIVolumeClaimUpdate {
		c := mockClaim(allocID, nodeID, structs.CSIClaimReserved)
		c.AccessMode = structs.CSIVolumeAccessModeMultiNodeMultiWriter
		return claimUpdate("default", "shared", c)
	}
	must.NoError(t, s.UpdateCSIVolumeClaims(2, []*structs.CSIVolumeClaimUpdate{
		shared("a1", "n1"), shared("a2", "n2"), shared("a3", "n1"),
		claimUpdate("prod", "data", mockClaim("a4", "n2", structs.CSIClaimTaken)),
	}, 10))

	iter, err := s.CSIVolumesByNodeID(nil, "n1")
	must.Eq(t, []string{"default/shared"}, ids(t, iter, err)) // once, though two claims
	iter, err = s.CSIVolumesByNodeID(nil, "n2")
	must.Eq(t, []string{"default/shared", "prod/data"}, ids(t, iter, err))

	// Freed claims leave the node index.
	freed := mockClaim("a4", "n2", structs.CSIClaimFreed)
	must.NoError(t, s.UpdateCSIVolumeClaims(3, []*structs.CSIVolumeClaimUpdate{
		claimUpdate("prod", "data", mockClaim("a4", "n2", structs.CSIClaimControllerDetached)),
		claimUpdate("prod", "data", freed)}, 11))
	iter, err = s.CSIVolumesByNodeID(nil, "n2")
	must.Eq(t, []string{"default/shared"}, ids(t, iter, err))
	iter, err = s.CSIVolumesByNodeID(nil, "n3")
	must.Eq(t, []string(nil), ids(t, iter, err))
}

func TestCSIVolumes_DeregisterClaimed(t *testing.T) {
	job := mockJob("default", "web")
	cases := []struct {
		name        string
		allocStatus string // "" = no alloc in state
		force       bool
		wantErr     *structs.Error
		wantInMsg   []string
	}{
		{name: "claimed, no force", allocStatus: structs.AllocClientStatusComplete, wantErr: structs.ErrConflict,
			wantInMsg: []string{`"data"`, "alloc a1 on node n1", "-force"}},
		{name: "force, alloc running", allocStatus: structs.AllocClientStatusRunning, force: true, wantErr: structs.ErrConflict,
			wantInMsg: []string{`"data"`, "alloc a1", "running"}},
		{name: "force, alloc complete", allocStatus: structs.AllocClientStatusComplete, force: true},
		{name: "force, alloc lost", allocStatus: structs.AllocClientStatusLost, force: true},
		{name: "force, alloc gone", force: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := testStore(t)
			must.NoError(t, s.UpsertCSIVolumes(1, []*structs.CSIVolume{mockVolume("default", "data", "ebs")}))
			req := &structs.ApplyPlanResultsRequest{
				CSIClaims: []*structs.CSIVolumeClaimUpdate{claimUpdate("default", "data", mockClaim("a1", "n1", structs.CSIClaimReserved))},
			}
			if tc.allocStatus != "" {
				a := mockAlloc("a1", job, "n1")
				a.ClientStatus = tc.allocStatus
				req.AllocsUpdated = []*structs.Allocation{a}
			}
			must.NoError(t, s.UpsertPlanResults(2, req))

			err := s.DeleteCSIVolumes(3, "default", []string{"data"}, tc.force)
			v, _ := s.CSIVolumeByID(nil, "default", "data")
			if tc.wantErr == nil {
				must.NoError(t, err)
				must.Nil(t, v)
				return
			}
			must.ErrorIs(t, err, tc.wantErr)
			for _, want := range tc.wantInMsg {
				must.StrContains(t, err.Error(), want)
			}
			must.NotNil(t, v)
		})
	}
}

// CSIVolumesModifiedSince reads exactly the volumes written after an
// index, in index order, across namespaces and across the byte boundaries
// where a varint key (memdb's UintFieldIndex) would sort 128 before 127.
func TestCSIVolumes_ModifiedSince(t *testing.T) {
	s := testStore(t)
	for _, w := range []struct {
		index uint64
		ns    string
		id    string
	}{{127, "prod", "c"}, {1, "default", "a"}, {128, "default", "b"}, {70000, "default", "d"}, {300, "prod", "e"}} {
		must.NoError(t, s.UpsertCSIVolumes(w.index, []*structs.CSIVolume{mockVolume(w.ns, w.id, "ebs")}))
	}
	// A re-register moves a volume to its new index; the old key is gone.
	must.NoError(t, s.UpsertCSIVolumes(70001, []*structs.CSIVolume{mockVolume("default", "a", "ebs")}))
	for since, want := range map[uint64][]string{
		0:     {"prod/c", "default/b", "prod/e", "default/d", "default/a"},
		127:   {"default/b", "prod/e", "default/d", "default/a"},
		300:   {"default/d", "default/a"},
		70001: nil,
	} {
		iter, err := s.CSIVolumesModifiedSince(nil, since)
		got := ids(t, iter, err)
		if len(want) == 0 {
			must.SliceEmpty(t, got, must.Sprintf("since %d", since))
			continue
		}
		must.Eq(t, want, got, must.Sprintf("since %d", since))
	}
}

// UpsertCSIVolumes stores copies (its callers keep theirs); the FSM's
// UpsertCSIVolumesOwned stores the very volumes it decoded, with the
// indexes set on them.
func TestCSIVolumes_UpsertOwnedStoresWithoutCopy(t *testing.T) {
	s := testStore(t)
	mine, theirs := mockVolume("default", "a", "ebs"), mockVolume("default", "b", "ebs")
	must.NoError(t, s.UpsertCSIVolumes(5, []*structs.CSIVolume{mine}))
	must.NoError(t, s.UpsertCSIVolumesOwned(6, []*structs.CSIVolume{theirs}))
	a, err := s.CSIVolumeByID(nil, "default", "a")
	must.NoError(t, err)
	must.True(t, a != mine, must.Sprint("UpsertCSIVolumes stored the caller's volume"))
	must.Eq(t, 0, mine.ModifyIndex)
	b, err := s.CSIVolumeByID(nil, "default", "b")
	must.NoError(t, err)
	must.True(t, b == theirs, must.Sprint("UpsertCSIVolumesOwned copied"))
	must.Eq(t, 6, b.CreateIndex)
	must.Eq(t, 6, b.ModifyIndex)
}
