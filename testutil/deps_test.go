package testutil

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

const module = "github.com/berth-io/berth"

// importRule says which of Berth's own packages a package may import
// (DESIGN.md §1). Packages are matched by the longest prefix.
type importRule struct {
	pkg     string   // package path under the module, "" for the root
	allowed []string // package path prefixes it may import; itself and its sub-packages always
	why     string
}

var importRules = []importRule{
	{"cmd/berth", []string{"command"}, "main only dispatches to command"},
	{"cmd/berth-bench", []string{"api"}, "the bench drives a real agent through the HTTP API, as an outside program would"},
	{"command", []string{"api", "jobspec", "helper", "command/agent", "plugins/csi/hostpath", "plugins/drivers/executor"},
		"the CLI speaks the HTTP API; only command/agent wires the server and client; " +
			"built-in plugins and the task executor run from the same binary"},
	{"command/agent", []string{"api", "jobspec", "helper", "nomad", "client", "plugins"}, "the agent wires everything"},
	{"api", nil, "api is usable by outsiders: nothing internal"},
	{"jobspec", []string{"api"}, "jobspecs become api types"},
	{"nomad", []string{"nomad", "plugins/csi", "helper"}, "the server never imports the client or the CLI"},
	{"nomad/structs", []string{"helper"}, "structs is a leaf"},
	{"nomad/acl", []string{"helper"}, "the policy language knows nothing of tokens, Raft or endpoints"},
	{"nomad/msgpack", []string{"nomad/structs"}, "the encoding of the data model, for Raft, RPC and client state"},
	{"nomad/state", []string{"nomad/structs", "helper"}, "the state store knows only the data model"},
	{"nomad/claims", []string{"nomad/structs", "helper"}, "the claim state machine is pure decisions over the data model"},
	{"nomad/volumewatcher", []string{"nomad/claims", "nomad/state", "nomad/structs", "helper"}, "leader loops see state through narrow interfaces"},
	{"nomad/scheduler", []string{"nomad/claims", "nomad/state", "nomad/structs", "helper"}, "schedulers see state through narrow interfaces"},
	{"nomad/leader", []string{"nomad/state", "nomad/structs", "nomad/scheduler", "helper"},
		"the leader runtime sees the server through narrow interfaces (a state func, a Raft applier), never package nomad"},
	{"client", []string{"client", "nomad/structs", "nomad/msgpack", "plugins", "helper"}, "the client never reaches into the server's packages"},
	{"plugins/csi", []string{"nomad/structs", "helper"}, "the CSI wrapper translates at the boundary only"},
	{"plugins/csi/hostpath", nil, "the hostpath plugin speaks only the CSI spec"},
	{"plugins/drivers", []string{"nomad/structs", "helper"}, "drivers know only the data model"},
	{"helper", nil, "helper is a leaf"},
	{"testutil", []string{""}, "test helpers may import anything"},
	{"e2e", nil, "end-to-end tests live in _test.go files and drive the real binary; the package itself is only its doc"},
}

func ruleFor(pkg string) *importRule {
	var best *importRule
	for i := range importRules {
		r := &importRules[i]
		if pkg == r.pkg || strings.HasPrefix(pkg, r.pkg+"/") {
			if best == nil || len(r.pkg) > len(best.pkg) {
				best = r
			}
		}
	}
	return best
}

func (r *importRule) allows(pkg, imp string) bool {
	if imp == r.pkg || strings.HasPrefix(imp, r.pkg+"/") {
		return true
	}
	for _, a := range r.allowed {
		if a == "" || imp == a || strings.HasPrefix(imp, a+"/") {
			return true
		}
	}
	return false
}

// TestDependencies keeps DESIGN.md §1's import arrows true for production
// code (test files may import more), and keeps testutil out of production.
func TestDependencies(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	out, err := exec.Command("go", "list", "-C", root, "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...").CombinedOutput()
	must.NoError(t, err, must.Sprintf("go list: %s", out))

	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], module)
		if !ok {
			continue
		}
		pkg = strings.TrimPrefix(pkg, "/")
		rule := ruleFor(pkg)
		if rule == nil {
			t.Errorf("package %q has no import rule: add it to importRules (and DESIGN.md §1)", pkg)
			continue
		}
		checked++
		for _, imp := range fields[1:] {
			ip, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			if (ip == "testutil" || strings.HasPrefix(ip, "testutil/")) && rule.pkg != "testutil" {
				t.Errorf("%s imports %s: production code must never import testutil", pkg, ip)
				continue
			}
			if !rule.allows(pkg, ip) {
				t.Errorf("%s imports %s, which its rule forbids (%s)", pkg, ip, rule.why)
			}
		}
	}
	must.Positive(t, checked)
}

// TestImportRuleMatching checks the rule lookup itself, so a broken matcher
// cannot make TestDependencies pass vacuously.
func TestImportRuleMatching(t *testing.T) {
	cases := []struct {
		pkg, imp string
		ok       bool
	}{
		{"nomad", "client/allocrunner", false},
		{"nomad", "nomad/state", true},
		{"nomad/state", "nomad", false},
		{"nomad/structs", "nomad/state", false},
		{"client/allocrunner", "nomad/structs", true},
		{"client/allocrunner", "nomad/state", false},
		{"client", "nomad", false},
		{"api", "nomad/structs", false},
		{"command", "nomad", false},
		{"command/agent", "nomad", true},
		{"plugins/csi/hostpath", "nomad/structs", false},
		{"plugins/csi", "nomad/structs", true},
		{"jobspec", "api", true},
		{"nomad/leader", "nomad", false},
		{"nomad/leader", "nomad/scheduler", true},
	}
	for _, c := range cases {
		r := ruleFor(c.pkg)
		must.NotNil(t, r, must.Sprintf("no rule for %s", c.pkg))
		must.Eq(t, c.ok, r.allows(c.pkg, c.imp), must.Sprintf("%s -> %s", c.pkg, c.imp))
	}
}
