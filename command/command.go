// Package command holds Berth's CLI: one file per verb. Run dispatches the
// arguments to the command registered under the longest matching name
// ("volume status" before "volume").
//
// Commands follow Nomad's conventions so operators' habits carry over:
// single-dash flags, -json and -t on reads, unique ID prefixes.
package command

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/berth-io/berth/helper"
)

// Command is one CLI verb.
type Command interface {
	// Synopsis is one line for the command list.
	Synopsis() string
	// Help is the full usage text.
	Help() string
	// Run executes the command with the arguments after its name and
	// returns the process exit code (0 ok, 1 error).
	Run(args []string) int
}

// UI is where commands write; tests swap it for buffers.
type UI struct {
	Out io.Writer
	Err io.Writer
}

// Output prints a line to standard output.
func (u *UI) Output(format string, a ...any) { fmt.Fprintf(u.Out, format+"\n", a...) }

// Error prints a line to standard error.
func (u *UI) Error(format string, a ...any) { fmt.Fprintf(u.Err, format+"\n", a...) }

// factory builds a command bound to ui.
type factory func(ui *UI) Command

// registry maps a space-separated command name to its factory. Each command
// file registers itself in an init function.
var registry = map[string]factory{}

func register(name string, f factory) {
	if _, dup := registry[name]; dup {
		panic("command registered twice: " + name)
	}
	registry[name] = f
}

// Run dispatches args to a command and returns the exit code.
func Run(args []string, stdout, stderr io.Writer) int {
	ui := &UI{Out: stdout, Err: stderr}
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		ui.Output("%s", usage(""))
		if len(args) == 0 {
			return 1
		}
		return 0
	}
	if args[0] == "version" || args[0] == "-version" || args[0] == "--version" {
		ui.Output("Berth %s", helper.Version)
		return 0
	}
	// Longest prefix of args that names a command.
	for n := len(args); n > 0; n-- {
		name := strings.Join(args[:n], " ")
		f, ok := registry[name]
		if !ok {
			continue
		}
		rest := args[n:]
		cmd := f(ui)
		if wantsHelp(rest) {
			ui.Output("%s", strings.TrimSpace(cmd.Help()))
			return 0
		}
		return cmd.Run(rest)
	}
	// The longest prefix of args that is a group ("volume snapshot").
	group := ""
	n := 0
	for i := len(args); i > 0; i-- {
		if g := strings.Join(args[:i], " "); hasGroup(g) {
			group, n = g, i
			break
		}
	}
	if group != "" {
		rest := args[n:]
		switch {
		case wantsHelp(rest):
			ui.Output("%s", usage(group))
			return 0
		case len(rest) == 0 || strings.HasPrefix(rest[0], "-"):
			ui.Error("%s", usage(group))
			return 1
		}
		ui.Error("Unknown subcommand %q of %q.%s Run 'berth %s -help' for its subcommands.",
			rest[0], group, suggest(rest[0], nextWords(group)), group)
		return 1
	}
	ui.Error("Unknown command %q.%s Run 'berth -help' for the list of commands.", args[0], suggest(args[0], nextWords("")))
	return 1
}

// wantsHelp reports whether args ask for help: -h, -help or --help
// anywhere before a "--".
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// nextWords are the words that may follow prefix ("" for the first word).
func nextWords(prefix string) []string {
	seen := map[string]bool{}
	var out []string
	for name := range registry {
		rest := name
		if prefix != "" {
			var ok bool
			if rest, ok = strings.CutPrefix(name, prefix+" "); !ok {
				continue
			}
		}
		w, _, _ := strings.Cut(rest, " ")
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	sort.Strings(out)
	return out
}

// suggest is ` Did you mean "x"?` for the candidate closest to word (at
// most two edits away, or one it starts), or "" when none is close.
func suggest(word string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		d := editDistance(word, c)
		if len(word) >= 2 && strings.HasPrefix(c, word) {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" Did you mean %q?", best)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func hasGroup(prefix string) bool {
	for name := range registry {
		if strings.HasPrefix(name, prefix+" ") {
			return true
		}
	}
	return false
}

// usage lists the commands under prefix ("" for all).
func usage(prefix string) string {
	var names []string
	for name := range registry {
		if prefix == "" || strings.HasPrefix(name, prefix+" ") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	if prefix == "" {
		b.WriteString("Usage: berth <command> [args]\n\nCommands:\n")
	} else {
		fmt.Fprintf(&b, "Usage: berth %s <subcommand> [args]\n\nSubcommands:\n", prefix)
	}
	width := 0
	for _, n := range names {
		width = max(width, len(n))
	}
	for _, n := range names {
		fmt.Fprintf(&b, "    %-*s  %s\n", width, n, registry[n](&UI{Out: io.Discard, Err: io.Discard}).Synopsis())
	}
	return strings.TrimRight(b.String(), "\n")
}
