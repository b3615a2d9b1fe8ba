package command

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/berth-io/berth/api"
)

func init() {
	register("alloc stop", func(ui *UI) Command { return &AllocStopCommand{Meta: Meta{ui: ui}} })
	register("alloc restart", func(ui *UI) Command { return &AllocRestartCommand{Meta: Meta{ui: ui}} })
	register("alloc signal", func(ui *UI) Command { return &AllocSignalCommand{Meta: Meta{ui: ui}} })
}

// lifecycleTarget resolves the allocation (ID or unique prefix) and the
// task a lifecycle command names; task "" with all means every task.
func (m *Meta) lifecycleTarget(client *api.Client, prefix, task string, all bool) (*api.Allocation, string, error) {
	lc := &AllocLogsCommand{Meta: *m}
	alloc, err := lc.resolveAlloc(client, prefix)
	if err != nil {
		return nil, "", err
	}
	if all || task == "" {
		return alloc, "", nil
	}
	task, err = pickTask(alloc, task, m.verbose, "%s <task>") // task is never empty here
	return alloc, task, err
}

// AllocStopCommand stops an allocation; the scheduler replaces it.
type AllocStopCommand struct{ Meta }

func (c *AllocStopCommand) Synopsis() string { return "Stop an allocation and have it replaced" }

func (c *AllocStopCommand) Help() string {
	return `Usage: berth alloc stop [options] <allocation>

  Stops an allocation. The scheduler then places a replacement, on the
  same node or another, as it would for a failed one; the stopped
  allocation releases its volume claims as any stopped allocation does.
  Needs alloc-lifecycle in the allocation's namespace.

Stop Options:

  -detach
    Return once the stop is recorded, instead of following the evaluation
    that places the replacement until it runs.

  -verbose
    Show full IDs.
` + sharedHelp(false)
}

func (c *AllocStopCommand) Run(args []string) int {
	fs := c.flagSet("alloc stop", false)
	var detach bool
	fs.BoolVar(&detach, "detach", false, "")
	fs.BoolVar(&c.verbose, "verbose", false, "")
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if fs.NArg() != 1 {
		return flagErr(c.ui, c.Help(), "This command takes one argument: the allocation ID.")
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	alloc, _, err := c.lifecycleTarget(client, fs.Arg(0), "", true)
	if err != nil {
		c.ui.Error("%v", err)
		return 1
	}
	resp, err := client.Allocations().Stop(alloc.ID, &api.WriteOptions{Namespace: alloc.Namespace})
	if err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("stopping allocation %s", shortID(alloc.ID, c.verbose)), err))
		return 1
	}
	c.ui.Output("Allocation %s stopped; evaluation %s places its replacement (berth eval status %s).",
		shortID(alloc.ID, c.verbose), shortID(resp.EvalID, c.verbose), shortID(resp.EvalID, c.verbose))
	if detach {
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return newMonitor(c.ui, client, alloc.Namespace, c.verbose).run(ctx, resp.EvalID, alloc.JobID, true, 0)
}

// AllocRestartCommand restarts tasks of a running allocation.
type AllocRestartCommand struct{ Meta }

func (c *AllocRestartCommand) Synopsis() string { return "Restart a running allocation or task" }

func (c *AllocRestartCommand) Help() string {
	return `Usage: berth alloc restart [options] <allocation> [<task>]

  Restarts a task of a running allocation in place, or every running task
  when none is named. The restart does not count against the group's
  restart policy. Needs alloc-lifecycle in the allocation's namespace.

Restart Options:

  -task=<name>
    The task to restart, instead of the second argument.

  -all-tasks
    Restart every running task (the default when no task is named).

  -verbose
    Show full IDs.
` + sharedHelp(false)
}

