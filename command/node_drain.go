package command

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/berth-io/berth/api"
)

func init() {
	register("node drain", func(ui *UI) Command { return &NodeDrainCommand{Meta: Meta{ui: ui}} })
}

// NodeDrainCommand starts or stops draining a node.
type NodeDrainCommand struct {
	Meta
	// stdin answers the confirmation; nil means os.Stdin.
	stdin io.Reader
}

func (c *NodeDrainCommand) Synopsis() string { return "Drain a node of its allocations" }

func (c *NodeDrainCommand) Help() string {
	return `Usage: berth node drain [options] (-enable | -disable) <node>

  Draining a node makes it ineligible for new allocations and migrates its
  allocations elsewhere; allocations still running at the deadline are
  stopped. Their volume claims are released as their tasks exit, so the
  replacements can claim the volumes. With -enable the command follows the
  drain until every allocation on the node has stopped, unless -detach.
  A node named by a prefix of its ID needs confirmation (or -yes).

Drain Options:

  -enable
    Start draining the node.

  -disable
    Stop draining the node. It becomes eligible again unless
    -keep-ineligible is given.

  -deadline=<duration>
    How long allocations may take to migrate before they are stopped.
    Default 1h.

  -force
    Stop the allocations at once (no deadline to migrate).

  -no-deadline
    Never force-stop allocations: wait for them to migrate.

  -ignore-system
    Leave system jobs' allocations running.

  -keep-ineligible
    With -disable, keep the node ineligible for new allocations.

  -detach
    Return once the drain is set instead of following it.

  -yes
    Do not ask for confirmation.

  -verbose
    Show full IDs.
` + sharedHelp(false)
}

func (c *NodeDrainCommand) Run(args []string) int {
	fs := c.flagSet("node drain", false)
	var enable, disable, force, noDeadline, ignoreSystem, keepIneligible, detach, yes bool
	var deadline time.Duration
	fs.BoolVar(&enable, "enable", false, "")
	fs.BoolVar(&disable, "disable", false, "")
	fs.DurationVar(&deadline, "deadline", time.Hour, "")
	fs.BoolVar(&force, "force", false, "")
	fs.BoolVar(&noDeadline, "no-deadline", false, "")
	fs.BoolVar(&ignoreSystem, "ignore-system", false, "")
	fs.BoolVar(&keepIneligible, "keep-ineligible", false, "")
	fs.BoolVar(&detach, "detach", false, "")
	fs.BoolVar(&yes, "yes", false, "")
	fs.BoolVar(&c.verbose, "verbose", false, "")
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if enable == disable {
		return flagErr(c.ui, c.Help(), "Give exactly one of -enable and -disable.")
	}
	if fs.NArg() != 1 {
		return flagErr(c.ui, c.Help(), "This command takes one argument: the node ID.")
	}
	deadlineSet := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "deadline" {
			deadlineSet = true
		}
	})
	if n := btoi(force) + btoi(noDeadline) + btoi(deadlineSet); n > 1 {
		return flagErr(c.ui, c.Help(), "Give only one of -deadline, -force and -no-deadline.")
	}
	if enable && deadlineSet && deadline <= 0 {
		return flagErr(c.ui, c.Help(), "-deadline must be positive; use -force to stop allocations at once or -no-deadline to never force them.")
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	node, exact, err := c.resolveNode(client, fs.Arg(0))
	if err != nil {
		c.ui.Error("%v", err)
		return 1
	}
	if !exact && !yes {
		verb := "enable"
		if disable {
			verb = "disable"
		}
		if !confirm(c.ui, c.stdin, fmt.Sprintf("Are you sure you want to %s drain mode for node %q (%s)?", verb, node.ID, node.Name)) {
			c.ui.Output("Cancelled: the drain of node %q was not changed.", node.ID)
			return 0
		}
	}

	var spec *api.DrainSpec
	if enable {
		spec = &api.DrainSpec{Deadline: deadline, IgnoreSystemJobs: ignoreSystem}
		switch {
		case force:
			spec.Deadline = -1
		case noDeadline:
			spec.Deadline = 0
		}
	}
	if _, err := client.Nodes().UpdateDrain(node.ID, spec, disable && !keepIneligible, nil); err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("updating the drain of node %q", node.ID), err))
		return 1
	}
	if disable {
		c.ui.Output("Node %q drain strategy unset", node.ID)
		return 0
	}
	c.ui.Output("Node %q drain strategy set", node.ID)
	if detach {
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return c.monitor(ctx, client, node.ID, ignoreSystem)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (c *NodeDrainCommand) log(banner bool, format string, a ...any) {
	prefix := "    "
	if banner {
		prefix = "==> "
	}
	c.ui.Output("%s%s: %s", prefix, formatTime(timeNow()), fmt.Sprintf(format, a...))
}

// monitor follows the drain through blocking queries: first the node's
// allocations until every one (but system jobs' with ignoreSystem) has
// stopped, then the node until the servers mark the drain complete.
func (c *NodeDrainCommand) monitor(ctx context.Context, client *api.Client, nodeID string, ignoreSystem bool) int {
	short := shortID(nodeID, c.verbose)
	c.log(true, "Monitoring node %q: Ctrl-C stops monitoring, not the drain", short)
	seen := map[string]*api.Allocation{}
	var idx uint64
	for {
		allocs, qm, err := client.Nodes().Allocations(nodeID, blockingOpts(ctx, idx))
		if err != nil {
			return c.monitorErr(ctx, err, nodeID)
		}
		idx = nextIndex(ctx, idx, qm)
		remaining := 0
		for _, a := range allocs {
			if a == nil || (ignoreSystem && a.Job != nil && deref(a.Job.Type) == api.JobTypeSystem) {
				continue
			}
			prev := seen[a.ID]
			id := shortID(a.ID, c.verbose)
			if a.ServerTerminalStatus() && !a.ClientTerminalStatus() && (prev == nil || !prev.ServerTerminalStatus()) {
				c.log(false, "Alloc %q (job %q, group %q) draining", id, a.JobID, a.TaskGroup)
			}
			if prev != nil && prev.ClientStatus != a.ClientStatus {
				c.log(false, "Alloc %q status %q -> %q", id, prev.ClientStatus, a.ClientStatus)
			}
			if !a.ClientTerminalStatus() {
				remaining++
			}
			seen[a.ID] = a
		}
		if remaining == 0 {
			break
		}
	}
	c.log(true, "All allocations on node %q have stopped", short)
	idx = 0
	for {
		node, qm, err := client.Nodes().Info(nodeID, blockingOpts(ctx, idx))
		if err != nil {
			return c.monitorErr(ctx, err, nodeID)
		}
		if !node.Drain && node.DrainStrategy == nil {
			c.log(true, "Node %q drain complete", short)
			return 0
		}
		idx = nextIndex(ctx, idx, qm)
	}
}

func (c *NodeDrainCommand) monitorErr(ctx context.Context, err error, nodeID string) int {
	if ctx.Err() != nil {
		c.ui.Error("Stopped monitoring; node %q keeps draining. See it with 'berth node status %s'.", nodeID, nodeID)
		return 1
	}
	c.ui.Error("%s", c.apiErr(fmt.Sprintf("following the drain of node %q", nodeID), err))
	return 1
}
