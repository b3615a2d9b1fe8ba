package command

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-io/berth/api"
)

func init() {
	register("job history", func(ui *UI) Command { return &JobHistoryCommand{Meta: Meta{ui: ui}} })
	register("job revert", func(ui *UI) Command { return &JobRevertCommand{Meta: Meta{ui: ui}} })
}

// JobHistoryCommand lists the versions the servers keep of a job.
type JobHistoryCommand struct{ Meta }

func (c *JobHistoryCommand) Synopsis() string { return "List a job's versions and what changed" }

func (c *JobHistoryCommand) Help() string {
	return `Usage: berth job history [options] <job>

  Lists the versions the servers keep of a job (a unique prefix of its ID
  works too), newest first. Each registration that changes the spec, and
  each stop, is a new version; the servers keep the last
  server.job_tracked_versions (default 6).

History Options:

  -p
    Show what changed in each version from the one before it.

  -version=<n>
    Show only version n (with -p, what changed in it).
` + sharedHelp(true)
}

func (c *JobHistoryCommand) Run(args []string) int {
	fs := c.flagSet("job history", true)
	var diffs bool
	var version string
	fs.BoolVar(&diffs, "p", false, "")
	fs.StringVar(&version, "version", "", "")
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if fs.NArg() != 1 {
		return flagErr(c.ui, c.Help(), "This command takes one argument: the job ID.")
	}
	var want *uint64
	if version != "" {
		v, err := strconv.ParseUint(version, 10, 64)
		if err != nil {
			return flagErr(c.ui, c.Help(), "-version must be a version number (see the Version lines of 'berth job history %s'), got %q.", fs.Arg(0), version)
		}
		want = &v
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	stub, _, err := c.resolveJob(client, fs.Arg(0))
	if err != nil {
		c.ui.Error("%v", err)
		return 1
	}
	versions, jobDiffs, _, err := client.Jobs().Versions(stub.ID, diffs, &api.QueryOptions{Namespace: stub.Namespace})
	if err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("reading the versions of job %q", stub.ID), err))
		return 1
	}
	if want != nil {
		i := versionIndex(versions, *want)
		if i < 0 {
			c.ui.Error("Job %q has no version %d kept; kept: %s.", stub.ID, *want, keptVersions(versions))
			return 1
		}
		var d []*api.JobDiff
		if i < len(jobDiffs) {
			d = jobDiffs[i : i+1]
		}
		versions, jobDiffs = versions[i:i+1], d
	}
	if done, err := c.formatted(versions); done {
		return c.fmtResult(err)
	}
	blocks := make([]string, 0, len(versions))
	for i, v := range versions {
		pairs := [][2]string{
			{"Version", strconv.FormatUint(valueOf(v.Version), 10)},
			{"Stable", strconv.FormatBool(valueOf(v.Stable))},
			{"Submit Date", formatUnixNano(valueOf(v.SubmitTime))},
		}
		hasDiff := diffs && i < len(jobDiffs) && jobDiffs[i] != nil
		if hasDiff {
			pairs = append(pairs, [2]string{"Diff", ""})
		}
		block := strings.TrimRight(kv(pairs), " \n")
		if hasDiff {
			block += "\n" + formatJobDiff(jobDiffs[i])
		}
		blocks = append(blocks, strings.TrimRight(block, "\n"))
	}
	c.ui.Output("%s", strings.Join(blocks, "\n\n"))
	return 0
}

// jobVersion reads version (a number, as the user typed it) of job id
// (exact), for job inspect -version.
func jobVersion(client *api.Client, id, version string) (*api.Job, error) {
	v, err := strconv.ParseUint(version, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("-version must be a version number (see the Version lines of 'berth job history %s'), got %q", id, version)
	}
	versions, _, _, err := client.Jobs().Versions(id, false, nil)
	if err != nil {
		return nil, fmt.Errorf("reading the versions of job %q: %w", id, err)
	}
	i := versionIndex(versions, v)
	if i < 0 {
		return nil, fmt.Errorf("job %q has no version %d kept; kept: %s", id, v, keptVersions(versions))
	}
	return versions[i], nil
}

// versionIndex is the position of version v in versions, or -1.
func versionIndex(versions []*api.Job, v uint64) int {
	for i, j := range versions {
		if valueOf(j.Version) == v {
			return i
		}
	}
	return -1
}

func keptVersions(versions []*api.Job) string {
	var out []string
	for _, j := range versions {
		out = append(out, strconv.FormatUint(valueOf(j.Version), 10))
	}
	return strings.Join(out, ", ")
}

