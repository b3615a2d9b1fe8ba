package command

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/berth-io/berth/api"
)

// Commands Nomad users reach for first, as Nomad's CLI has them.

func init() {
	register("server members", func(ui *UI) Command { return &ServerMembersCommand{Meta: Meta{ui: ui}} })
	register("eval list", func(ui *UI) Command { return &EvalListCommand{Meta: Meta{ui: ui}} })
	register("eval status", func(ui *UI) Command { return &EvalStatusCommand{Meta: Meta{ui: ui}} })
	register("job inspect", func(ui *UI) Command { return &JobInspectCommand{Meta: Meta{ui: ui}} })
	register("agent-info", func(ui *UI) Command { return &AgentInfoCommand{Meta: Meta{ui: ui}} })
	register("status", func(ui *UI) Command { return &StatusCommand{Meta: Meta{ui: ui}} })
}

// ServerMembersCommand lists the servers and their status.
type ServerMembersCommand struct{ Meta }

func (c *ServerMembersCommand) Synopsis() string { return "List the servers and their status" }

func (c *ServerMembersCommand) Help() string {
	return `Usage: berth server members [options]

  Lists the cluster's servers (the Raft configuration) with each one's
  address, status (alive if it answers a ping now, failed if not) and
  whether it leads.
` + sharedHelp(true)
}

func (c *ServerMembersCommand) Run(args []string) int {
	fs := c.flagSet("server members", true)
	client, code := c.startNoArgs(fs, args, c.Help())
	if client == nil {
		return code
	}
	m, err := client.Agent().Members()
	if err != nil {
		c.ui.Error("%s", c.apiErr("listing the servers", err))
		return 1
	}
	if done, err := c.formatted(m); done {
		return c.fmtResult(err)
	}
	rows := [][]string{{"Name", "Address", "Port", "Status", "Leader", "Raft Version", "Build", "Datacenter", "Region"}}
	for _, s := range m.Members {
		rows = append(rows, []string{s.Name, s.Addr, strconv.Itoa(int(s.Port)), s.Status, s.Tags["leader"], "3",
			noneIfEmpty(s.Tags["build"]), m.ServerDC, m.ServerRegion})
	}
	c.ui.Output("%s", table(rows))
	return 0
}

