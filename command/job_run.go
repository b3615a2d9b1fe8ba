package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/jobspec"
)

func init() {
	register("job run", func(ui *UI) Command { return &JobRunCommand{Meta: Meta{ui: ui}} })
}

// JobRunCommand registers a job and follows it until its allocations run
// or fail.
type JobRunCommand struct {
	Meta
	// stdin is read for the file "-"; nil means os.Stdin.
	stdin io.Reader
}

func (c *JobRunCommand) Synopsis() string { return "Run a new job or update an existing one" }

func (c *JobRunCommand) Help() string {
	return `Usage: berth job run [options] <file>

  Registers the job in the HCL2 jobspec <file> ("-" reads standard input),
  then follows the evaluation it triggers: where allocations are placed,
  why any could not be (CSI volume claims, plugin health, resources), and
  how the allocations start, until every one runs or has failed.

  Exits 0 when every allocation runs (or, for batch jobs, has finished),
  1 when the file is invalid, placement failed, an allocation failed or
  -timeout passed.

Run Options:

  -detach
    Return once the job is registered, printing the evaluation ID, instead
    of following it.

  -timeout=<duration>
    How long to follow the evaluation and allocations. Default 5m. The job
    stays registered when it passes.

  -output
    Print the parsed job as JSON (the body of PUT /v1/jobs) instead of
    registering it.

  -verbose
    Show full IDs and every task event while following.
` + sharedHelp(false)
}

func (c *JobRunCommand) Run(args []string) int {
	fs := c.flagSet("job run", false)
	var detach, output bool
	var timeout time.Duration
	fs.BoolVar(&detach, "detach", false, "")
	fs.BoolVar(&output, "output", false, "")
	fs.BoolVar(&c.verbose, "verbose", false, "")
	fs.DurationVar(&timeout, "timeout", 5*time.Minute, "")
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if fs.NArg() != 1 {
		return flagErr(c.ui, c.Help(), "This command takes one argument: the jobspec file (or - for standard input).")
	}
	if timeout <= 0 {
		return flagErr(c.ui, c.Help(), "-timeout must be positive, got %s.", timeout)
	}
	job, err := parseJob(fs.Arg(0), c.stdin)
	if err != nil {
		c.ui.Error("Error parsing job file %s:\n%v", fs.Arg(0), err)
		return 1
	}
	if output {
		b, err := json.MarshalIndent(&api.JobRegisterRequest{Job: job}, "", "    ")
		if err != nil {
			c.ui.Error("Error encoding job: %v", err)
			return 1
		}
		c.ui.Output("%s", b)
		return 0
	}

	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	jobID, ns := deref(job.ID), deref(job.Namespace)
	resp, _, err := client.Jobs().Register(job, &api.WriteOptions{Namespace: ns})
	if err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("registering job %q", jobID), err))
		return 1
	}
	if w := strings.TrimSpace(resp.Warnings); w != "" {
		c.ui.Output("Job Warnings:\n%s\n", w)
	}
	if resp.EvalID == "" || detach {
		c.ui.Output("Job registration successful")
		if resp.EvalID != "" {
			c.ui.Output("Evaluation ID: %s", resp.EvalID)
		}
		return 0
	}

	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	mon := newMonitor(c.ui, client, ns, c.verbose)
	return mon.run(ctx, resp.EvalID, jobID, true, timeout)
}

// parseJob parses a jobspec file, or standard input for "-".
func parseJob(path string, stdin io.Reader) (*api.Job, error) {
	if path != "-" {
		return jobspec.ParseFile(path)
	}
	if stdin == nil {
		stdin = os.Stdin
	}
	src, err := io.ReadAll(stdin)
	if err != nil {
		return nil, fmt.Errorf("reading standard input: %w", err)
	}
	return jobspec.Parse("<stdin>", src)
}

// deref returns *p, or "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// ---- the evaluation monitor ----------------------------------------------

// monitor follows an evaluation, and the allocations it creates, through
// blocking queries, printing a timestamped line for each change:
//
//	==> 2026-11-22T10:00:00Z: Monitoring evaluation "1a2b3c4d"
//	    2026-11-22T10:00:00Z: Evaluation triggered by job "web"
//	    2026-11-22T10:00:01Z: Allocation "5e6f7a8b" created: node "9a0b1c2d", group "g"
//	    2026-11-22T10:00:01Z: Evaluation status changed: "pending" -> "complete"
//	==> 2026-11-22T10:00:01Z: Evaluation "1a2b3c4d" finished with status "complete"
//	    2026-11-22T10:00:02Z: Allocation "5e6f7a8b" status changed: "pending" -> "running"
//	==> 2026-11-22T10:00:02Z: Job "web": 1 running, 0 failed
//
// It is used by one goroutine; the decisions (what changed, when it is
// done) are in the update methods, the loops only fetch.
type monitor struct {
	ui      *UI
	client  *api.Client
	ns      string
	verbose bool
	now     func() time.Time

	// evalStatus is the last status seen of each evaluation followed.
	evalStatus map[string]string
	// allocs is the last view of each allocation the evaluations made.
	allocs map[string]*api.AllocationListStub
	// eventsSeen counts the task events already considered, by
	// "<alloc>/<task>".
	eventsSeen map[string]int
	// unplaced counts allocations the scheduler could not place.
	unplaced int
}

