package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/shoenig/test/must"
)

func TestFmtDur(t *testing.T) {
	cases := []struct {
		name string
		d    time.Duration
		want string
	}{
		{name: "not measured", d: 0, want: "-"},
		{name: "nanoseconds", d: 999, want: "999ns"},
		{name: "microseconds, 3 digits", d: 45300 * time.Nanosecond, want: "45.3µs"},
		{name: "small microseconds", d: 2500 * time.Nanosecond, want: "2.50µs"},
		{name: "milliseconds", d: 1300 * time.Microsecond, want: "1.30ms"},
		{name: "hundreds of ms", d: 433333 * time.Microsecond, want: "433ms"},
		{name: "seconds", d: 1800 * time.Millisecond, want: "1.80s"},
		{name: "many seconds", d: 125 * time.Second, want: "125s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			must.Eq(t, c.want, fmtDur(c.d))
		})
	}
}

func TestRowComparisons(t *testing.T) {
	cases := []struct {
		name     string
		row      row
		wantVs   float64 // 0: no comparison
		wantMet  string  // "yes", "no" or "-"
		wantNote string  // the NOMAD cell
	}{
		{
			name:   "p50 4x better than Nomad meets the target",
			row:    row{ID: rowRegister, Kind: kindLatency, Size: 1000, Sum: summary{N: 1000, P50: 325 * time.Microsecond}},
			wantVs: 4, wantMet: "yes", wantNote: "1.3ms",
		},
		{
			name:   "2x better misses it",
			row:    row{ID: rowClaimOne, Kind: kindLatency, Size: 1, Sum: summary{N: 20, P50: 12 * time.Millisecond}},
			wantVs: 2, wantMet: "no", wantNote: "24ms",
		},
		{
			name:   "a total row is judged by its total, against the better end of Nomad's range",
			row:    row{ID: rowRegisterTotal, Kind: kindTotal, Size: 1000, Sum: summary{N: 1000}, Total: 600 * time.Millisecond},
			wantVs: 3, wantMet: "yes", wantNote: "1.8–2.6s",
		},
		{
			name:    "another size than Nomad's is not compared",
			row:     row{ID: rowList, Kind: kindLatency, Size: 50, Sum: summary{N: 10, P50: time.Millisecond}},
			wantMet: "-", wantNote: "11ms at 1000",
		},
		{
			name:    "a failed row is not compared",
			row:     row{ID: rowStopOne, Kind: kindLatency, Size: 1, Err: errors.New("boom")},
			wantMet: "-", wantNote: "≤60ms",
		},
		{
			name:   "a row without a §7 target still shows the ratio",
			row:    row{ID: rowClaimMany, Kind: kindLatency, Size: 100, Sum: summary{N: 100, P50: 170 * time.Millisecond}},
			wantVs: 2, wantMet: "-", wantNote: "0.34–6.4s",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vs, ok := c.row.vsNomad()
			must.Eq(t, c.wantVs != 0, ok)
			must.Eq(t, c.wantVs, vs)
			cells := c.row.cells()
			must.Eq(t, c.wantMet, cells[8])
			must.Eq(t, c.wantNote, cells[6])
		})
	}
}

func sampleResults() *results {
	return &results{
		Started: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC), CPUs: 2, DataDir: "/tmp/x/data", FSType: "ext4",
		LoadBefore: "1.00 1.00 1.00", LoadAfter: "2.00 2.00 2.00",
		// Out of order on purpose: the table sorts by rowOrder.
		Rows: []row{
			{ID: rowFloorWAL, Name: "floor: raft-wal append", Kind: kindFloor, Sum: summary{N: 1000, P50: 160 * time.Microsecond, P99: 400 * time.Microsecond}},
			{ID: rowRegister, Name: "volume register", Kind: kindLatency, Size: 1000, Floor: 160 * time.Microsecond,
				Sum: summary{N: 1000, P50: 500 * time.Microsecond, P99: 2 * time.Millisecond}},
			{ID: rowStopOne, Name: "stop → claim freed, 1 alloc", Kind: kindLatency, Size: 1, Err: errors.New("waiting for the claim: context deadline exceeded")},
		},
	}
}