func noneIfEmpty(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// EvalListCommand lists evaluations.
type EvalListCommand struct{ Meta }

func (c *EvalListCommand) Synopsis() string { return "List evaluations" }

func (c *EvalListCommand) Help() string {
	return `Usage: berth eval list [options]

  Lists the evaluations: what triggered each, for which job and node, and
  its status.
` + sharedHelp(true)
}

func (c *EvalListCommand) Run(args []string) int {
	fs := c.flagSet("eval list", true)
	client, code := c.startNoArgs(fs, args, c.Help())
	if client == nil {
		return code
	}
	evals, _, err := client.Evaluations().List(nil)
	if err != nil {
		c.ui.Error("%s", c.apiErr("listing evaluations", err))
		return 1
	}
	if done, err := c.formatted(evals); done {
		return c.fmtResult(err)
	}
	if len(evals) == 0 {
		c.ui.Output("No evals found")
		return 0
	}
	sort.SliceStable(evals, func(i, j int) bool { return evals[i].CreateIndex > evals[j].CreateIndex })
	rows := [][]string{{"ID", "Priority", "Triggered By", "Job ID", "Namespace", "Node ID", "Status", "Placement Failures"}}
	for _, e := range evals {
		rows = append(rows, []string{shortID(e.ID, c.verbose), strconv.Itoa(e.Priority), e.TriggeredBy, e.JobID,
			e.Namespace, noneIfEmpty(shortID(e.NodeID, c.verbose)), e.Status, strconv.FormatBool(len(e.FailedTGAllocs) > 0)})
	}
	c.ui.Output("%s", table(rows))
	return 0
}

// EvalStatusCommand shows one evaluation.
type EvalStatusCommand struct{ Meta }

func (c *EvalStatusCommand) Synopsis() string { return "Show an evaluation and why placements failed" }

func (c *EvalStatusCommand) Help() string {
	return `Usage: berth eval status [options] <eval>

  Shows an evaluation (by ID or unique ID prefix): its trigger, status,
  what it left queued and, per task group, why placements failed.
` + sharedHelp(true)
}

func (c *EvalStatusCommand) Run(args []string) int {
	fs := c.flagSet("eval status", true)
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if fs.NArg() != 1 {
		return flagErr(c.ui, c.Help(), "This command takes one argument: the evaluation ID.")
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	prefix := fs.Arg(0)
	evals, _, err := client.Evaluations().PrefixList(prefix)
	if err != nil {
		c.ui.Error("%s", c.apiErr("listing evaluations", err))
		return 1
	}
	e, matches, ok := pickByPrefix(prefix, evals, func(e *api.Evaluation) string { return e.ID })
	if !ok {
		if len(matches) == 0 {
			c.ui.Error("%v", notFound("evaluation", prefix, "berth eval list"))
			return 1
		}
		rows := [][]string{{"ID", "Job ID", "Status"}}
		for _, m := range matches {
			rows = append(rows, []string{m.ID, m.JobID, m.Status})
		}
		c.ui.Error("%v", ambiguous("evaluation", prefix, rows))
		return 1
	}
	if done, err := c.formatted(e); done {
		return c.fmtResult(err)
	}
	c.ui.Output("%s", kv([][2]string{
		{"ID", shortID(e.ID, c.verbose)}, {"Create Time", formatUnixNano(e.CreateTime)},
		{"Modify Time", formatUnixNano(e.ModifyTime)}, {"Status", e.Status},
		{"Status Description", noneIfEmpty(e.StatusDescription)}, {"Type", e.Type}, {"TriggeredBy", e.TriggeredBy},
		{"Job ID", e.JobID}, {"Namespace", e.Namespace}, {"Node ID", noneIfEmpty(e.NodeID)}, {"Priority", strconv.Itoa(e.Priority)},
		{"Placement Failures", strconv.FormatBool(len(e.FailedTGAllocs) > 0)},
	}))
	if len(e.QueuedAllocations) > 0 {
		var q []string
		for _, tg := range sortedKeys(e.QueuedAllocations) {
			q = append(q, fmt.Sprintf("%s: %d", tg, e.QueuedAllocations[tg]))
		}
		c.ui.Output("\nQueued Allocations\n%s", strings.Join(q, "\n"))
	}
	if len(e.FailedTGAllocs) > 0 {
		c.ui.Output("\nFailed Placements\n%s", placementFailures(e.FailedTGAllocs, ""))
	}
	return 0
}

// JobInspectCommand prints a job's JSON.
type JobInspectCommand struct{ Meta }

func (c *JobInspectCommand) Synopsis() string { return "Print a registered job as JSON" }

func (c *JobInspectCommand) Help() string {
	return `Usage: berth job inspect [options] <job>

  Prints the registered job (by exact ID) as JSON, in the {"Job": ...}
  form job run -json and the HTTP API take, or through -t.

Inspect Options:

  -version=<n>
    Print version n of the job, one of those 'berth job history' lists.
` + sharedHelp(true)
}

func (c *JobInspectCommand) Run(args []string) int {
	fs := c.flagSet("job inspect", true)
	var version string
	fs.StringVar(&version, "version", "", "")
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if fs.NArg() != 1 {
		return flagErr(c.ui, c.Help(), "This command takes one argument: the job ID.")
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	var job *api.Job
	if version != "" {
		job, err = jobVersion(client, fs.Arg(0), version)
	} else {
		job, _, err = client.Jobs().Info(fs.Arg(0), nil)
		if err != nil {
			err = errors.New(c.apiErr(fmt.Sprintf("reading job %q", fs.Arg(0)), err))
		}
	}
	if err != nil {
		c.ui.Error("%v", err)
		return 1
	}
	var obj any = struct{ Job *api.Job }{job}
	if c.tmpl != "" {
		obj = job
	} else {
		c.json = true
	}
	if _, err := c.formatted(obj); err != nil {
		c.ui.Error("%v", err)
		return 1
	}
	return 0
}

// AgentInfoCommand shows the agent's statistics.
type AgentInfoCommand struct{ Meta }

func (c *AgentInfoCommand) Synopsis() string { return "Show the agent's statistics" }

func (c *AgentInfoCommand) Help() string {
	return `Usage: berth agent-info [options]

  Shows the statistics of the agent the CLI talks to: runtime, server and
  Raft, client.
` + sharedHelp(true)
}

func (c *AgentInfoCommand) Run(args []string) int {
	fs := c.flagSet("agent-info", true)
	client, code := c.startNoArgs(fs, args, c.Help())
	if client == nil {
		return code
	}
	self, err := client.Agent().Self()
	if err != nil {
		c.ui.Error("%s", c.apiErr("reading the agent", err))
		return 1
	}
	if done, err := c.formatted(self); done {
		return c.fmtResult(err)
	}
	for _, section := range sortedKeys(self.Stats) {
		c.ui.Output("%s", section)
		for _, k := range sortedKeys(self.Stats[section]) {
			c.ui.Output("  %s = %s", k, self.Stats[section][k])
		}
	}
	return 0
}

// StatusCommand finds what an ID prefix names and shows it.
type StatusCommand struct{ Meta }

func (c *StatusCommand) Synopsis() string {
	return "Show the job, node, alloc, eval or volume an ID prefix names"
}

func (c *StatusCommand) Help() string {
	return `Usage: berth status [options] [<prefix>]

  Without an argument, lists the jobs (job status). With one, searches
  jobs, nodes, allocations, evaluations, volumes and plugins for IDs that
  start with it and shows the one it names with that kind's status
  command; several matches are listed.
` + sharedHelp(true)
}

// statusContexts maps a search context to the command that shows it.
var statusContexts = []struct{ ctx, cmd string }{
	{"jobs", "job status"}, {"nodes", "node status"}, {"allocs", "alloc status"},
	{"evals", "eval status"}, {"volumes", "volume status"}, {"plugins", "plugin status"},
}

func (c *StatusCommand) Run(args []string) int {
	fs := c.flagSet("status", true)
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if fs.NArg() > 1 {
		return flagErr(c.ui, c.Help(), "This command takes at most one argument: an ID prefix.")
	}
	if fs.NArg() == 0 {
		return Run(append([]string{"job", "status"}, args...), c.ui.Out, c.ui.Err)
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	prefix := fs.Arg(0)
	res, err := client.PrefixSearch(prefix, "all")
	if err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("searching for %q", prefix), err))
		return 1
	}
	type hit struct{ id, ctx, cmd string }
	var hits []hit
	for _, sc := range statusContexts {
		for _, id := range res.Matches[sc.ctx] {
			hits = append(hits, hit{id, sc.ctx, sc.cmd})
		}
	}
	switch {
	case len(hits) == 0:
		c.ui.Error("No job, node, allocation, evaluation, volume or plugin has an ID starting with %q.", prefix)
		return 1
	case len(hits) > 1:
		// An exact match wins, as in the kind-specific commands.
		for _, h := range hits {
			if h.id == prefix {
				hits = []hit{h}
				break
			}
		}
	}
	if len(hits) > 1 {
		rows := [][]string{{"ID", "Kind", "Show with"}}
		for _, h := range hits {
			rows = append(rows, []string{h.id, h.ctx, "berth " + h.cmd + " " + h.id})
		}
		c.ui.Error("Prefix %q matches several objects; give more of the ID:\n\n%s", prefix, table(rows))
		return 1
	}
	rest := []string{}
	for _, a := range args {
		if a != prefix {
			rest = append(rest, a)
		}
	}
	cmd := append(strings.Fields(hits[0].cmd), rest...)
	return Run(append(cmd, hits[0].id), c.ui.Out, c.ui.Err)
}
