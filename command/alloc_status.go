package command

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/berth-io/berth/api"
)

func init() {
	register("alloc status", func(ui *UI) Command { return &AllocStatusCommand{Meta: Meta{ui: ui}} })
}

// AllocStatusCommand shows one allocation.
type AllocStatusCommand struct{ Meta }

func (c *AllocStatusCommand) Synopsis() string { return "Show the status of an allocation" }

func (c *AllocStatusCommand) Help() string {
	return `Usage: berth alloc status [options] <allocation>

  Shows an allocation, given its ID or a unique prefix of it: where it runs,
  its status, its CSI volumes with the step each claim is at, and the state
  and recent events of each task (the last 10; all with -verbose).
` + sharedHelp(true)
}

// maxRecentEvents is how many task events are shown without -verbose.
const maxRecentEvents = 10

func (c *AllocStatusCommand) Run(args []string) int {
	fs := c.flagSet("alloc status", true)
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
	stub, err := c.resolveAllocPrefix(client, fs.Arg(0))
	if err != nil {
		c.ui.Error("%v", err)
		return 1
	}
	alloc, _, err := client.Allocations().Info(stub.ID, &api.QueryOptions{Namespace: stub.Namespace})
	if err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("reading allocation %s", stub.ID), err))
		return 1
	}
	if done, err := c.formatted(alloc); done {
		return c.fmtResult(err)
	}
	if alloc.Job == nil {
		if job, _, err := client.Jobs().Info(alloc.JobID, &api.QueryOptions{Namespace: alloc.Namespace}); err == nil {
			alloc.Job = job
		}
	}

	var b strings.Builder
	b.WriteString(kv(c.allocFields(alloc)))
	if vols := c.csiVolumes(client, alloc); vols != "" {
		b.WriteString("\n\nCSI Volumes\n")
		b.WriteString(vols)
	}
	for _, task := range taskNames(alloc) {
		b.WriteString("\n\n")
		b.WriteString(c.taskSection(task, alloc.TaskStates[task]))
	}
	if c.verbose && alloc.Metrics != nil {
		if lines := metricLines(alloc.Metrics); len(lines) > 0 {
			b.WriteString("\n\nPlacement Metrics\n")
			for _, l := range lines {
				b.WriteString("  * " + l + "\n")
			}
		}
	}
	c.ui.Output("%s", strings.TrimRight(b.String(), "\n"))
	return 0
}

func (c *AllocStatusCommand) allocFields(a *api.Allocation) [][2]string {
	version := ""
	if a.Job != nil && a.Job.Version != nil {
		version = strconv.FormatUint(*a.Job.Version, 10)
	}
	f := [][2]string{
		{"ID", shortID(a.ID, c.verbose)},
		{"Eval ID", shortID(a.EvalID, c.verbose)},
		{"Name", a.Name},
		{"Node ID", shortID(a.NodeID, c.verbose)},
		{"Node Name", a.NodeName},
		{"Job ID", a.JobID},
		{"Job Version", version},
		{"Client Status", a.ClientStatus},
		{"Client Description", a.ClientDescription},
		{"Desired Status", a.DesiredStatus},
		{"Desired Description", a.DesiredDescription},
		{"Created", ageOrTime(a.CreateTime, c.verbose)},
		{"Modified", ageOrTime(a.ModifyTime, c.verbose)},
	}
	if a.PreviousAllocation != "" {
		f = append(f, [2]string{"Previous Allocation", shortID(a.PreviousAllocation, c.verbose)})
	}
	if a.NextAllocation != "" {
		f = append(f, [2]string{"Replacement Alloc ID", shortID(a.NextAllocation, c.verbose)})
	}
	if a.FollowupEvalID != "" {
		f = append(f, [2]string{"Follow-up Evaluation", shortID(a.FollowupEvalID, c.verbose)})
	}
	return f
}

