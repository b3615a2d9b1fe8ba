package stream

import (
	"fmt"
	"testing"

	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// BenchmarkPublish is what the FSM's goroutine pays per committed write
// for the event stream: turning a volume claim change into events and
// publishing them, with idle subscribers (it never depends on them).
func BenchmarkPublish(b *testing.B) {
	old := &structs.CSIVolume{ID: "db", Namespace: "default", PluginID: "ebs", Claims: map[string]*structs.CSIVolumeClaim{
		"a1": {AllocID: "a1", NodeID: "n1", Step: structs.CSIClaimReserved}}}
	v := &structs.CSIVolume{ID: "db", Namespace: "default", PluginID: "ebs", Claims: map[string]*structs.CSIVolumeClaim{
		"a1": {AllocID: "a1", NodeID: "n1", Step: structs.CSIClaimTaken}}}
	changes := memdb.Changes{{Table: state.TableCSIVolumes, Before: old, After: v}}
	for _, subs := range []int{0, 100} {
		b.Run(fmt.Sprintf("subscribers=%d", subs), func(b *testing.B) {
			br := NewBroker(DefaultBufferSize)
			for range subs {
				defer br.Subscribe(Request{}).Close()
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				br.Publish(FromChanges(uint64(i+1), changes))
			}
		})
	}
}
