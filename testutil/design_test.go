package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// The import tables in docs/DESIGN.md §1 sit between these markers and
// are generated from importRules and thirdParty.
const (
	designDoc   = "docs/DESIGN.md"
	designBegin = "<!-- BEGIN import rules: generated from testutil/deps_rules_test.go; regenerate with BERTH_UPDATE_DESIGN=1 go test ./testutil -run TestDesignTable -->"
	designEnd   = "<!-- END import rules -->"
)

func code(s string) string { return "`" + s + "`" }

func codeList(items []string) string {
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = code(s)
	}
	return strings.Join(out, ", ")
}

// designTables renders the rules as DESIGN.md shows them.
func designTables(rules []importRule, third map[string]string) string {
	var b strings.Builder
	b.WriteString("| package | what lives there | may import (Berth) | third-party modules | why |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, r := range rules {
		berth := "—"
		switch {
		case slices.Contains(r.berth, ""):
			berth = "any package"
		case len(r.berth) > 0:
			berth = codeList(r.berth)
		}
		if len(r.noStd) > 0 {
			berth += "; from the standard library not " + codeList(r.noStd)
		}
		thirdCol := "—"
		if len(r.third) > 0 {
			thirdCol = codeList(r.third)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", code(r.pkg), r.what, berth, thirdCol, r.why)
	}
	b.WriteString("\n| third-party module | why Berth depends on it |\n|---|---|\n")
	mods := make([]string, 0, len(third))
	for m := range third {
		mods = append(mods, m)
	}
	slices.Sort(mods)
	for _, m := range mods {
		fmt.Fprintf(&b, "| %s | %s |\n", code(m), third[m])
	}
	return b.String()
}

// replaceDesignTables returns doc with the generated block replaced by
// tables, and whether it changed; an error if the markers are missing.
func replaceDesignTables(doc, tables string) (string, bool, error) {
	i := strings.Index(doc, designBegin)
	j := strings.Index(doc, designEnd)
	if i < 0 || j < i {
		return "", false, fmt.Errorf("%s has no %q ... %q block", designDoc, designBegin, designEnd)
	}
	head := doc[:i+len(designBegin)] + "\n"
	out := head + tables + doc[j:]
	return out, out != doc, nil
}

// TestDesignTable keeps docs/DESIGN.md §1 equal to the rules
// TestDependencies enforces. BERTH_UPDATE_DESIGN=1 rewrites it.
func TestDesignTable(t *testing.T) {
	p := filepath.Join(repoRoot(), designDoc)
	doc, err := os.ReadFile(p)
	must.NoError(t, err)
	want, changed, err := replaceDesignTables(string(doc), designTables(importRules, thirdParty))
	must.NoError(t, err)
	if !changed {
		return
	}
	if os.Getenv("BERTH_UPDATE_DESIGN") != "" {
		must.NoError(t, os.WriteFile(p, []byte(want), 0o644))
		t.Logf("rewrote %s §1 from the import rules", designDoc)
		return
	}
	t.Errorf("%s §1 differs from the import rules in testutil/deps_rules_test.go: run\n\tBERTH_UPDATE_DESIGN=1 go test ./testutil -run TestDesignTable\nand commit the result", designDoc)
}

// TestDesignTable_CatchesDrift shows the check fails when the doc and the
// rules disagree, in either direction, and passes when they agree.
func TestDesignTable_CatchesDrift(t *testing.T) {
	rules := []importRule{
		{pkg: "a", what: "A", berth: []string{"b"}, third: []string{"m"}, why: "because"},
		{pkg: "b", what: "B", noStd: []string{"net"}, why: "leaf"},
	}
	third := map[string]string{"m": "needed"}
	tables := designTables(rules, third)
	must.StrContains(t, tables, "| `a` | A | `b` | `m` | because |")
	must.StrContains(t, tables, "| `b` | B | —; from the standard library not `net` | — | leaf |")
	must.StrContains(t, tables, "| `m` | needed |")

	doc := "# Design\n\n" + designBegin + "\n" + tables + designEnd + "\nmore\n"
	_, changed, err := replaceDesignTables(doc, tables)
	must.NoError(t, err)
	must.False(t, changed)

	// The doc edited by hand: a row claims an arrow the rules do not have.
	edited := strings.Replace(doc, "| `a` | A | `b` |", "| `a` | A | `b`, `c` |", 1)
	_, changed, _ = replaceDesignTables(edited, tables)
	must.True(t, changed)

	// The rules changed and the doc was not regenerated.
	rules[1].berth = []string{"a"}
	_, changed, _ = replaceDesignTables(doc, designTables(rules, third))
	must.True(t, changed)

	_, _, err = replaceDesignTables("# no block\n", tables)
	must.Error(t, err)
}
