package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/helper/steptrace"
)

func TestParseTrace_FirstMarkOfAStepWinsAndBadLinesAreSkipped(t *testing.T) {
	tr, err := parseTrace(strings.NewReader(
		"1000 a1 alloc-received\n" +
			"garbage\n" +
			"x a1 claim-sent\n" +
			"3000 a1 alloc-received\n" + // a second mark of the same step
			"2000 a2 claim-sent\n" +
			"4000 a1 claim-sent"))
	must.NoError(t, err)
	must.MapLen(t, 2, tr)
	must.Eq(t, time.Unix(0, 1000), tr["a1"][steptrace.AllocReceived])
	must.Eq(t, time.Unix(0, 4000), tr["a1"][steptrace.ClaimSent])
	must.Eq(t, time.Unix(0, 2000), tr["a2"][steptrace.ClaimSent])
}

func TestBreakdown_MediansPerLegInPathOrderAndMissingStepsFold(t *testing.T) {
	base := time.Unix(100, 0)
	ms := func(n int) time.Time { return base.Add(time.Duration(n) * time.Millisecond) }
	allocs := []allocTimes{
		{ID: "a1", Created: ms(0), Mounted: ms(10)},
		{ID: "a2", Created: ms(0), Mounted: ms(20)},
		{ID: "a3", Created: ms(0), Mounted: ms(30)},
	}
	tr := traceMarks{
		"a1": {steptrace.AllocReceived: ms(1), steptrace.ClaimSent: ms(2), steptrace.ClaimAnswered: ms(3)},
		"a2": {steptrace.AllocReceived: ms(2), steptrace.ClaimSent: ms(4), steptrace.ClaimAnswered: ms(6)},
		// a3's client wrote no claim marks: its received → mounted leg is
		// one leg of its own.
		"a3": {steptrace.AllocReceived: ms(3)},
	}
	got := breakdown("claim", claimPath, allocs, tr)
	type l struct {
		from, to string
		n        int
		p50      time.Duration
	}
	var legs []l
	for _, s := range got {
		must.Eq(t, "claim", s.Path)
		legs = append(legs, l{s.From, s.To, s.N, s.P50})
	}
	must.Eq(t, []l{
		{stepCreated, steptrace.AllocReceived, 3, 2 * time.Millisecond},
		{steptrace.AllocReceived, steptrace.ClaimSent, 2, time.Millisecond},
		{steptrace.AllocReceived, stepMounted, 1, 27 * time.Millisecond},
		{steptrace.ClaimSent, steptrace.ClaimAnswered, 2, time.Millisecond},
		{steptrace.ClaimAnswered, stepMounted, 2, 7 * time.Millisecond},
	}, legs)
}

func TestSlowest_PicksTheSlowestPublishAndFree(t *testing.T) {
	base := time.Unix(100, 0)
	ms := func(n int) time.Time { return base.Add(time.Duration(n) * time.Millisecond) }
	runs := []allocTimes{
		{ID: "a", Created: ms(0), Mounted: ms(5), Stopped: ms(100), Freed: ms(190)},
		{ID: "b", Created: ms(0), Mounted: ms(9), Stopped: ms(100), Freed: ms(150)},
	}
	pub, freed := slowest(runs)
	must.Eq(t, "b", pub[0].ID)
	must.Eq(t, "a", freed[0].ID)
	pub, freed = slowest(nil)
	must.SliceEmpty(t, pub)
	must.SliceEmpty(t, freed)
}

func TestExitedAt_PrefersTheTraceMark(t *testing.T) {
	a := allocTimes{ID: "a", Exited: time.Unix(5, 0)}
	must.Eq(t, time.Unix(5, 0), exitedAt(a, traceMarks{}))
	must.Eq(t, time.Unix(4, 0), exitedAt(a, traceMarks{"a": {steptrace.TaskExited: time.Unix(4, 0)}}))
}

func TestMedianSteps_MedianOfEachLegAcrossRuns(t *testing.T) {
	run := func(p50s ...time.Duration) *results {
		r := &results{}
		for i, d := range p50s {
			r.Steps = append(r.Steps, stepRow{Path: "p", From: claimPath[i], To: claimPath[i+1], N: 2, P50: d})
		}
		return r
	}
	got := medianSteps([]*results{run(5, 1), run(3, 9), run(4)})
	must.SliceLen(t, 2, got)
	must.Eq(t, stepRow{Path: "p", From: claimPath[0], To: claimPath[1], N: 6, P50: 4}, got[0])
	must.Eq(t, stepRow{Path: "p", From: claimPath[1], To: claimPath[2], N: 4, P50: 1}, got[1])
}

// A one-volume register's legs come from the bench's two times and the
// agent's marks of that volume, in path order; another volume's marks
// do not leak in.
func TestRegisterMarks_LegsInPathOrder(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(us int) time.Time { return t0.Add(time.Duration(us) * time.Microsecond) }
	tr := traceMarks{
		"v1": {steptrace.RegisterReceived: at(100), steptrace.RegisterProposed: at(150),
			steptrace.RegisterApplied: at(350), steptrace.RegisterCommitted: at(380)},
		"other": {steptrace.RegisterReceived: at(1)},
	}
	times := map[string][2]time.Time{"v1": {t0, at(500)}}
	steps := breakdownOf("register, 1 volume", registerPath, registerMarks(times, tr))
	var got []string
	for _, s := range steps {
		got = append(got, fmt.Sprintf("%s→%s %s", s.From, s.To, s.P50))
	}
	must.Eq(t, []string{
		"register-sent→register-received 100µs",
		"register-received→register-proposed 50µs",
		"register-proposed→register-applied 200µs",
		"register-applied→register-committed 30µs",
		"register-committed→register-done 120µs",
	}, got)
}
