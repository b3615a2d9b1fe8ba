package executor

import (
	"os"
	"testing"

	"github.com/shoenig/test/must"
)

func TestParseProcStat(t *testing.T) {
	tail := " 1 1 1 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 123456 1000 100 18446744073709551615"
	cases := []struct {
		name    string
		stat    string
		want    procStat
		wantErr string
	}{
		{name: "plain", stat: "42 (sleep) S" + tail, want: procStat{State: 'S', StartTime: 123456}},
		{name: "zombie", stat: "42 (sh) Z" + tail, want: procStat{State: 'Z', StartTime: 123456}},
		{name: "name with spaces and parens", stat: "42 (a) b (c)) R" + tail, want: procStat{State: 'R', StartTime: 123456}},
		{name: "no name", stat: "42 sleep S" + tail, wantErr: "no command name"},
		{name: "truncated", stat: "42 (sleep) S 1 1", wantErr: "too few fields"},
		{name: "bad start time", stat: "42 (sleep) S 1 1 1 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 x 1000", wantErr: "start time"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcStat([]byte(tc.stat))
			if tc.wantErr != "" {
				must.ErrorContains(t, err, tc.wantErr)
				return
			}
			must.NoError(t, err)
			must.Eq(t, tc.want, got)
		})
	}
}

func TestReadProcStatSelf(t *testing.T) {
	st, err := readProcStat(os.Getpid())
	must.NoError(t, err)
	must.Positive(t, st.StartTime)
	must.False(t, st.exited())
	_, err = readProcStat(1 << 30) // above any pid_max
	must.ErrorIs(t, err, errNoProcess)
}
