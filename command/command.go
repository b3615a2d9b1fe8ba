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
		if len(rest) > 0 && (rest[0] == "-h" || rest[0] == "-help" || rest[0] == "--help") {
			ui.Output("%s", strings.TrimSpace(cmd.Help()))
			return 0
		}
		return cmd.Run(rest)
	}
	// A group name such as "volume" with no subcommand lists its subcommands.
	if sub := usage(args[0]); sub != "" && !strings.HasPrefix(args[0], "-") {
		if hasGroup(args[0]) {
			ui.Error("%s", sub)
			return 1
		}
	}
	ui.Error("Unknown command %q. Run 'berth -help' for the list of commands.", strings.Join(args, " "))
	return 1
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
