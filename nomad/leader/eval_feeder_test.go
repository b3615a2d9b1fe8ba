package leader

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

func TestFeedState_Diff(t *testing.T) {
	f := newFeedState()
	pending := &structs.Evaluation{ID: "p", Status: structs.EvalStatusPending}
	blocked := &structs.Evaluation{ID: "b", Status: structs.EvalStatusBlocked}
	done := &structs.Evaluation{ID: "d", Status: structs.EvalStatusComplete}

	d := f.diff([]*structs.Evaluation{pending, blocked, done})
	must.Eq(t, []string{"p"}, ids(d.enqueue))
	must.Eq(t, []string{"b"}, ids(d.track))
	must.SliceEmpty(t, d.untrack)

	// Same table again (e.g. a stale snapshot): nothing new.
	d = f.diff([]*structs.Evaluation{pending, blocked, done})
	must.SliceEmpty(t, d.enqueue)
	must.SliceEmpty(t, d.track)

	// p completed, b was canceled: both forgotten; b untracked.
	p2 := pending.Copy()
	p2.Status = structs.EvalStatusComplete
	b2 := blocked.Copy()
	b2.Status = structs.EvalStatusCancelled
	d = f.diff([]*structs.Evaluation{p2, b2, done})
	must.SliceEmpty(t, d.enqueue)
	must.Eq(t, []string{"b"}, ids(d.untrack))
	must.MapEmpty(t, f.enqueued)
	must.MapEmpty(t, f.tracked)
}