// cellStarts returns the rune offsets where each cell of a table line
// starts; cells are separated by two or more spaces.
func cellStarts(line string) []int {
	var out []int
	for _, loc := range regexp.MustCompile(`\S+(?: \S+)*`).FindAllStringIndex(line, -1) {
		out = append(out, utf8.RuneCountInString(line[:loc[0]]))
	}
	return out
}

func TestWriteTable(t *testing.T) {
	var buf bytes.Buffer
	must.NoError(t, writeTable(&buf, sampleResults()))
	out := buf.String()
	lines := strings.Split(out, "\n")

	header := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "ROW ") {
			header = i
			break
		}
	}
	must.NonNegative(t, header, must.Sprint(out))
	table := lines[header : header+4]
	must.StrHasPrefix(t, "volume register ", table[1])
	must.StrHasPrefix(t, "stop → claim freed, 1 alloc ", table[2])
	must.StrHasPrefix(t, "floor: raft-wal append ", table[3])

	// Every line has the header's twelve columns, starting where the
	// header's do (tabwriter counts runes: →, µ, ≤ and – must not shift them).
	want := cellStarts(table[0])
	must.SliceLen(t, 12, want)
	for _, l := range table[1:] {
		must.Eq(t, want, cellStarts(l), must.Sprintf("line %q", l))
	}

	must.StrContains(t, table[1], "500µs")
	must.StrContains(t, table[1], "260µs–433µs")
	must.StrContains(t, table[1], "2.6x")
	must.StrContains(t, table[2], "FAILED")
	must.StrContains(t, table[3], "§7 floor 0.16ms")
	must.StrContains(t, table[1], "p50 ≤ 450µs  no")
	must.StrContains(t, out, "failed rows:\n  stop → claim freed, 1 alloc: waiting for the claim: context deadline exceeded")
	must.StrContains(t, out, "Load average before 1.00 1.00 1.00, after 2.00 2.00 2.00.")
}

func TestWriteJSON(t *testing.T) {
	var buf bytes.Buffer
	must.NoError(t, writeJSON(&buf, sampleResults()))
	var got jsonResults
	must.NoError(t, json.Unmarshal(buf.Bytes(), &got))
	must.SliceLen(t, 3, got.Rows)

	reg := got.Rows[0]
	must.Eq(t, rowRegister, reg.ID)
	must.Eq(t, int64(500*time.Microsecond), reg.P50)
	must.Eq(t, int64(1300*time.Microsecond/5), reg.TargetLo)
	must.Eq(t, int64(1300*time.Microsecond/3), reg.TargetHi)
	must.NotNil(t, reg.Met)
	must.False(t, *reg.Met)
	must.NotNil(t, reg.VsNomad)
	must.Eq(t, 2.6, *reg.VsNomad)

	failed := got.Rows[1]
	must.Eq(t, rowStopOne, failed.ID)
	must.Eq(t, "waiting for the claim: context deadline exceeded", failed.Error)
	must.Nil(t, failed.Met)
	must.Nil(t, failed.VsNomad)

	must.Eq(t, "0.16ms", got.Rows[2].DesignNote)
	must.Eq(t, int64(450*time.Microsecond), reg.Goal)
	must.Eq(t, "p50", reg.GoalBy)
	must.NotNil(t, reg.GoalMet)
	must.False(t, *reg.GoalMet)
	must.Nil(t, failed.GoalMet)
}

func TestResultsFailed(t *testing.T) {
	r := sampleResults()
	must.True(t, r.failed())
	r.Rows = r.Rows[:2]
	must.False(t, r.failed())
	r.Notes = []string{"the agent exited during the run"}
	must.True(t, r.failed(), must.Sprint("a run cut short by its agent failed"))
}

func TestWriteTable_Notes(t *testing.T) {
	r := sampleResults()
	r.Notes = []string{"the agent exited during the run (signal: killed)"}
	var buf bytes.Buffer
	must.NoError(t, writeTable(&buf, r))
	must.StrContains(t, buf.String(), "\nnote: the agent exited during the run (signal: killed)\n")
}
