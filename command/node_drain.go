package command

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
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
	return `Usage: berth node drain [options] (-enable | -disable | -monitor) <node>

  Draining a node makes it ineligible for new allocations and migrates its
  allocations elsewhere; allocations still running at the deadline are
  stopped. Their volume claims are released as their tasks exit, so the
  replacements can claim the volumes. With -enable the command follows the
  drain until every allocation on the node has stopped, unless -detach: it
  prints each allocation that leaves the node and where its replacement
  was placed. -monitor alone follows a drain already under way.
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

  -monitor
    Follow the node's drain until it ends. Alone, it changes nothing;
    with -enable it is what -enable does without -detach.

  -yes
    Do not ask for confirmation.

  -verbose
    Show full IDs.
` + sharedHelp(false)
}

func (c *NodeDrainCommand) Run(args []string) int {
	fs := c.flagSet("node drain", false)
	var enable, disable, force, noDeadline, ignoreSystem, keepIneligible, detach, yes, monitorOnly bool
	var deadline time.Duration
	fs.BoolVar(&enable, "enable", false, "")
	fs.BoolVar(&disable, "disable", false, "")
	fs.DurationVar(&deadline, "deadline", time.Hour, "")
	fs.BoolVar(&force, "force", false, "")
	fs.BoolVar(&noDeadline, "no-deadline", false, "")
	fs.BoolVar(&ignoreSystem, "ignore-system", false, "")
	fs.BoolVar(&keepIneligible, "keep-ineligible", false, "")
	fs.BoolVar(&detach, "detach", false, "")
	fs.BoolVar(&monitorOnly, "monitor", false, "")
	fs.BoolVar(&yes, "yes", false, "")
	fs.BoolVar(&c.verbose, "verbose", false, "")
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	switch {
	case monitorOnly && (disable || detach):
		return flagErr(c.ui, c.Help(), "-monitor follows a drain: it goes alone or with -enable, not with -disable or -detach.")
	case monitorOnly && !enable:
		changing := false
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "deadline", "force", "no-deadline", "ignore-system", "keep-ineligible":
				changing = true
			}
		})
		if changing {
			return flagErr(c.ui, c.Help(), "-monitor alone does not change the drain: give -enable with drain options.")
		}
		if fs.NArg() != 1 {
			return flagErr(c.ui, c.Help(), "This command takes one argument: the node ID.")
		}
		return c.monitorExisting(fs.Arg(0))
	case enable == disable:
		return flagErr(c.ui, c.Help(), "Give exactly one of -enable, -disable and -monitor.")
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

// monitorExisting follows the drain a node is under, changing nothing.
func (c *NodeDrainCommand) monitorExisting(prefix string) int {
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	stub, _, err := c.resolveNode(client, prefix)
	if err != nil {
		c.ui.Error("%v", err)
		return 1
	}
	node, _, err := client.Nodes().Info(stub.ID, nil)
	if err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("reading node %q", stub.ID), err))
		return 1
	}
	if node.DrainStrategy == nil {
		c.ui.Output("Node %q is not draining: nothing to monitor (start a drain with 'berth node drain -enable %s').", node.ID, shortID(node.ID, c.verbose))
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return c.monitor(ctx, client, node.ID, node.DrainStrategy.IgnoreSystemJobs)
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
	mig := newMigrations(client, nodeID)
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
				mig.leaving(a)
			}
			if prev != nil && prev.ClientStatus != a.ClientStatus {
				c.log(false, "Alloc %q status %q -> %q", id, prev.ClientStatus, a.ClientStatus)
			}
			if !a.ClientTerminalStatus() {
				remaining++
			}
			seen[a.ID] = a
		}
		c.reportMigrations(mig)
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
		c.reportMigrations(mig)
		if !node.Drain && node.DrainStrategy == nil {
			for _, id := range mig.unplaced() {
				c.log(false, "Alloc %q left the node; no replacement placed yet (berth job status %s shows why)", shortID(id, c.verbose), mig.pending[id].JobID)
			}
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

// migrations finds where the allocations leaving a drained node were
// replaced: a replacement names the alloc it replaces in
// PreviousAllocation, and is placed in the same plan that stops the old
// one (or later, when nothing fitted at first).
type migrations struct {
	client *api.Client
	nodeID string
	// pending are the leaving allocs whose replacement is not seen yet.
	pending map[string]*api.Allocation
	// inspected are allocs already read, replacement or not.
	inspected map[string]bool
}

func newMigrations(client *api.Client, nodeID string) *migrations {
	return &migrations{client: client, nodeID: nodeID, pending: map[string]*api.Allocation{}, inspected: map[string]bool{}}
}

// leaving records an alloc the drain stops.
func (m *migrations) leaving(a *api.Allocation) {
	if a.JobID != "" {
		m.pending[a.ID] = a
	}
}

// migration is one replacement found.
type migration struct {
	old, repl *api.Allocation
}

// found looks for the pending allocs' replacements among their jobs'
// allocs elsewhere. Errors leave them pending: the next pass retries.
func (m *migrations) found() []migration {
	jobs := map[[2]string]bool{}
	for _, a := range m.pending {
		jobs[[2]string{a.Namespace, a.JobID}] = true
	}
	var out []migration
	for _, k := range sortedJobKeys(jobs) {
		stubs, _, err := m.client.Jobs().Allocations(k[1], false, &api.QueryOptions{Namespace: k[0]})
		if err != nil {
			continue
		}
		for _, s := range stubs {
			if m.inspected[s.ID] || m.pending[s.ID] != nil || s.NodeID == m.nodeID {
				continue
			}
			a, _, err := m.client.Allocations().Info(s.ID, nil)
			if err != nil {
				continue
			}
			m.inspected[s.ID] = true
			if old := m.pending[a.PreviousAllocation]; old != nil {
				out = append(out, migration{old: old, repl: a})
				delete(m.pending, old.ID)
			}
		}
	}
	return out
}

// unplaced lists the pending allocs, by ID.
func (m *migrations) unplaced() []string { return sortedKeys(m.pending) }

func sortedJobKeys(m map[[2]string]bool) [][2]string {
	out := make([][2]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i][0] != out[j][0] {
			return out[i][0] < out[j][0]
		}
		return out[i][1] < out[j][1]
	})
	return out
}

// reportMigrations prints the replacements found since the last pass.
func (c *NodeDrainCommand) reportMigrations(m *migrations) {
	if len(m.pending) == 0 {
		return
	}
	for _, mg := range m.found() {
		node := mg.repl.NodeName
		if node == "" {
			node = shortID(mg.repl.NodeID, c.verbose)
		}
		c.log(false, "Alloc %q migrated: replaced by alloc %q on node %q", shortID(mg.old.ID, c.verbose), shortID(mg.repl.ID, c.verbose), node)
	}
}
