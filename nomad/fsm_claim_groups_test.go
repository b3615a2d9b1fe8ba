package nomad

import (
	"bytes"
	"io"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/msgpack"
	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// fsmGroups is a group commit of claim writes, one group per argument.
func fsmGroups(ts int64, groups ...[]*structs.CSIVolumeClaimUpdate) *structs.CSIVolumeClaimGroupsRequest {
	req := &structs.CSIVolumeClaimGroupsRequest{Timestamp: ts}
	for _, g := range groups {
		req.Groups = append(req.Groups, structs.CSIVolumeClaimGroup{Claims: g})
	}
	return req
}

// A group commit applies each group as its own all-or-nothing write, in
// order, in one transaction at the entry's index: a refused group (a
// conflict with a group before it, an unknown volume in a group's second
// update, an illegal step) leaves the others applied, and each gets its
// own answer.
func TestFSM_ClaimGroupsMixedAcceptAndReject(t *testing.T) {
	f := fsmTestFSM(t)
	fsmPopulate(t, f) // vol1: a1 Taken on n1; vol2: free
	fsmMustApply(t, f, 9, structs.CSIVolumeRegisterRequestType, &structs.CSIVolumeRegisterRequest{
		Volumes: []*structs.CSIVolume{fsmVolume("vol3")},
	})

	entry := fsmGroups(10_000,
		[]*structs.CSIVolumeClaimUpdate{fsmClaim("vol2", "b1", "n2", structs.CSIClaimReserved)},
		// single-node-writer: blocked by b1, reserved by the group before
		[]*structs.CSIVolumeClaimUpdate{fsmClaim("vol2", "b2", "n1", structs.CSIClaimTaken)},
		// the first update passes, the second cannot: neither is applied
		[]*structs.CSIVolumeClaimUpdate{
			fsmClaim("vol3", "p1", "n1", structs.CSIClaimReserved),
			fsmClaim("nope", "p1", "n1", structs.CSIClaimReserved),
		},
		[]*structs.CSIVolumeClaimUpdate{fsmClaim("vol1", "a1", "n1", structs.CSIClaimNodeDetached)},
		// back from NodeDetached to Taken: refused by the store
		[]*structs.CSIVolumeClaimUpdate{fsmClaim("vol1", "a1", "n1", structs.CSIClaimTaken)},
	)
	buf, err := msgpack.Encode(structs.CSIVolumeClaimGroupsRequestType, entry)
	must.NoError(t, err)
	log := &raft.Log{Index: 10, Type: raft.LogCommand, Data: buf}

	resp := f.Apply(log)
	errs, ok := resp.([]error)
	must.True(t, ok, must.Sprintf("response %T, want []error", resp))
	must.SliceLen(t, 5, errs)
	must.NoError(t, errs[0])
	must.ErrorIs(t, errs[1], structs.ErrNotReady)
	must.StrContains(t, errs[1].Error(), "b1") // names the claim in the way
	must.ErrorIs(t, errs[2], structs.ErrNotFound)
	must.NoError(t, errs[3])
	must.ErrorIs(t, errs[4], structs.ErrConflict)

	s := f.State()
	vol2, err := s.CSIVolumeByID(nil, structs.DefaultNamespace, "vol2")
	must.NoError(t, err)
	must.MapLen(t, 1, vol2.Claims)
	must.Eq(t, structs.CSIClaimReserved, vol2.Claims["b1"].Step)
	must.Eq(t, 10, vol2.Claims["b1"].CreateIndex)
	must.Eq(t, 10_000, vol2.Claims["b1"].ModifyTime)
	vol1, err := s.CSIVolumeByID(nil, structs.DefaultNamespace, "vol1")
	must.NoError(t, err)
	must.Eq(t, structs.CSIClaimNodeDetached, vol1.Claims["a1"].Step)
	vol3, err := s.CSIVolumeByID(nil, structs.DefaultNamespace, "vol3")
	must.NoError(t, err)
	must.MapEmpty(t, vol3.Claims, must.Sprint("group 2 was refused as a whole"))
	must.Eq(t, 9, vol3.ModifyIndex)
	h := vol1.Claims["a1"].History
	must.Eq(t, structs.CSIClaimTaken, h[len(h)-1].From)
	must.Eq(t, structs.CSIClaimNodeDetached, h[len(h)-1].To)
	must.Eq(t, 10, h[len(h)-1].Index)
	must.Eq(t, 10, vol1.ModifyIndex)
	idx, err := s.Index(state.TableCSIVolumes)
	must.NoError(t, err)
	must.Eq(t, 10, idx)

	// Every server replays the entry to the same state.
	replay := fsmTestFSM(t)
	fsmPopulate(t, replay)
	fsmMustApply(t, replay, 9, structs.CSIVolumeRegisterRequestType, &structs.CSIVolumeRegisterRequest{
		Volumes: []*structs.CSIVolume{fsmVolume("vol3")},
	})
	_, ok = replay.Apply(log).([]error)
	must.True(t, ok)
	want := fsmDump(t, f.State())
	must.Eq(t, want, fsmDump(t, replay.State()))

	// A snapshot taken after it restores to the same state.
	snap, err := f.Snapshot()
	must.NoError(t, err)
	sink := &fsmSink{}
	must.NoError(t, snap.Persist(sink))
	snap.Release()
	restored := fsmTestFSM(t)
	must.NoError(t, restored.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))))
	must.Eq(t, want, fsmDump(t, restored.State()))

	// An entry whose groups are all refused writes nothing, not even the
	// table's index.
	resp = fsmApply(t, f, 11, structs.CSIVolumeClaimGroupsRequestType, fsmGroups(11_000,
		[]*structs.CSIVolumeClaimUpdate{fsmClaim("nope", "c1", "n1", structs.CSIClaimReserved)},
		[]*structs.CSIVolumeClaimUpdate{fsmClaim("vol2", "c2", "n1", structs.CSIClaimReserved)},
	))
	errs = resp.([]error)
	must.ErrorIs(t, errs[0], structs.ErrNotFound)
	must.ErrorIs(t, errs[1], structs.ErrNotReady)
	must.Eq(t, want, fsmDump(t, f.State()))
}