// formatJobDiff prints a job diff as an indented tree. Each line starts
// with what happened to it: "+" added, "-" deleted, "+/-" edited; fields
// show "old" => "new".
func formatJobDiff(d *api.JobDiff) string {
	var b strings.Builder
	if d.Type == api.DiffTypeNone {
		b.WriteString("(no change)\n")
		return b.String()
	}
	fmt.Fprintf(&b, "%sJob: %q\n", diffMark(d.Type), d.ID)
	writeFieldsAndObjects(&b, d.Fields, d.Objects, "")
	for _, tg := range d.TaskGroups {
		if tg == nil || tg.Type == api.DiffTypeNone {
			continue
		}
		fmt.Fprintf(&b, "%sTask Group: %q\n", diffMark(tg.Type), tg.Name)
		writeFieldsAndObjects(&b, tg.Fields, tg.Objects, "  ")
		for _, t := range tg.Tasks {
			if t == nil || t.Type == api.DiffTypeNone {
				continue
			}
			fmt.Fprintf(&b, "  %sTask: %q\n", diffMark(t.Type), t.Name)
			writeFieldsAndObjects(&b, t.Fields, t.Objects, "    ")
		}
	}
	return b.String()
}

func writeFieldsAndObjects(b *strings.Builder, fields []*api.FieldDiff, objects []*api.ObjectDiff, indent string) {
	for _, f := range fields {
		if f == nil || f.Type == api.DiffTypeNone {
			continue
		}
		fmt.Fprintf(b, "%s%s%s: %s\n", indent, diffMark(f.Type), f.Name, fieldChange(f))
	}
	for _, o := range objects {
		if o == nil || o.Type == api.DiffTypeNone {
			continue
		}
		fmt.Fprintf(b, "%s%s%s {\n", indent, diffMark(o.Type), o.Name)
		writeFieldsAndObjects(b, o.Fields, o.Objects, indent+"  ")
		fmt.Fprintf(b, "%s}\n", indent)
	}
}

func diffMark(typ string) string {
	switch typ {
	case api.DiffTypeAdded:
		return "+ "
	case api.DiffTypeDeleted:
		return "- "
	case api.DiffTypeEdited:
		return "+/- "
	}
	return ""
}

func fieldChange(f *api.FieldDiff) string {
	switch f.Type {
	case api.DiffTypeAdded:
		return strconv.Quote(f.New)
	case api.DiffTypeDeleted:
		return strconv.Quote(f.Old)
	}
	return strconv.Quote(f.Old) + " => " + strconv.Quote(f.New)
}

// JobRevertCommand registers again an earlier version of a job.
type JobRevertCommand struct{ Meta }

func (c *JobRevertCommand) Synopsis() string { return "Run an earlier version of a job again" }

func (c *JobRevertCommand) Help() string {
	return `Usage: berth job revert [options] <job> <version>

  Registers again the spec of one of the versions the servers keep of a
  job (see 'berth job history -p <job>'), as a new version, then follows
  the evaluation that applies it unless -detach is given. A unique prefix
  of the job ID works too.

Revert Options:

  -detach
    Return at once, printing the evaluation ID.

  -timeout=<duration>
    How long to follow the evaluation. Default 5m.

  -verbose
    Show full IDs.
` + sharedHelp(false)
}

func (c *JobRevertCommand) Run(args []string) int {
	fs := c.flagSet("job revert", false)
	var detach bool
	var timeout time.Duration
	fs.BoolVar(&detach, "detach", false, "")
	fs.BoolVar(&c.verbose, "verbose", false, "")
	fs.DurationVar(&timeout, "timeout", 5*time.Minute, "")
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if fs.NArg() != 2 {
		return flagErr(c.ui, c.Help(), "This command takes two arguments: the job ID and the version to revert to.")
	}
	version, err := strconv.ParseUint(fs.Arg(1), 10, 64)
	if err != nil {
		return flagErr(c.ui, c.Help(), "The version must be a number from the Version lines of 'berth job history %s', got %q.", fs.Arg(0), fs.Arg(1))
	}
	if timeout <= 0 {
		return flagErr(c.ui, c.Help(), "-timeout must be positive, got %s.", timeout)
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	stub, _, err := c.resolveJob(client, fs.Arg(0))
	if err != nil {
		c.ui.Error("%v", err)
		return 1
	}
	resp, _, err := client.Jobs().Revert(stub.ID, version, nil, &api.WriteOptions{Namespace: stub.Namespace})
	if err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("reverting job %q to version %d", stub.ID, version), err))
		return 1
	}
	if resp.Warnings != "" {
		c.ui.Output("Job Warnings:\n%s\n", resp.Warnings)
	}
	if detach {
		c.ui.Output("%s", resp.EvalID)
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return newMonitor(c.ui, client, stub.Namespace, c.verbose).run(ctx, resp.EvalID, stub.ID, false, timeout)
}
