package command

import (
	"sort"
	"strconv"
	"strings"

	"github.com/berth-io/berth/api"
)

func init() {
	register("job plan", func(ui *UI) Command { return &JobPlanCommand{Meta: Meta{ui: ui}} })
}

// JobPlanCommand shows what registering a job would do, without doing it.
type JobPlanCommand struct{ Meta }

func (c *JobPlanCommand) Synopsis() string {
	return "Dry-run a job update to see what the scheduler would do"
}

func (c *JobPlanCommand) Help() string {
	return `Usage: berth job plan [options] <file>

  Runs the scheduler against the job in <file> without registering it, and
  prints what it would do per task group (place, stop, update) and why any
  placement would fail (resources, constraints, CSI volume claims).

  Exits 0 when nothing would change, 1 when allocations would be created
  or destroyed, and 255 on error, as Nomad's job plan does.

Plan Options:

  -json
    Print the plan result as JSON.
` + sharedHelp(false)
}

func (c *JobPlanCommand) Run(args []string) int {
	fs := c.flagSet("job plan", false)
	fs.BoolVar(&c.json, "json", false, "")
	if err := parseArgs(fs, args); err != nil {
		c.ui.Error("Error parsing flags: %v", err)
		return 255
	}
	if fs.NArg() != 1 {
		c.ui.Error("This command takes one argument: <file>")
		return 255
	}
	job, err := parseJob(fs.Arg(0), nil)
	if err != nil {
		c.ui.Error("%v", err)
		return 255
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 255
	}
	resp, _, err := client.Jobs().Plan(job, nil)
	if err != nil {
		c.ui.Error("Error planning job %q: %v", deref(job.ID), err)
		return 255
	}
	if c.json {
		if _, err := c.formatted(resp); err != nil {
			c.ui.Error("Error: %v", err)
			return 255
		}
		return planExitCode(resp)
	}
	c.ui.Output("%s", formatPlan(deref(job.ID), resp))
	return planExitCode(resp)
}

// planExitCode is 1 when the plan creates or destroys allocations.
func planExitCode(resp *api.JobPlanResponse) int {
	if resp.Annotations == nil {
		return 0
	}
	for _, u := range resp.Annotations.DesiredTGUpdates {
		if u.Place+u.Stop+u.Migrate+u.DestructiveUpdate > 0 {
			return 1
		}
	}
	return 0
}

// formatPlan renders the per-group counts and placement failures.
func formatPlan(jobID string, resp *api.JobPlanResponse) string {
	var b strings.Builder
	b.WriteString("Job: \"" + jobID + "\"\n")
	if resp.Annotations != nil && len(resp.Annotations.DesiredTGUpdates) > 0 {
		groups := make([]string, 0, len(resp.Annotations.DesiredTGUpdates))
		for g := range resp.Annotations.DesiredTGUpdates {
			groups = append(groups, g)
		}
		sort.Strings(groups)
		rows := [][]string{{"Task Group", "Place", "Stop", "In-Place", "Destructive", "Migrate", "Ignore"}}
		for _, g := range groups {
			u := resp.Annotations.DesiredTGUpdates[g]
			rows = append(rows, []string{g, itoa(u.Place), itoa(u.Stop), itoa(u.InPlaceUpdate),
				itoa(u.DestructiveUpdate), itoa(u.Migrate), itoa(u.Ignore)})
		}
		b.WriteString("\n" + table(rows) + "\n")
	}
	b.WriteString("\nScheduler dry-run:\n")
	if len(resp.FailedTGAllocs) == 0 {
		b.WriteString("- All tasks successfully allocated.\n")
	} else {
		b.WriteString("- WARNING: Failed to place all allocations.\n")
		b.WriteString(placementFailures(resp.FailedTGAllocs, "  "))
		b.WriteString("\n")
	}
	if resp.Warnings != "" {
		b.WriteString("\nWarnings:\n" + resp.Warnings + "\n")
	}
	if resp.JobModifyIndex > 0 {
		b.WriteString("\nJob Modify Index: " + itoa(resp.JobModifyIndex) + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