// taskNames lists the allocation's tasks: the group's, else those with
// a state.
func taskNames(a *api.Allocation) []string {
	seen := map[string]bool{}
	var names []string
	if a.Job != nil {
		if tg := a.Job.LookupTaskGroup(a.TaskGroup); tg != nil {
			for _, t := range tg.Tasks {
				if t != nil && !seen[t.Name] {
					seen[t.Name] = true
					names = append(names, t.Name)
				}
			}
		}
	}
	for name := range a.TaskStates {
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

func (c *AllocStatusCommand) taskSection(name string, ts *api.TaskState) string {
	var b strings.Builder
	if ts == nil {
		fmt.Fprintf(&b, "Task %q has no state yet", name)
		return b.String()
	}
	state := ts.State
	if ts.Failed {
		state += " (failed)"
	}
	fmt.Fprintf(&b, "Task %q is %q\n", name, state)
	finished := ""
	if ts.State == api.TaskStateDead {
		finished = formatTime(ts.FinishedAt)
	}
	b.WriteString(kv([][2]string{
		{"Started At", orNA(formatTime(ts.StartedAt))},
		{"Finished At", orNA(finished)},
		{"Total Restarts", strconv.FormatUint(ts.Restarts, 10)},
		{"Last Restart", orNA(formatTime(ts.LastRestart))},
	}))
	b.WriteString("\n\nRecent Events:\n")
	events := ts.Events
	if !c.verbose && len(events) > maxRecentEvents {
		events = events[len(events)-maxRecentEvents:]
	}
	rows := [][]string{{"Time", "Type", "Description"}}
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		if e == nil {
			continue
		}
		rows = append(rows, []string{formatUnixNano(e.Time), e.Type, oneLine(eventDescription(e))})
	}
	if len(rows) == 1 {
		b.WriteString("No events")
	} else {
		b.WriteString(table(rows))
	}
	return b.String()
}

func orNA(s string) string {
	if s == "" {
		return "N/A"
	}
	return s
}

// allocIndexRE finds the index in an allocation name "job.group[3]".
var allocIndexRE = regexp.MustCompile(`\[(\d+)\]$`)

// csiVolumes is the table of the group's CSI volumes: where each is
// mounted, and the step its claim for this allocation is at (read from
// the volume's claims). "" when the group has none.
func (c *AllocStatusCommand) csiVolumes(client *api.Client, a *api.Allocation) string {
	if a.Job == nil {
		return ""
	}
	tg := a.Job.LookupTaskGroup(a.TaskGroup)
	if tg == nil {
		return ""
	}
	var names []string
	for name, v := range tg.Volumes {
		if v != nil && v.Type == api.VolumeTypeCSI {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	header := []string{"Volume", "Source", "Mode", "Destination", "Claim Step"}
	if c.verbose {
		header = append(header, "Access Mode", "Attachment Mode", "Plugin ID", "Attempts", "Last Error")
	}
	rows := [][]string{header}
	for _, name := range names {
		req := tg.Volumes[name]
		source := req.Source
		if req.PerAlloc {
			if m := allocIndexRE.FindStringSubmatch(a.Name); m != nil {
				source += "[" + m[1] + "]"
			}
		}
		mode := string(api.CSIVolumeClaimWrite)
		if req.ReadOnly {
			mode = string(api.CSIVolumeClaimRead)
		}
		accessMode, attachMode := req.AccessMode, req.AttachmentMode
		step, pluginID, attempts, lastErr := "", "", "", ""
		vol, _, err := client.CSIVolumes().Info(source, &api.QueryOptions{Namespace: a.Namespace})
		switch {
		case err != nil && api.IsNotFound(err):
			step = "volume not found"
		case err != nil:
			step = "unknown"
			lastErr = oneLine(err.Error())
		default:
			pluginID = vol.PluginID
			if cl := claimOf(vol, a.ID); cl != nil {
				step = string(cl.Step)
				mode = string(cl.Mode)
				if cl.AccessMode != "" {
					accessMode, attachMode = string(cl.AccessMode), string(cl.AttachmentMode)
				}
				attempts = strconv.Itoa(cl.Attempts)
				lastErr = oneLine(cl.LastError)
			} else {
				step = "not claimed"
			}
		}
		dests := mountsOf(tg, name)
		if len(dests) == 0 {
			dests = []string{""}
		}
		for _, d := range dests {
			row := []string{name, source, mode, d, step}
			if c.verbose {
				row = append(row, accessMode, attachMode, pluginID, attempts, lastErr)
			}
			rows = append(rows, row)
		}
	}
	return table(rows)
}

// claimOf finds alloc's claim on vol: a live one, else the latest past
// one.
func claimOf(vol *api.CSIVolume, allocID string) *api.CSIVolumeClaim {
	for _, cl := range vol.Claims {
		if cl != nil && cl.AllocID == allocID {
			return cl
		}
	}
	for i := len(vol.PastClaims) - 1; i >= 0; i-- {
		if cl := vol.PastClaims[i]; cl != nil && cl.AllocID == allocID {
			return cl
		}
	}
	return nil
}

// mountsOf lists where the group's tasks mount the volume named name:
// "/dest", or "task:/dest" when the group has several tasks.
func mountsOf(tg *api.TaskGroup, name string) []string {
	var out []string
	for _, t := range tg.Tasks {
		if t == nil {
			continue
		}
		for _, m := range t.VolumeMounts {
			if m == nil || deref(m.Volume) != name {
				continue
			}
			d := deref(m.Destination)
			if m.ReadOnly != nil && *m.ReadOnly {
				d += " (ro)"
			}
			if len(tg.Tasks) > 1 {
				d = t.Name + ":" + d
			}
			out = append(out, d)
		}
	}
	return out
}
