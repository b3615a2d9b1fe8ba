package testutil

import (
	"bufio"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

const module = "github.com/berth-io/berth"

// fileImports is what one .go file imports.
type fileImports struct {
	pkg     string // package path under the module, e.g. "nomad/state"
	file    string // path relative to the repository
	test    bool   // a _test.go file
	imports []string
}

// scanImports parses the imports of every .go file under root, ignoring
// build constraints: files for every GOOS (mounts_linux.go and
// mounts_other.go alike) and every build tag are checked, which `go list`
// for one platform would miss. Nested modules (compat/) are included under
// their own module path. Like the go tool, it skips testdata and
// directories starting with "." or "_".
func scanImports(root string) ([]fileImports, error) {
	modules := map[string]string{} // dir relative to root -> module path
	var out []fileImports
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		name := d.Name()
		if d.IsDir() {
			if rel != "." && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if name == "go.mod" {
			mod, err := modulePath(p)
			if err != nil {
				return err
			}
			modules[path.Dir(rel)] = mod
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return fmt.Errorf("parsing %s: %w", rel, err)
		}
		fi := fileImports{file: rel, test: strings.HasSuffix(name, "_test.go")}
		for _, is := range f.Imports {
			ip, err := strconv.Unquote(is.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: import %s: %w", rel, is.Path.Value, err)
			}
			fi.imports = append(fi.imports, ip)
		}
		out = append(out, fi)
		return nil
	})
	if err != nil {
		return nil, err
	}
	// WalkDir visits a directory's go.mod before its subdirectories, but
	// .go files may come first in lexical order: resolve paths afterwards.
	for i := range out {
		dir := path.Dir(out[i].file)
		modDir := dir
		for modules[modDir] == "" && modDir != "." {
			modDir = path.Dir(modDir)
		}
		mod := modules[modDir]
		if mod == "" {
			return nil, fmt.Errorf("%s: no go.mod above it", out[i].file)
		}
		ip := mod
		if dir != modDir {
			ip = mod + "/" + strings.TrimPrefix(dir, modDir+"/")
		}
		pkg, ok := cutModule(ip)
		if !ok {
			return nil, fmt.Errorf("%s: package %s is outside %s", out[i].file, ip, module)
		}
		out[i].pkg = pkg
	}
	return out, nil
}