func newMonitor(ui *UI, client *api.Client, ns string, verbose bool) *monitor {
	return &monitor{
		ui: ui, client: client, ns: ns, verbose: verbose, now: timeNow,
		evalStatus: map[string]string{}, allocs: map[string]*api.AllocationListStub{}, eventsSeen: map[string]int{},
	}
}

// log prints a timestamped line; banner lines start with "==>".
func (m *monitor) log(banner bool, format string, a ...any) {
	prefix := "    "
	if banner {
		prefix = "==> "
	}
	m.ui.Output("%s%s: %s", prefix, formatTime(m.now()), fmt.Sprintf(format, a...))
}

func (m *monitor) short(id string) string { return shortID(id, m.verbose) }

// withNS sets the namespace the job lives in on q.
func (m *monitor) withNS(q *api.QueryOptions) *api.QueryOptions {
	q.Namespace = m.ns
	return q
}

// evalTerminal reports whether an evaluation will not change any more
// (a blocked evaluation waits for capacity under its own ID).
func evalTerminal(status string) bool {
	switch status {
	case api.EvalStatusComplete, api.EvalStatusFailed, api.EvalStatusCancelled, api.EvalStatusBlocked:
		return true
	}
	return false
}

// run follows evalID until it finishes and, with followAllocs, the
// allocations it made until none is pending. It returns the exit code.
func (m *monitor) run(ctx context.Context, evalID, jobID string, followAllocs bool, timeout time.Duration) int {
	m.log(true, "Monitoring evaluation %q", m.short(evalID))
	cur, idx := evalID, uint64(0)
	var ev *api.Evaluation
	var allocIdx uint64
	for {
		e, qm, err := m.client.Evaluations().Info(cur, m.withNS(blockingOpts(ctx, idx)))
		if err != nil {
			return m.stopped(ctx, err, fmt.Sprintf("evaluation %q", cur), jobID, timeout)
		}
		idx = nextIndex(ctx, idx, qm)
		if jobID == "" {
			jobID = e.JobID
		}
		prev, seen := m.evalStatus[e.ID]
		if !seen {
			if e.NodeID != "" {
				m.log(false, "Evaluation triggered by node %q", m.short(e.NodeID))
			} else {
				m.log(false, "Evaluation triggered by job %q", e.JobID)
			}
		}
		m.evalStatus[e.ID] = e.Status
		if evalTerminal(e.Status) && followAllocs {
			// Show what the evaluation placed before saying it is done,
			// as the allocations exist once it is.
			stubs, qm, err := m.client.Jobs().Allocations(jobID, false, m.withNS((&api.QueryOptions{}).WithContext(ctx)))
			if err != nil {
				return m.stopped(ctx, err, fmt.Sprintf("allocations of job %q", jobID), jobID, timeout)
			}
			if qm != nil {
				allocIdx = qm.LastIndex
			}
			m.allocsUpdate(stubs)
		}
		if seen && prev != e.Status {
			m.log(false, "Evaluation status changed: %q -> %q", prev, e.Status)
		}
		if !evalTerminal(e.Status) {
			continue
		}
		ev = e
		if e.Status == api.EvalStatusComplete && e.NextEval != "" {
			if _, done := m.evalStatus[e.NextEval]; !done {
				m.log(true, "Monitoring next evaluation %q in %s", m.short(e.NextEval), e.Wait)
				cur, idx = e.NextEval, 0
				continue
			}
		}
		break
	}

	failedPlacement := len(ev.FailedTGAllocs) > 0
	switch {
	case ev.Status == api.EvalStatusFailed || ev.Status == api.EvalStatusCancelled:
		desc := ""
		if ev.StatusDescription != "" {
			desc = ": " + ev.StatusDescription
		}
		m.log(true, "Evaluation %q finished with status %q%s", m.short(ev.ID), ev.Status, desc)
		return 1
	case failedPlacement:
		m.log(true, "Evaluation %q finished with status %q but failed to place all allocations:", m.short(ev.ID), ev.Status)
		m.ui.Output("%s", placementFailures(ev.FailedTGAllocs, "    "))
		for _, mt := range ev.FailedTGAllocs {
			if mt != nil {
				m.unplaced += mt.CoalescedFailures + 1
			}
		}
		if ev.BlockedEval != "" {
			m.ui.Output("    Evaluation %q waiting for additional capacity to place remainder", m.short(ev.BlockedEval))
		}
	default:
		m.log(true, "Evaluation %q finished with status %q", m.short(ev.ID), ev.Status)
	}
	if !followAllocs {
		return 0
	}

	for !m.settled() {
		stubs, qm, err := m.client.Jobs().Allocations(jobID, false, m.withNS(blockingOpts(ctx, allocIdx)))
		if err != nil {
			return m.stopped(ctx, err, fmt.Sprintf("allocations of job %q", jobID), jobID, timeout)
		}
		allocIdx = nextIndex(ctx, allocIdx, qm)
		m.allocsUpdate(stubs)
	}
	return m.summary(jobID, failedPlacement)
}

