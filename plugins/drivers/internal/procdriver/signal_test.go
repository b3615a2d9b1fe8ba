package procdriver

import (
	"testing"

	"github.com/shoenig/test/must"
	"golang.org/x/sys/unix"
)

func TestParseSignal(t *testing.T) {
	cases := []struct {
		name    string
		want    unix.Signal
		wantErr bool
	}{
		{name: "", want: unix.SIGTERM},
		{name: "SIGINT", want: unix.SIGINT},
		{name: "hup", want: unix.SIGHUP},
		{name: " sigusr1 ", want: unix.SIGUSR1},
		{name: "KILL", want: unix.SIGKILL},
		{name: "SIGNOPE", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSignal(tc.name)
			if tc.wantErr {
				must.ErrorContains(t, err, "unknown signal")
				return
			}
			must.NoError(t, err)
			must.Eq(t, tc.want, got)
		})
	}
}

func TestEnv(t *testing.T) {
	must.Eq(t, []string{"A=1", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, Env(map[string]string{"A": "1"}))
	must.Eq(t, []string{"PATH=/x", "Z=2"}, Env(map[string]string{"Z": "2", "PATH": "/x"}))
}
