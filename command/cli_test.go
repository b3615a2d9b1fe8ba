package command

import (
	"bytes"
	"flag"
	"testing"

	"github.com/shoenig/test/must"
)

func TestRun_TypoSuggestion(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"volum", "status"}, `Unknown command "volum". Did you mean "volume"?`},
		{[]string{"volume", "stats"}, `Unknown subcommand "stats" of "volume". Did you mean "status"?`},
		{[]string{"volume", "snapshot", "lst"}, `Unknown subcommand "lst" of "volume snapshot". Did you mean "list"?`},
		{[]string{"nod", "drain"}, `Did you mean "node"?`},
	}
	for _, c := range cases {
		var out, errOut bytes.Buffer
		must.Eq(t, 1, Run(c.args, &out, &errOut))
		must.StrContains(t, errOut.String(), c.want)
	}
	// Nothing close: named, with no made-up suggestion.
	var out, errOut bytes.Buffer
	must.Eq(t, 1, Run([]string{"frobnicate"}, &out, &errOut))
	must.StrContains(t, errOut.String(), `Unknown command "frobnicate".`)
	must.StrNotContains(t, errOut.String(), "Did you mean")
}

func TestRun_HelpExitsZeroOnStdout(t *testing.T) {
	for _, args := range [][]string{
		{"volume", "--help"}, {"volume", "-help"}, {"volume", "-h"}, {"volume", "snapshot", "--help"},
		{"volume", "status", "--help"}, {"volume", "status", "vol-1", "-help"}, {"job", "status", "-json", "--help"},
	} {
		var out, errOut bytes.Buffer
		must.Eq(t, 0, Run(args, &out, &errOut), must.Sprintf("%v", args))
		must.StrContains(t, out.String(), "Usage: berth", must.Sprintf("%v", args))
		must.Eq(t, "", errOut.String(), must.Sprintf("%v", args))
	}
	// A group without a subcommand is still an error.
	var out, errOut bytes.Buffer
	must.Eq(t, 1, Run([]string{"volume"}, &out, &errOut))
	must.StrContains(t, errOut.String(), "volume status")
}

func TestParseArgs_FlagsAfterPositionals(t *testing.T) {
	cases := []struct {
		args    []string
		verbose bool
		node    string
		pos     []string
	}{
		{[]string{"vol-1", "-verbose"}, true, "", []string{"vol-1"}},
		{[]string{"-verbose", "vol-1"}, true, "", []string{"vol-1"}},
		{[]string{"a", "-node", "n1", "b"}, false, "n1", []string{"a", "b"}},
		{[]string{"a", "--", "-verbose"}, false, "", []string{"a", "-verbose"}},
		{[]string{"-", "-verbose"}, true, "", []string{"-"}},
	}
	for _, c := range cases {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		verbose := fs.Bool("verbose", false, "")
		node := fs.String("node", "", "")
		must.NoError(t, parseArgs(fs, c.args))
		must.Eq(t, c.verbose, *verbose, must.Sprintf("%v", c.args))
		must.Eq(t, c.node, *node, must.Sprintf("%v", c.args))
		must.Eq(t, c.pos, fs.Args(), must.Sprintf("%v", c.args))
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(&bytes.Buffer{})
	must.Error(t, parseArgs(fs, []string{"a", "-nope"}))
}

// Through a real command: the flag after the volume ID takes effect.
func TestVolumeStatus_FlagAfterID(t *testing.T) {
	f := newFakeAPI(t)
	seedCluster(f)
	code, out, errOut := f.run("volume", "status", "data", "-json")
	must.Eq(t, 0, code, must.Sprint(errOut))
	must.StrContains(t, out, `"ID": "data"`)
}

// An environment set up for Nomad's CLI reaches the agent: NOMAD_ADDR and
// NOMAD_TOKEN are read when the BERTH_* ones are unset, and BERTH_* wins.
func TestRun_NomadEnvFallback(t *testing.T) {
	f := newFakeAPI(t)
	seedCluster(f)
	t.Setenv("BERTH_ADDR", "")
	t.Setenv("NOMAD_ADDR", f.srv.URL)
	code, out, errOut := f.run("volume", "status", "data", "-json")
	must.Eq(t, 0, code, must.Sprint(errOut))
	must.StrContains(t, out, `"ID": "data"`)

	t.Setenv("BERTH_ADDR", "http://127.0.0.1:1")
	code, _, errOut = f.run("volume", "status", "data")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, "127.0.0.1:1")
}
