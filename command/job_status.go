package command

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/berth-io/berth/api"
)

func init() {
	register("job status", func(ui *UI) Command { return &JobStatusCommand{Meta: Meta{ui: ui}} })
}

// JobStatusCommand lists jobs or shows one.
type JobStatusCommand struct{ Meta }

func (c *JobStatusCommand) Synopsis() string { return "Show the status of jobs" }

func (c *JobStatusCommand) Help() string {
	return `Usage: berth job status [options] [<job>]

  Without an argument, lists the jobs. With a job ID or a unique prefix of
  one, shows the job: its groups' allocation counts, why placements failed
  (from the latest evaluation), and its allocations.

Status Options:

  -all-allocs
    Also list the allocations of earlier versions of the job.
` + sharedHelp(true)
}

// jobStatusView is what -json and -t see for one job.
type jobStatusView struct {
	Job         *api.Job
	Allocations []*api.AllocationListStub
	Evaluations []*api.Evaluation
}

func (c *JobStatusCommand) Run(args []string) int {
	fs := c.flagSet("job status", true)
	var allAllocs bool
	fs.BoolVar(&allAllocs, "all-allocs", false, "")
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if fs.NArg() > 1 {
		return flagErr(c.ui, c.Help(), "This command takes at most one argument: a job ID or prefix.")
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	if fs.NArg() == 0 {
		return c.list(client)
	}

	stub, _, err := c.resolveJob(client, fs.Arg(0))
	if err != nil {
		c.ui.Error("%v", err)
		return 1
	}
	q := &api.QueryOptions{Namespace: stub.Namespace}
	job, _, err := client.Jobs().Info(stub.ID, q)
	if err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("reading job %q", stub.ID), err))
		return 1
	}
	allocs, _, err := client.Jobs().Allocations(stub.ID, allAllocs, q)
	if err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("listing allocations of job %q", stub.ID), err))
		return 1
	}
	evals, _, err := client.Jobs().Evaluations(stub.ID, q)
	if err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("listing evaluations of job %q", stub.ID), err))
		return 1
	}
	if allocs == nil {
		allocs = []*api.AllocationListStub{}
	}
	if evals == nil {
		evals = []*api.Evaluation{}
	}
	if done, err := c.formatted(&jobStatusView{Job: job, Allocations: allocs, Evaluations: evals}); done {
		return c.fmtResult(err)
	}
	c.ui.Output("%s", c.formatJob(job, allocs, evals))
	return 0
}

// fmtResult turns the error of formatted into an exit code.
func (m *Meta) fmtResult(err error) int {
	if err != nil {
		m.ui.Error("Error: %v", err)
		return 1
	}
	return 0
}

func (c *JobStatusCommand) list(client *api.Client) int {
	jobs, _, err := client.Jobs().List(nil)
	return jobListing.print(&c.Meta, jobs, err)
}

// jobListing lists jobs by ID.
var jobListing = listing[*api.JobListStub]{
	kind: "job",
	none: "No running jobs",
	id:   func(j *api.JobListStub) string { return j.ID },
	sort: sortJobs,
	rows: jobRows,
}

func sortJobs(jobs []*api.JobListStub) {
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].ID < jobs[j].ID })
}

func jobRows(jobs []*api.JobListStub) [][]string {
	sortJobs(jobs)
	rows := [][]string{{"ID", "Type", "Priority", "Status", "Submit Date"}}
	for _, j := range jobs {
		rows = append(rows, []string{j.ID, j.Type, strconv.Itoa(j.Priority), jobStatus(j.Status, j.Stop), formatUnixNano(j.SubmitTime)})
	}
	return rows
}

// jobStatus is a job's status, "dead (stopped)" for a stopped job, as
// Nomad shows it.
func jobStatus(status string, stop bool) string {
	if stop && status == api.JobStatusDead {
		return "dead (stopped)"
	}
	return status
}

