package jobspec

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/hashicorp/hcl/v2"
)

// maxNameLength matches the servers' limit on IDs and names.
const maxNameLength = 128

// pathElement records an error at rng unless name — a job ID, a group,
// task or volume name — is one safe path element: the servers refuse
// anything else (clients join task names into directories, the API puts
// IDs in URLs), and saying so here points at the line.
func (d *decoder) pathElement(rng hcl.Range, kind, name string) {
	if problem := pathElementProblem(name); problem != "" {
		d.errorf(rng, "invalid %s %q: %s", kind, name, problem)
	}
}

func pathElementProblem(name string) string {
	switch {
	case name == "":
		return "want a non-empty name"
	case len(name) > maxNameLength:
		return fmt.Sprintf("want at most %d characters, got %d", maxNameLength, len(name))
	case name == "." || name == "..":
		return "it names a directory; pick another name"
	case strings.ContainsAny(name, `/\`):
		return `must not contain / or \ (it is used as a single path element)`
	}
	for _, r := range name {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return "must not contain control characters or invalid UTF-8"
		}
	}
	return ""
}