func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`), nil
		}
	}
	return "", fmt.Errorf("%s: no module line", gomod)
}

// cutModule turns a Berth import path into a path under the module.
func cutModule(ip string) (string, bool) {
	if ip == module {
		return "", true
	}
	return strings.CutPrefix(ip, module+"/")
}

func ruleFor(rules []importRule, pkg string) *importRule {
	var best *importRule
	for i := range rules {
		r := &rules[i]
		if under(pkg, r.pkg) && (best == nil || len(r.pkg) > len(best.pkg)) {
			best = r
		}
	}
	return best
}

// under says whether p is prefix or a package below it.
func under(p, prefix string) bool {
	return prefix == "" || p == prefix || strings.HasPrefix(p, prefix+"/")
}

func (r *importRule) allowsBerth(imp string) bool {
	if under(imp, r.pkg) {
		return true
	}
	return slices.ContainsFunc(r.berth, func(a string) bool { return under(imp, a) })
}

// isTestDouble says whether a Berth package exists only for tests: fakes,
// mocks and test helpers (testutil, testlog) — any path element that
// contains "fake" or "mock" or starts with "test". Production code may
// not import them.
func isTestDouble(pkg string) bool {
	for _, e := range strings.Split(pkg, "/") {
		if strings.Contains(e, "fake") || strings.Contains(e, "mock") || strings.HasPrefix(e, "test") {
			return true
		}
	}
	return false
}

// isStd says whether an import path is the standard library's: its first
// element has no dot.
func isStd(ip string) bool {
	first, _, _ := strings.Cut(ip, "/")
	return !strings.Contains(first, ".")
}

// moduleOf finds the module in mods that provides ip.
func moduleOf[V any](mods map[string]V, ip string) (string, bool) {
	for m := range mods {
		if under(ip, m) {
			return m, true
		}
	}
	return "", false
}

// checkImports returns every import in files that breaks the rules,
// sorted, one line each, naming the file and the rule.
func checkImports(files []fileImports, rules []importRule, third map[string]string) []string {
	var bad []string
	report := func(f fileImports, format string, a ...any) {
		bad = append(bad, f.file+": "+fmt.Sprintf(format, a...))
	}
	for _, f := range files {
		if f.test {
			for _, ip := range f.imports {
				if m, ok := moduleOf(bannedInTests, ip); ok && !under(f.pkg, "compat") {
					report(f, "imports %s: %s", ip, bannedInTests[m])
				}
			}
			continue
		}
		r := ruleFor(rules, f.pkg)
		if r == nil {
			report(f, "package %q has no import rule: add it to importRules (testutil/deps_rules_test.go) and regenerate DESIGN.md §1", f.pkg)
			continue
		}
		double := isTestDouble(f.pkg) || r.doubles
		for _, ip := range f.imports {
			switch berth, ok := cutModule(ip); {
			case ok:
				if isTestDouble(berth) && !double {
					report(f, "imports %s, a test double: production code never imports fakes, mocks or test helpers", berth)
				} else if !r.allowsBerth(berth) {
					report(f, "imports %s, which the rule for %s forbids (%s)", berth, r.pkg, r.why)
				}
			case isStd(ip):
				if under(ip, "testing") && !double {
					report(f, "imports %s: production code never imports the testing packages", ip)
				}
				for _, n := range r.noStd {
					if under(ip, n) {
						report(f, "imports %s, which the rule for %s forbids (%s)", ip, r.pkg, r.why)
					}
				}
			default:
				m, known := moduleOf(third, ip)
				if !known {
					report(f, "imports %s, a third-party module not in thirdParty: add it there with why Berth needs it, then to the rule for %s", ip, r.pkg)
				} else if !slices.Contains(r.third, m) {
					report(f, "imports %s (module %s), which the rule for %s does not allow: add it to that rule's third-party list if %s needs it", ip, m, r.pkg, r.pkg)
				}
			}
		}
	}
	slices.Sort(bad)
	return bad
}

// TestDependencies keeps DESIGN.md §1's import arrows true for production
// code of every platform and of the compat module: Berth's own packages,
// third-party modules per package, and no test doubles outside tests.
func TestDependencies(t *testing.T) {
	files, err := scanImports(repoRoot())
	must.NoError(t, err)
	pkgs := map[string]bool{}
	for _, f := range files {
		pkgs[f.pkg] = true
	}
	// The walk must have seen what `go list` on one platform would miss.
	for _, want := range []string{"client/allocdir/mounts_other.go", "client/allocdir/mounts_linux.go", "compat/doc.go"} {
		must.True(t, slices.ContainsFunc(files, func(f fileImports) bool { return f.file == want }), must.Sprintf("scan missed %s", want))
	}
	must.True(t, pkgs["nomad/structs"] && pkgs["command/agent"] && pkgs["compat"])
	for _, v := range checkImports(files, importRules, thirdParty) {
		t.Error(v)
	}
}

// TestImportRules checks the rules themselves: every third-party module a
// rule names has a reason, and no two rules are for the same package.
func TestImportRules(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range importRules {
		must.False(t, seen[r.pkg], must.Sprintf("two rules for %q", r.pkg))
		seen[r.pkg] = true
		must.NotEq(t, "", r.why, must.Sprintf("rule for %q says no why", r.pkg))
		must.NotEq(t, "", r.what, must.Sprintf("rule for %q says no what", r.pkg))
		for _, m := range r.third {
			_, ok := thirdParty[m]
			must.True(t, ok, must.Sprintf("rule for %q allows %s, which thirdParty does not list", r.pkg, m))
		}
	}
	for m, why := range thirdParty {
		must.NotEq(t, "", why, must.Sprintf("thirdParty %s says no why", m))
	}
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
		{"nomad/structs", "nomad/msgpack", false},
		{"client/allocrunner", "nomad/structs", true},
		{"client/allocrunner", "nomad/state", false},
		{"client", "nomad", false},
		{"client/state", "client/allocrunner", false},
		{"api", "nomad/structs", false},
		{"command", "nomad", false},
		{"command/agent", "nomad", true},
		{"plugins/csi/hostpath", "nomad/structs", false},
		{"plugins/csi", "nomad/structs", true},
		{"jobspec", "api", true},
		{"nomad/leader", "nomad", false},
		{"nomad/leader", "nomad/scheduler", true},
		{"nomad/claims", "nomad/state", false},
	}
	for _, c := range cases {
		r := ruleFor(importRules, c.pkg)
		must.NotNil(t, r, must.Sprintf("no rule for %s", c.pkg))
		must.Eq(t, c.ok, r.allowsBerth(c.imp), must.Sprintf("%s -> %s", c.pkg, c.imp))
	}
	for pkg, want := range map[string]bool{
		"plugins/csi/fake": true, "plugins/drivers/mock": true, "client/internal/fakedriver": true,
		"testutil": true, "testutil/cluster": true, "client/internal/testlog": true,
		"plugins/drivers": false, "nomad/state": false, "client/allocrunner/taskrunner": false,
	} {
		must.Eq(t, want, isTestDouble(pkg), must.Sprintf("isTestDouble(%q)", pkg))
	}
}

// TestCheckImports_CatchesEachRule is the test of the test: a synthetic
// tree that breaks each rule once, next to imports that are fine, must
// produce exactly the expected complaints.
func TestCheckImports_CatchesEachRule(t *testing.T) {
	b := func(p string) string { return module + "/" + p }
	files := []fileImports{
		// Fine: allowed arrows, stdlib, allowed third-party, tests importing more.
		{pkg: "client/allocrunner", file: "client/allocrunner/ok.go", imports: []string{"context", b("nomad/structs"), b("client/state"), "github.com/hashicorp/go-hclog"}},
		{pkg: "client/allocrunner", file: "client/allocrunner/ok_test.go", test: true, imports: []string{b("nomad/state"), b("plugins/drivers/mock"), b("testutil"), "testing", "github.com/shoenig/test/must"}},
		{pkg: "plugins/csi/fake", file: "plugins/csi/fake/fake.go", imports: []string{"testing", b("nomad/structs"), "google.golang.org/grpc/codes"}},
		{pkg: "testutil/cluster", file: "testutil/cluster/c.go", imports: []string{b("plugins/drivers/mock"), b("nomad"), "testing"}},
		{pkg: "compat", file: "compat/compat_test.go", test: true, imports: []string{"github.com/hashicorp/nomad/api"}},
		{pkg: "cmd/berth-nodesim", file: "cmd/berth-nodesim/node.go", imports: []string{b("plugins/csi/fake"), b("plugins/drivers/mock")}},

		// 1. A Berth arrow the rule forbids, in a file for another GOOS.
		{pkg: "client/logs", file: "client/logs/collapse_other.go", imports: []string{b("nomad/state")}},
		// 2. A test double in production code, three kinds.
		{pkg: "command/agent", file: "command/agent/agent_client.go", imports: []string{b("plugins/drivers/mock")}},
		{pkg: "client", file: "client/client.go", imports: []string{b("client/internal/fakedriver")}},
		{pkg: "nomad", file: "nomad/server.go", imports: []string{b("testutil")}},
		{pkg: "cmd/berth-bench", file: "cmd/berth-bench/floors.go", imports: []string{b("plugins/csi/fake")}},
		// 3. The testing package in production code.
		{pkg: "nomad/state", file: "nomad/state/store.go", imports: []string{"testing"}},
		// 4. A third-party module the package's rule does not list.
		{pkg: "nomad/structs", file: "nomad/structs/message.go", imports: []string{"github.com/hashicorp/go-msgpack/v2/codec"}},
		// 5. A third-party module nobody listed.
		{pkg: "helper", file: "helper/x_darwin.go", imports: []string{"github.com/pkg/errors"}},
		// 6. Standard library the rule forbids.
		{pkg: "nomad/structs", file: "nomad/structs/rpc_codec.go", imports: []string{"net/rpc"}},
		// 7. A package without a rule.
		{pkg: "newthing", file: "newthing/a.go", imports: []string{"fmt"}},
		// 8. A banned module in a test of the main module.
		{pkg: "api", file: "api/api_test.go", test: true, imports: []string{"github.com/hashicorp/nomad/api"}},
		// 9. The compat module's production code follows its rule.
		{pkg: "compat", file: "compat/doc.go", imports: []string{b("nomad/structs")}},
	}
	got := checkImports(files, importRules, thirdParty)
	want := []string{
		"api/api_test.go: imports github.com/hashicorp/nomad/api",
		"client/client.go: imports client/internal/fakedriver, a test double",
		"client/logs/collapse_other.go: imports nomad/state, which the rule for client forbids",
		"cmd/berth-bench/floors.go: imports plugins/csi/fake, a test double",
		"command/agent/agent_client.go: imports plugins/drivers/mock, a test double",
		"compat/doc.go: imports nomad/structs, which the rule for compat forbids",
		"helper/x_darwin.go: imports github.com/pkg/errors, a third-party module not in thirdParty",
		"newthing/a.go: package \"newthing\" has no import rule",
		"nomad/server.go: imports testutil, a test double",
		"nomad/state/store.go: imports testing: production code never imports the testing packages",
		"nomad/structs/message.go: imports github.com/hashicorp/go-msgpack/v2/codec (module github.com/hashicorp/go-msgpack), which the rule for nomad/structs does not allow",
		"nomad/structs/rpc_codec.go: imports net/rpc, which the rule for nomad/structs forbids",
	}
	must.SliceLen(t, len(want), got, must.Sprintf("got:\n%s", strings.Join(got, "\n")))
	for i := range want {
		must.StrHasPrefix(t, want[i], got[i])
	}
}

// TestScanImports_EveryPlatformAndModule checks that the scanner sees files
// for other platforms and build tags, and nested modules under their own
// path, and skips testdata.
func TestScanImports_EveryPlatformAndModule(t *testing.T) {
	root := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(root, rel)
		must.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	write("go.mod", "module "+module+"\n")
	write("client/x_darwin.go", "//go:build darwin\n\npackage client\n\nimport \""+module+"/nomad\"\n")
	write("client/x_other.go", "//go:build !linux && !darwin\n\npackage client\n\nimport \"testing\"\n")
	write("client/x_test.go", "package client\n\nimport \""+module+"/nomad/state\"\n")
	write("client/testdata/y.go", "package y\n\nimport \""+module+"/nomad\"\n")
	write("compat/go.mod", "module "+module+"/compat\n")
	write("compat/doc.go", "package compat\n\nimport \""+module+"/nomad/state\"\n")
	write(".bin/z.go", "package z\n\nimport \""+module+"/nomad\"\n")

	files, err := scanImports(root)
	must.NoError(t, err)
	got := checkImports(files, importRules, thirdParty)
	must.SliceLen(t, 3, got, must.Sprintf("got:\n%s", strings.Join(got, "\n")))
	must.StrHasPrefix(t, "client/x_darwin.go: imports nomad, which the rule for client forbids", got[0])
	must.StrHasPrefix(t, "client/x_other.go: imports testing", got[1])
	must.StrHasPrefix(t, "compat/doc.go: imports nomad/state, which the rule for compat forbids", got[2])
}