func (c *AllocRestartCommand) Run(args []string) int {
	fs := c.flagSet("alloc restart", false)
	var task string
	var all bool
	fs.StringVar(&task, "task", "", "")
	fs.BoolVar(&all, "all-tasks", false, "")
	fs.BoolVar(&c.verbose, "verbose", false, "")
	if rc, ok := parseAllocTaskArgs(c.ui, c.Help(), fs, args, &task); !ok {
		return rc
	}
	if all && task != "" {
		return flagErr(c.ui, c.Help(), "Give either a task or -all-tasks, not both.")
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	alloc, task, err := c.lifecycleTarget(client, fs.Arg(0), task, all)
	if err != nil {
		c.ui.Error("%v", err)
		return 1
	}
	if err := client.Allocations().Restart(alloc.ID, task, &api.WriteOptions{Namespace: alloc.Namespace}); err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("restarting %s", describeTarget(alloc, task, c.verbose)), err))
		return 1
	}
	c.ui.Output("Restarting %s.", describeTarget(alloc, task, c.verbose))
	return 0
}

// AllocSignalCommand sends a signal to tasks of a running allocation.
type AllocSignalCommand struct{ Meta }

func (c *AllocSignalCommand) Synopsis() string {
	return "Send a signal to a running allocation or task"
}

func (c *AllocSignalCommand) Help() string {
	return `Usage: berth alloc signal [options] <allocation> [<task>]

  Sends a signal to a task of a running allocation, or to every running
  task when none is named. Needs alloc-lifecycle in the allocation's
  namespace.

Signal Options:

  -s=<signal>
    The signal, by name (SIGHUP or HUP). The default is SIGKILL, as
    Nomad's.

  -task=<name>
    The task to signal, instead of the second argument.

  -verbose
    Show full IDs.
` + sharedHelp(false)
}

func (c *AllocSignalCommand) Run(args []string) int {
	fs := c.flagSet("alloc signal", false)
	var task, sig string
	fs.StringVar(&sig, "s", "", "")
	fs.StringVar(&task, "task", "", "")
	fs.BoolVar(&c.verbose, "verbose", false, "")
	if rc, ok := parseAllocTaskArgs(c.ui, c.Help(), fs, args, &task); !ok {
		return rc
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	alloc, task, err := c.lifecycleTarget(client, fs.Arg(0), task, false)
	if err != nil {
		c.ui.Error("%v", err)
		return 1
	}
	sig = strings.ToUpper(strings.TrimSpace(sig))
	if sig != "" && !strings.HasPrefix(sig, "SIG") {
		sig = "SIG" + sig
	}
	if err := client.Allocations().Signal(alloc.ID, task, sig, &api.WriteOptions{Namespace: alloc.Namespace}); err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("signalling %s", describeTarget(alloc, task, c.verbose)), err))
		return 1
	}
	if sig == "" {
		sig = "SIGKILL"
	}
	c.ui.Output("Sent %s to %s.", sig, describeTarget(alloc, task, c.verbose))
	return 0
}

// describeTarget names a task of an allocation, or all its tasks.
func describeTarget(alloc *api.Allocation, task string, verbose bool) string {
	if task == "" {
		return fmt.Sprintf("the running tasks of allocation %s", shortID(alloc.ID, verbose))
	}
	return fmt.Sprintf("task %q of allocation %s", task, shortID(alloc.ID, verbose))
}

// parseAllocTaskArgs parses "<allocation> [<task>]" for restart and
// signal: the task comes from -task or the second argument, not both
// differently. ok is false when the command must exit with rc.
func parseAllocTaskArgs(ui *UI, help string, fs *flag.FlagSet, args []string, task *string) (rc int, ok bool) {
	if err := parseArgs(fs, args); err != nil {
		return flagErr(ui, help, "Error parsing flags: %v", err), false
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return flagErr(ui, help, "This command takes an allocation ID and optionally a task name."), false
	}
	if fs.NArg() == 2 {
		if *task != "" && *task != fs.Arg(1) {
			return flagErr(ui, help, "Give the task once: -task=%s and %q differ.", *task, fs.Arg(1)), false
		}
		*task = fs.Arg(1)
	}
	return 0, true
}
