package allocrunner

import (
	"context"
	"sync"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

type eventSink struct {
	lock   sync.Mutex
	events []*structs.TaskEvent
}

func (s *eventSink) Restart(context.Context, *structs.TaskEvent, bool) error { return nil }
func (s *eventSink) Kill(context.Context, *structs.TaskEvent) error          { return nil }
func (s *eventSink) EmitEvent(ev *structs.TaskEvent) {
	s.lock.Lock()
	defer s.lock.Unlock()
	s.events = append(s.events, ev)
}

// An abnormal volume condition becomes a task event on every task of the
// alloc, and only of that alloc.
func TestCSIEvents_EmitAllAbnormal(t *testing.T) {
	e := NewCSIEvents()
	web, side, other := &eventSink{}, &eventSink{}, &eventSink{}
	e.AddTask("a1", "web", web)
	e.AddTask("a1", "side", side)
	e.AddTask("a2", "web", other)
	e.EmitAll("a1", VolumeAbnormalEvent("db", "disk has I/O errors"))
	for _, s := range []*eventSink{web, side} {
		must.SliceLen(t, 1, s.events)
		ev := s.events[0]
		must.Eq(t, EventCSIVolume, ev.Type)
		must.Eq(t, `CSI volume "db" is abnormal: disk has I/O errors`, ev.DisplayMessage)
		must.Eq(t, csiStepAbnormal, ev.Details["step"])
		must.Eq(t, "db", ev.Details["volume"])
	}
	must.SliceEmpty(t, other.events)
	web.events[0].Details["volume"] = "changed"
	must.Eq(t, "db", side.events[0].Details["volume"], must.Sprint("each task gets its own copy"))
}