func (c *JobStatusCommand) formatJob(job *api.Job, allocs []*api.AllocationListStub, evals []*api.Evaluation) string {
	var b strings.Builder
	stop := job.Stop != nil && *job.Stop
	b.WriteString(kv([][2]string{
		{"ID", deref(job.ID)},
		{"Name", deref(job.Name)},
		{"Submit Date", formatUnixNanoPtr(job.SubmitTime)},
		{"Type", deref(job.Type)},
		{"Priority", intPtr(job.Priority)},
		{"Datacenters", strings.Join(job.Datacenters, ",")},
		{"Namespace", deref(job.Namespace)},
		{"Status", jobStatus(deref(job.Status), stop)},
		{"Version", uintPtr(job.Version)},
	}))

	latest, failing, blocked := evalsOfInterest(evals)
	b.WriteString("\n\nSummary\n")
	b.WriteString(table(summaryRows(job, allocs, latest)))

	if failing != nil {
		b.WriteString("\n\nPlacement Failure\n")
		b.WriteString(placementFailures(failing.FailedTGAllocs, ""))
		if blocked != nil {
			fmt.Fprintf(&b, "\nEvaluation %q is waiting for capacity (a freed volume claim, a healthy plugin, room on a node) to place the remainder.", shortID(blocked.ID, c.verbose))
		}
	}

	b.WriteString("\n\nAllocations\n")
	if len(allocs) == 0 {
		b.WriteString("No allocations placed")
	} else {
		b.WriteString(allocTable(allocs, c.verbose))
	}
	return b.String()
}

// evalsOfInterest picks the job's latest evaluation (not counting
// blocked ones), the evaluation whose placement failures still matter,
// and the blocked evaluation waiting to place the rest. Failures matter
// while an evaluation is blocked on them, or when the latest evaluation
// has them.
func evalsOfInterest(evals []*api.Evaluation) (latest, failing, blocked *api.Evaluation) {
	sorted := append([]*api.Evaluation(nil), evals...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].CreateIndex > sorted[j].CreateIndex })
	for _, e := range sorted {
		if e.Status == api.EvalStatusBlocked {
			if blocked == nil {
				blocked = e
			}
			continue
		}
		if latest == nil {
			latest = e
		}
	}
	if blocked != nil {
		for _, e := range sorted {
			if e.BlockedEval == blocked.ID && len(e.FailedTGAllocs) > 0 {
				failing = e
				break
			}
		}
		if failing == nil && len(blocked.FailedTGAllocs) > 0 {
			failing = blocked
		}
	}
	if failing == nil && latest != nil && len(latest.FailedTGAllocs) > 0 {
		failing = latest
	}
	return latest, failing, blocked
}

// summaryRows counts allocations by client status per task group;
// Queued comes from the latest evaluation.
func summaryRows(job *api.Job, allocs []*api.AllocationListStub, latest *api.Evaluation) [][]string {
	type counts struct{ queued, starting, running, failed, complete, lost int }
	by := map[string]*counts{}
	var groups []string
	for _, tg := range job.TaskGroups {
		if tg != nil && tg.Name != nil {
			groups = append(groups, *tg.Name)
			by[*tg.Name] = &counts{}
		}
	}
	get := func(tg string) *counts {
		if by[tg] == nil {
			by[tg] = &counts{}
			groups = append(groups, tg)
		}
		return by[tg]
	}
	for _, a := range allocs {
		c := get(a.TaskGroup)
		switch a.ClientStatus {
		case api.AllocClientStatusPending:
			c.starting++
		case api.AllocClientStatusRunning:
			c.running++
		case api.AllocClientStatusFailed:
			c.failed++
		case api.AllocClientStatusComplete:
			c.complete++
		case api.AllocClientStatusLost, api.AllocClientStatusUnknown:
			c.lost++
		}
	}
	if latest != nil {
		for tg, n := range latest.QueuedAllocations {
			get(tg).queued = n
		}
	}
	rows := [][]string{{"Task Group", "Queued", "Starting", "Running", "Failed", "Complete", "Lost"}}
	for _, tg := range groups {
		c := by[tg]
		rows = append(rows, []string{tg, strconv.Itoa(c.queued), strconv.Itoa(c.starting), strconv.Itoa(c.running),
			strconv.Itoa(c.failed), strconv.Itoa(c.complete), strconv.Itoa(c.lost)})
	}
	return rows
}

func formatUnixNanoPtr(p *int64) string {
	if p == nil {
		return ""
	}
	return formatUnixNano(*p)
}

func intPtr(p *int) string {
	if p == nil {
		return ""
	}
	return strconv.Itoa(*p)
}

func uintPtr(p *uint64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatUint(*p, 10)
}

// resolveJob resolves a job ID or unique prefix; the error says when it
// matched nothing or several jobs (listing them). exact reports whether
// id was the whole ID.
func (m *Meta) resolveJob(client *api.Client, id string) (stub *api.JobListStub, exact bool, err error) {
	jobs, _, err := client.Jobs().PrefixList(id)
	stub, err = jobListing.resolve(m, id, jobs, err)
	if err != nil {
		return nil, false, err
	}
	return stub, stub.ID == id, nil
}
