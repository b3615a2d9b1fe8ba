package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

func TestGoals_JudgeTheFigureTheyName(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name string
		row  row
		want string // "yes", "no", "-"
	}{
		{"K=10 is judged by its slowest publish, not its p50",
			row{ID: rowClaimMany, Size: 10, Sum: summary{N: 10, P50: 5 * ms, Max: 31 * ms}}, "no"},
		{"K=10 with every publish within 30 ms",
			row{ID: rowClaimMany, Size: 10, Sum: summary{N: 10, P50: 5 * ms, Max: 30 * ms}}, "yes"},
		{"K=100's publishes have no goal",
			row{ID: rowClaimMany, Size: 100, Sum: summary{N: 100, P50: 5 * ms, Max: 9 * ms}}, "-"},
		{"K=100 stop is judged by when the last claim was freed",
			row{ID: rowStopMany, Kind: kindTotal, Size: 100, Sum: summary{N: 100, P50: 100 * ms}, Total: 401 * ms}, "no"},
		{"a list of another size than 1,000 is not judged",
			row{ID: rowList, Size: 50, Sum: summary{N: 10, P50: ms}}, "-"},
		{"a failed row is not judged",
			row{ID: rowClaimOne, Size: 1, Err: errors.New("boom")}, "-"},
		{"claim → published p50 at the goal",
			row{ID: rowClaimOne, Size: 1, Sum: summary{N: 20, P50: 2 * ms}}, "yes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			must.Eq(t, c.want, c.row.cells()[10])
		})
	}
}

func TestMedianOf_EachFigureIsItsMedianAndEveryRunIsKept(t *testing.T) {
	ms := time.Millisecond
	run := func(p50, max time.Duration, load string) *results {
		return &results{LoadBefore: load, LoadAfter: load, Rows: []row{
			{ID: rowClaimMany, Size: 10, Sum: summary{N: 10, P50: p50, Max: max}},
			{ID: rowClaimMany, Size: 100, Sum: summary{N: 100, P50: 10 * p50, Max: 10 * max}},
		}}
	}
	got := medianOf([]*results{run(3*ms, 40*ms, "1"), run(1*ms, 20*ms, "2"), run(2*ms, 25*ms, "3")})
	must.Eq(t, 3, got.Runs)
	must.Eq(t, "1", got.LoadBefore)
	must.Eq(t, "3", got.LoadAfter)
	must.SliceLen(t, 2, got.Rows)
	k10 := got.Rows[0]
	must.Eq(t, 10, k10.Size)
	must.Eq(t, 2*ms, k10.Sum.P50)
	must.Eq(t, 25*ms, k10.Sum.Max)
	must.Eq(t, 30, k10.Sum.N)
	// The K=10 goal judges the slowest publish, so that is what each run shows.
	must.Eq(t, []time.Duration{40 * ms, 20 * ms, 25 * ms}, k10.Runs)
	must.Eq(t, "yes", k10.cells()[10])
	// The row without a goal keeps each run's headline (p50).
	must.Eq(t, []time.Duration{30 * ms, 10 * ms, 20 * ms}, got.Rows[1].Runs)

	var buf bytes.Buffer
	must.NoError(t, writeTable(&buf, got))
	must.StrContains(t, buf.String(), "median of 3 runs")
	must.StrContains(t, buf.String(), "40.0ms, 20.0ms, 25.0ms")
	must.StrContains(t, buf.String(), "goal not measured in this run: register 1 volume (register), p50 ≤ 450µs")
	must.StrNotContains(t, buf.String(), "(claim_publish_many at 10)")
}

func TestMedianOf_AFailedRunIsNotHidden(t *testing.T) {
	ok := &results{Rows: []row{{ID: rowClaimOne, Size: 1, Sum: summary{N: 1, P50: time.Millisecond}}}}
	bad := &results{Rows: []row{{ID: rowClaimOne, Size: 1, Err: errors.New("the claim never came")}}}
	got := medianOf([]*results{ok, bad, ok})
	must.True(t, got.failed())
	must.ErrorContains(t, got.Rows[0].Err, "the claim never came")
}

func TestSizesFlag(t *testing.T) {
	parse := func(args ...string) (sizes, error) {
		s := sizes{10, 100}
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Var(&s, "many", "")
		return s, fs.Parse(args)
	}
	got, err := parse()
	must.NoError(t, err)
	must.Eq(t, sizes{10, 100}, got)
	got, err = parse("-many", "100")
	must.NoError(t, err)
	must.Eq(t, sizes{100}, got)
	got, err = parse("-many", "0")
	must.NoError(t, err)
	must.SliceEmpty(t, got)
	_, err = parse("-many", "10,ten")
	must.ErrorContains(t, err, `"ten" is not a count of allocs`)
}