// A group commit that does not decode fails as a whole, like any entry.
func TestFSM_ClaimGroupsUndecodable(t *testing.T) {
	f := fsmTestFSM(t)
	resp := f.Apply(&raft.Log{Index: 1, Data: []byte{byte(structs.CSIVolumeClaimGroupsRequestType), 0xc1}})
	_, ok := resp.(error)
	must.True(t, ok, must.Sprintf("response %T, want an error", resp))
}

// The leader's FSM applies the claim writes it proposed as the group
// commit built them (raftSubmit hands them off) instead of decoding its
// own entry (an entry nobody handed off, a follower's, is decoded: every
// other FSM test). The test hands off a
// message whose claim differs from the encoded one: the store shows
// which of the two was applied.
func TestFSM_ClaimWriteTakesTheHandedOffMessage(t *testing.T) {
	for _, groups := range []bool{false, true} {
		f := fsmTestFSM(t)
		fsmPopulate(t, f) // vol2: free
		encoded := []*structs.CSIVolumeClaimUpdate{fsmClaim("vol2", "from-the-entry", "n2", structs.CSIClaimReserved)}
		handed := []*structs.CSIVolumeClaimUpdate{fsmClaim("vol2", "handed-off", "n2", structs.CSIClaimReserved)}
		var buf []byte
		var msg any
		var err error
		if groups {
			buf, err = msgpack.Encode(structs.CSIVolumeClaimGroupsRequestType, fsmGroups(1, encoded, encoded))
			msg = fsmGroups(1, handed, handed)
		} else {
			buf, err = msgpack.Encode(structs.CSIVolumeClaimRequestType, &structs.CSIVolumeClaimBatchRequest{Claims: encoded, Timestamp: 1})
			msg = &structs.CSIVolumeClaimBatchRequest{Claims: handed, Timestamp: 1}
		}
		must.NoError(t, err)
		f.decoded.put(buf[1:], msg)
		f.Apply(&raft.Log{Index: 10, Type: raft.LogCommand, Data: buf})
		vol, err := f.State().CSIVolumeByID(nil, structs.DefaultNamespace, "vol2")
		must.NoError(t, err)
		must.MapContainsKey(t, vol.Claims, "handed-off", must.Sprintf("groups=%v", groups))
		must.MapNotContainsKey(t, vol.Claims, "from-the-entry")
		_, pending := f.decoded.take(buf[1:])
		must.False(t, pending, must.Sprint("the FSM took the message"))
	}
}
