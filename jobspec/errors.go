package jobspec

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
)

// Problem is one thing wrong with a spec file, and where it is.
type Problem struct {
	Filename string
	// Line and Column are 1-based; both are 0 when the problem is about
	// the file as a whole.
	Line, Column int
	Summary      string
	Detail       string
	// Source is the line of the file the problem is on, when known.
	Source string
}

// String renders the problem as "file:line,col: summary; detail", then
// the source line it is on.
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.Filename)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d,%d", p.Line, p.Column)
	}
	b.WriteString(": ")
	b.WriteString(p.Summary)
	if p.Detail != "" {
		b.WriteString("; ")
		b.WriteString(p.Detail)
	}
	if p.Source != "" {
		fmt.Fprintf(&b, "\n%5d | %s", p.Line, excerpt(p.Source, p.Column))
	}
	return b.String()
}

// maxSourceWidth is how much of a source line a problem quotes.
const maxSourceWidth = 120

// excerpt is the part of a source line worth quoting: at most
// maxSourceWidth characters around column col, with control characters
// (which could upset a terminal) shown as "?".
func excerpt(line string, col int) string {
	rs := []rune(line)
	start, end := 0, len(rs)
	if len(rs) > maxSourceWidth {
		start = max(0, col-1-maxSourceWidth/2)
		end = min(len(rs), start+maxSourceWidth)
		start = max(0, end-maxSourceWidth)
	}
	var b strings.Builder
	if start > 0 {
		b.WriteString("…")
	}
	for _, r := range rs[start:end] {
		if r != '\t' && (unicode.IsControl(r) || r == utf8.RuneError) {
			r = '?'
		}
		b.WriteRune(r)
	}
	if end < len(rs) {
		b.WriteString("…")
	}
	return b.String()
}

// Error is every problem found in one file, in file order.
type Error struct {
	Problems []Problem
}

// maxShownProblems is how many problems Error lists; a file that is not
// HCL at all can have one per byte.
const maxShownProblems = 20

func (e *Error) Error() string {
	n := min(len(e.Problems), maxShownProblems)
	parts := make([]string, 0, n+1)
	for _, p := range e.Problems[:n] {
		parts = append(parts, p.String())
	}
	if more := len(e.Problems) - n; more > 0 {
		parts = append(parts, fmt.Sprintf("... and %d more problems", more))
	}
	return strings.Join(parts, "\n")
}

// newError turns HCL's error diagnostics into an *Error, sorted by
// position, with the source line of each. It returns nil when there are
// no errors.
func newError(filename string, src []byte, diags hcl.Diagnostics) error {
	lines := bytes.Split(src, []byte("\n"))
	lineText := map[int]string{}
	var out []Problem
	type key struct {
		file, summary, detail string
		line, col             int
	}
	seen := map[key]bool{}
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		p := Problem{Filename: filename, Summary: d.Summary, Detail: d.Detail}
		if d.Subject != nil {
			p.Line, p.Column = d.Subject.Start.Line, d.Subject.Start.Column
			if d.Subject.Filename != "" {
				p.Filename = d.Subject.Filename
			}
			if p.Line >= 1 && p.Line <= len(lines) {
				// Many problems can sit on one long line: convert it once.
				text, ok := lineText[p.Line]
				if !ok {
					text = strings.TrimRight(string(lines[p.Line-1]), "\r")
					lineText[p.Line] = text
				}
				p.Source = text
			}
		}
		// The same problem can be found twice, e.g. a value checked as a
		// whole and again piece by piece; say it once.
		if k := (key{p.Filename, p.Summary, p.Detail, p.Line, p.Column}); !seen[k] {
			seen[k] = true
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Line != out[j].Line {
			return out[i].Line < out[j].Line
		}
		return out[i].Column < out[j].Column
	})
	return &Error{Problems: out}
}
