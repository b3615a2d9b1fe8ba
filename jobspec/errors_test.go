package jobspec

import (
	"bytes"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// A file that is not HCL at all has a problem per byte; the message
// stays short.
func TestError_ManyProblems(t *testing.T) {
	_, err := Parse("garbage.hcl", bytes.Repeat([]byte{0x01}, 100_000))
	must.Error(t, err)
	perr := err.(*Error)
	must.Greater(t, maxShownProblems, len(perr.Problems))
	msg := err.Error()
	must.StrHasSuffix(t, "more problems", msg)
	must.Less(t, 20_000, len(msg))
	must.StrNotContains(t, msg, "\x01", must.Sprint("control characters are not echoed"))
}

func TestExcerpt(t *testing.T) {
	long := strings.Repeat("a", 100) + "X" + strings.Repeat("b", 100)
	cases := []struct {
		name string
		line string
		col  int
		want string
	}{
		{"short", "  id = 1", 3, "  id = 1"},
		{"tabs kept, controls replaced", "\tid = \"\x1b[31m\"", 7, "\tid = \"?[31m\""},
		{"window around the column", long, 101, "…" + strings.Repeat("a", 60) + "X" + strings.Repeat("b", 59) + "…"},
		{"window at the start", long, 1, strings.Repeat("a", 100) + "X" + strings.Repeat("b", 19) + "…"},
		{"window at the end", long, 201, "…" + strings.Repeat("a", 19) + "X" + strings.Repeat("b", 100)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, tc.want, excerpt(tc.line, tc.col))
		})
	}
}

func TestProblem_String(t *testing.T) {
	p := Problem{Filename: "a.hcl", Summary: "missing job block"}
	must.Eq(t, "a.hcl: missing job block", p.String())
	p = Problem{Filename: "a.hcl", Line: 2, Column: 3, Summary: "s", Detail: "d", Source: "x = 1"}
	must.Eq(t, "a.hcl:2,3: s; d\n    2 | x = 1", p.String())
}

func TestFreeform_Conflict(t *testing.T) {
	src := `job "x" {
  group "g" {
    task "t" {
      driver = "exec"
      config {
        mount = []
        mount {
          target = "/x"
        }
        huge = 1e400
        nothing = null
      }
    }
  }
}
`
	_, err := Parse("job.hcl", []byte(src))
	must.EqError(t, err, `job.hcl:7,9: mount is both an argument and a block here: want one or the other
    7 |         mount {
job.hcl:10,16: invalid huge: number 1e+400 is too large
   10 |         huge = 1e400`)
}
