package early_test

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/testutil"
)

const executorPkg = "github.com/berth-io/berth/plugins/drivers/executor"

// heavy are packages of the berth binary that an executor never uses and
// whose init costs: the server's data model and its regexps, the CLI, gRPC
// and the CSI descriptors, raft-wal's CRC tables, go-cmp (via hclwrite),
// hclog.
var heavy = []string{
	"github.com/berth-io/berth/nomad/structs",
	"github.com/berth-io/berth/command",
	"google.golang.org/grpc",
	"github.com/container-storage-interface/spec/lib/go/csi",
	"github.com/hashicorp/raft-wal/segment",
	"github.com/google/go-cmp/cmp",
	"github.com/hashicorp/go-hclog",
	"net",
}

// initialised runs the berth binary with GODEBUG=inittrace=1 and returns
// the packages it initialised, with its exit code and other output.
func initialised(t *testing.T, bin string, env []string, args ...string) (pkgs map[string]bool, code int, rest string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"GODEBUG=inittrace=1", "PATH=" + os.Getenv("PATH")}, env...)
	cmd.Dir = t.TempDir()
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		must.NoError(t, err)
	}
	pkgs = map[string]bool{}
	var other strings.Builder
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		// init <package> @<start> ms, <clock> ms clock, ...
		if f := strings.Fields(sc.Text()); len(f) > 2 && f[0] == "init" && strings.HasPrefix(f[2], "@") {
			pkgs[f[1]] = true
			continue
		}
		other.WriteString(sc.Text() + "\n")
	}
	return pkgs, code, other.String()
}

// TestEarlyInit: the berth binary started as an executor or as a task's
// init (as Launch and the executor start it) runs before the packages it
// does not need are initialised; started as anything else, it initialises
// them (so the list names packages the binary really has).
func TestEarlyInit(t *testing.T) {
	bin := testutil.BuildBerth(t)

	all, code, out := initialised(t, bin, nil, "version")
	must.Eq(t, 0, code, must.Sprint(out))
	for _, p := range append(heavy, executorPkg) {
		must.True(t, all[p], must.Sprintf("berth version did not initialise %s: is it still in the binary?", p))
	}

	env := []string{"BERTH_EXECUTOR=1"}
	for _, tc := range []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"init", []string{"executor", "-init"}, 2, "no control socket on fd 3"},
		{"executor", []string{"executor", filepath.Join(t.TempDir(), "spec.json")}, 1, "reading executor spec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pkgs, code, out := initialised(t, bin, env, tc.args...)
			must.Eq(t, tc.code, code, must.Sprint(out))
			must.StrContains(t, out, tc.out)
			must.True(t, pkgs[executorPkg], must.Sprint("the executor ran before its package was initialised"))
			for _, p := range heavy {
				must.False(t, pkgs[p], must.Sprintf("%s was initialised before the executor ran", p))
			}
			// A loose bound on the rest: 196 packages at the time of writing
			// for berth version, 109 here.
			must.Less(t, len(all)*2/3, len(pkgs), must.Sprintf("%d of %d packages initialised", len(pkgs), len(all)))
		})
	}

	// By hand (no BERTH_EXECUTOR) it is the CLI's usage, after a full init.
	pkgs, code, out := initialised(t, bin, nil, "executor")
	must.Eq(t, 2, code, must.Sprint(out))
	must.StrContains(t, out, "usage: berth executor")
	must.True(t, pkgs["github.com/berth-io/berth/command"])
}