// followed reports whether an allocation was made by an evaluation the
// monitor follows.
func (m *monitor) followed(a *api.AllocationListStub) bool {
	_, ok := m.evalStatus[a.EvalID]
	return ok
}

// allocsUpdate prints what changed in the followed allocations: new
// ones, client status changes, and new task events (failures and
// restarts; every event with -verbose).
func (m *monitor) allocsUpdate(stubs []*api.AllocationListStub) {
	for _, a := range stubs {
		if a == nil || !m.followed(a) {
			continue
		}
		prev := m.allocs[a.ID]
		if prev == nil {
			m.log(false, "Allocation %q created: node %q, group %q", m.short(a.ID), m.short(a.NodeID), a.TaskGroup)
			prev = &api.AllocationListStub{ClientStatus: api.AllocClientStatusPending}
		}
		for _, task := range sortedKeys(a.TaskStates) {
			ts := a.TaskStates[task]
			if ts == nil {
				continue
			}
			key := a.ID + "/" + task
			for _, e := range ts.Events[min(m.eventsSeen[key], len(ts.Events)):] {
				if e != nil && (m.verbose || notableEvent(e)) {
					m.log(false, "Allocation %q task %q: %s: %s", m.short(a.ID), task, e.Type, oneLine(eventDescription(e)))
				}
			}
			m.eventsSeen[key] = len(ts.Events)
		}
		if prev.ClientStatus != a.ClientStatus {
			desc := ""
			if a.ClientDescription != "" {
				desc = fmt.Sprintf(" (%s)", a.ClientDescription)
			}
			m.log(false, "Allocation %q status changed: %q -> %q%s", m.short(a.ID), prev.ClientStatus, a.ClientStatus, desc)
		}
		m.allocs[a.ID] = a
	}
}

// settled reports whether no followed allocation is still starting.
func (m *monitor) settled() bool {
	for _, a := range m.allocs {
		if a.DesiredStatus == api.AllocDesiredStatusRun && a.ClientStatus == api.AllocClientStatusPending {
			return false
		}
	}
	return true
}

// summary prints the outcome and returns the exit code.
func (m *monitor) summary(jobID string, failedPlacement bool) int {
	if len(m.allocs) == 0 && !failedPlacement {
		m.log(true, "Job %q: the evaluation created or changed no allocations", jobID)
		return 0
	}
	var running, failed, complete int
	var firstFailed string
	for _, id := range sortedKeys(m.allocs) {
		switch m.allocs[id].ClientStatus {
		case api.AllocClientStatusRunning:
			running++
		case api.AllocClientStatusComplete:
			complete++
		case api.AllocClientStatusFailed, api.AllocClientStatusLost:
			failed++
			if firstFailed == "" {
				firstFailed = id
			}
		}
	}
	s := fmt.Sprintf("%d running, %d failed", running, failed)
	if complete > 0 {
		s += fmt.Sprintf(", %d complete", complete)
	}
	if m.unplaced > 0 {
		s += fmt.Sprintf(", %d not placed", m.unplaced)
	}
	m.log(true, "Job %q: %s", jobID, s)
	if firstFailed != "" {
		m.ui.Output("    See why with 'berth alloc status %s'.", m.short(firstFailed))
	}
	if failedPlacement {
		m.ui.Output("    See why placement failed with 'berth job status %s'.", jobID)
	}
	if failed > 0 || failedPlacement {
		return 1
	}
	return 0
}

// stopped reports why following ended early: the timeout, an interrupt,
// or an API error. The job stays registered either way.
func (m *monitor) stopped(ctx context.Context, err error, what, jobID string, timeout time.Duration) int {
	hint := ""
	if jobID != "" {
		hint = fmt.Sprintf(" Follow it with 'berth job status %s'.", jobID)
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		m.ui.Error("Timed out after %s waiting for %s; the job is registered and Berth keeps working on it.%s", timeout, what, hint)
	case ctx.Err() != nil:
		m.ui.Error("Stopped following %s; the job is registered and Berth keeps working on it.%s", what, hint)
	case api.IsNotFound(err):
		m.ui.Error("No %s found (it may have been garbage collected).%s", what, hint)
	default:
		m.ui.Error("Error reading %s: %v", what, err)
	}
	return 1
}
