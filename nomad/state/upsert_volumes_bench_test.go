package state

import (
	"fmt"
	"testing"

	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/nomad/structs"
)

// BenchmarkUpsertCSIVolumes1000 stores a register of 1,000 new volumes
// (the leader's FSM, handed the endpoint's volumes) into a store that
// already holds 5,000, with the event hook set as a server sets it.
// go test -run '^$' -bench UpsertCSIVolumes1000 -benchmem ./nomad/state/
func BenchmarkUpsertCSIVolumes1000(b *testing.B) {
	s, err := NewStateStore(nil)
	if err != nil {
		b.Fatal(err)
	}
	hook := func(uint64, memdb.Changes) {}
	s.SetCommitHook(hook)
	mk := func(round, n int) []*structs.CSIVolume {
		out := make([]*structs.CSIVolume, n)
		for i := range out {
			id := fmt.Sprintf("vol-%03d-%04d", round, i)
			out[i] = &structs.CSIVolume{ID: id, Name: id, Namespace: structs.DefaultNamespace, PluginID: "hostpath",
				RequestedCapabilities: []*structs.CSIVolumeCapability{{AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter,
					AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}}
		}
		return out
	}
	index := uint64(1)
	for r := range 5 {
		if err := s.UpsertCSIVolumesOwned(index, mk(r, 1000)); err != nil {
			b.Fatal(err)
		}
		index++
	}
	round := 5
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		vols := mk(round, 1000)
		round++
		b.StartTimer()
		if err := s.UpsertCSIVolumesOwned(index, vols); err != nil {
			b.Fatal(err)
		}
		index++
	}
}
