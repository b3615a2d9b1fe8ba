package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-io/berth/api"
)

func init() {
	register("alloc logs", func(ui *UI) Command { return &AllocLogsCommand{Meta: Meta{ui: ui}} })
}

// AllocLogsCommand prints a task's stdout or stderr.
type AllocLogsCommand struct {
	Meta
	// followPoll is how often -f asks again when the agent ends the
	// stream (it does not hold follow streams open yet).
	followPoll time.Duration
}

func (c *AllocLogsCommand) Synopsis() string { return "Print the logs of a task" }

func (c *AllocLogsCommand) Help() string {
	return `Usage: berth alloc logs [options] <allocation> [<task>]

  Prints the stdout (or with -stderr the stderr) log of a task of an
  allocation. The task may be left out when the allocation runs one task.
  The logs are read from the agent of the node that runs the allocation.

Logs Options:

  -stderr
    Print the stderr log instead of stdout.

  -stdout
    Print the stdout log (the default).

  -task=<name>
    The task, instead of the second argument.

  -job
    Take the first argument as a job ID and read an allocation of that job
    (a running one when there is one).

  -f
    Follow the log: keep printing what the task writes until interrupted.

  -tail
    Print the end of the log: the last 10 lines, or as many as -n or -c say.

  -n=<lines>
    With -tail, how many lines to print.

  -c=<bytes>
    With -tail, how many bytes to print.

  -verbose
    Show full IDs in messages.
` + sharedHelp(false)
}

// tailBytesPerLine is the first guess at how many bytes -n lines take;
// the command asks for more when the guess was short.
const tailBytesPerLine = 120

func (c *AllocLogsCommand) Run(args []string) int {
	fs := c.flagSet("alloc logs", false)
	var stderr, stdout, follow, tail, byJob bool
	var task string
	var lines, numBytes int64
	fs.BoolVar(&stderr, "stderr", false, "")
	fs.BoolVar(&stdout, "stdout", false, "")
	fs.BoolVar(&follow, "f", false, "")
	fs.BoolVar(&tail, "tail", false, "")
	fs.BoolVar(&byJob, "job", false, "")
	fs.BoolVar(&c.verbose, "verbose", false, "")
	fs.StringVar(&task, "task", "", "")
	fs.Int64Var(&lines, "n", -1, "")
	fs.Int64Var(&numBytes, "c", -1, "")
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	args = fs.Args()
	if len(args) < 1 || len(args) > 2 {
		return flagErr(c.ui, c.Help(), "This command takes an allocation ID (or with -job a job ID) and optionally a task name.")
	}
	if stderr && stdout {
		return flagErr(c.ui, c.Help(), "Give only one of -stdout and -stderr.")
	}
	if (lines >= 0 || numBytes >= 0) && !tail {
		return flagErr(c.ui, c.Help(), "-n and -c choose how much of the end to print: use them with -tail.")
	}
	if lines >= 0 && numBytes >= 0 {
		return flagErr(c.ui, c.Help(), "Give only one of -n and -c.")
	}
	if task == "" && len(args) == 2 {
		task = args[1]
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}

	var alloc *api.Allocation
	if byJob {
		alloc, err = c.jobAlloc(client, args[0])
	} else {
		alloc, err = c.resolveAlloc(client, args[0])
	}
	if err != nil {
		c.ui.Error("%v", err)
		return 1
	}
	if task, err = pickTask(alloc, task, c.verbose, "berth alloc logs %s <task>"); err != nil {
		c.ui.Error("%v", err)
		return 1
	}
	addrs, err := c.logAddrs(client, alloc)
	if err != nil {
		c.ui.Error("%v", err)
		return 1
	}

	logType := "stdout"
	if stderr {
		logType = "stderr"
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r := &logReader{meta: &c.Meta, addrs: addrs, allocID: alloc.ID, task: task, logType: logType}

	var n int64
	switch {
	case tail && numBytes >= 0:
		n, err = r.copy(ctx, c.ui.Out, "end", numBytes)
	case tail:
		if lines < 0 {
			lines = 10
		}
		n, err = r.tailLines(ctx, c.ui.Out, lines)
	default:
		n, err = r.copy(ctx, c.ui.Out, "start", 0)
	}
	if err == nil && follow {
		err = r.follow(ctx, c.ui.Out, n, c.followPoll)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		c.ui.Error("Error reading the %s log of task %q in allocation %s: %v", logType, task, shortID(alloc.ID, c.verbose), err)
		return 1
	}
	return 0
}

// resolveAlloc finds the allocation an ID or unique prefix names.
func (c *AllocLogsCommand) resolveAlloc(client *api.Client, prefix string) (*api.Allocation, error) {
	stub, err := c.resolveAllocPrefix(client, prefix)
	if err != nil {
		return nil, err
	}
	alloc, _, err := client.Allocations().Info(stub.ID, nil)
	if err != nil {
		return nil, errors.New(c.apiErr(fmt.Sprintf("reading allocation %s", stub.ID), err))
	}
	return alloc, nil
}

// jobAlloc picks an allocation of a job: the newest running one, else
// the newest.
func (c *AllocLogsCommand) jobAlloc(client *api.Client, jobID string) (*api.Allocation, error) {
	stubs, _, err := client.Jobs().Allocations(jobID, false, nil)
	if err != nil {
		if api.IsNotFound(err) {
			return nil, fmt.Errorf("No job with ID %q found. Run 'berth job status' to list jobs.", jobID)
		}
		return nil, errors.New(c.apiErr(fmt.Sprintf("listing allocations of job %q", jobID), err))
	}
	if len(stubs) == 0 {
		return nil, fmt.Errorf("Job %q has no allocations yet; see 'berth job status %s'.", jobID, jobID)
	}
	sort.Slice(stubs, func(i, j int) bool { return stubs[i].CreateIndex > stubs[j].CreateIndex })
	pick := stubs[0]
	for _, s := range stubs {
		if s.ClientStatus == api.AllocClientStatusRunning {
			pick = s
			break
		}
	}
	alloc, _, err := client.Allocations().Info(pick.ID, nil)
	if err != nil {
		return nil, errors.New(c.apiErr(fmt.Sprintf("reading allocation %s", pick.ID), err))
	}
	return alloc, nil
}

// pickTask checks task against the allocation's tasks, or picks the only
// one when task is empty. usage is the command line that names a task,
// with %s for the allocation ID, quoted in the error when one must be named.
func pickTask(alloc *api.Allocation, task string, verbose bool, usage string) (string, error) {
	var tasks []string
	if alloc.Job != nil {
		if tg := alloc.Job.LookupTaskGroup(alloc.TaskGroup); tg != nil {
			for _, t := range tg.Tasks {
				if t != nil {
					tasks = append(tasks, t.Name)
				}
			}
		}
	}
	if len(tasks) == 0 {
		tasks = sortedKeys(alloc.TaskStates)
	}
	sort.Strings(tasks)
	if task != "" {
		for _, t := range tasks {
			if t == task {
				return task, nil
			}
		}
		if len(tasks) == 0 {
			return task, nil // nothing to check against; the agent will say
		}
		return "", fmt.Errorf("Allocation %s has no task %q; its tasks are: %s.", shortID(alloc.ID, verbose), task, strings.Join(tasks, ", "))
	}
	switch len(tasks) {
	case 1:
		return tasks[0], nil
	case 0:
		return "", fmt.Errorf("Allocation %s has no tasks yet; name the task: %s", shortID(alloc.ID, verbose), fmt.Sprintf(usage, shortID(alloc.ID, verbose)))
	}
	return "", fmt.Errorf("Allocation %s runs %d tasks (%s); name one: %s",
		shortID(alloc.ID, verbose), len(tasks), strings.Join(tasks, ", "), fmt.Sprintf(usage, shortID(alloc.ID, verbose)))
}

// logAddrs are the agents to ask for the logs, in order: the agent of
// the node that runs the allocation (only it has them), then the agent
// the CLI talks to (the same agent in a one-node cluster).
func (c *Meta) logAddrs(client *api.Client, alloc *api.Allocation) ([]string, error) {
	var addrs []string
	if alloc.NodeID != "" {
		node, _, err := client.Nodes().Info(alloc.NodeID, nil)
		switch {
		case err == nil && node.HTTPAddr != "":
			scheme := "http://"
			// A cluster with tls.http serves HTTPS on every agent.
			if node.TLSEnabled || strings.HasPrefix(client.Address(), "https://") {
				scheme = "https://"
			}
			addrs = append(addrs, scheme+node.HTTPAddr)
		case err != nil && !api.IsNotFound(err):
			return nil, errors.New(c.apiErr(fmt.Sprintf("reading node %s of allocation %s", alloc.NodeID, shortID(alloc.ID, c.verbose)), err))
		}
	}
	return append(addrs, ""), nil
}

// logReader reads one task log from the first agent that answers.
type logReader struct {
	meta                   *Meta
	addrs                  []string
	allocID, task, logType string
}

// open asks for the log from origin ("start" or "end") at offset.
func (r *logReader) open(ctx context.Context, origin string, offset int64) (io.ReadCloser, error) {
	params := url.Values{
		"task":   {r.task},
		"type":   {r.logType},
		"plain":  {"true"},
		"origin": {origin},
		"offset": {strconv.FormatInt(offset, 10)},
	}
	var lastErr error
	for _, addr := range r.addrs {
		resp, err := r.meta.rawGet(ctx, addr, "/v1/client/fs/logs/"+r.allocID, params)
		if err == nil {
			return resp.Body, nil
		}
		lastErr = err
		if !isConnErr(err) {
			break // the agent answered: its answer stands
		}
	}
	if isConnErr(lastErr) {
		return nil, fmt.Errorf("%w\nThe logs live on the agent of the node that runs the allocation; check that it is up and reachable from here", lastErr)
	}
	return nil, lastErr
}

// copy writes the log from origin/offset to w and returns the bytes
// written.
func (r *logReader) copy(ctx context.Context, w io.Writer, origin string, offset int64) (int64, error) {
	body, err := r.open(ctx, origin, offset)
	if err != nil {
		return 0, err
	}
	defer body.Close()
	n, err := io.Copy(w, body)
	if origin == "end" {
		// Where the next read starts, counted from the start, is unknown
		// here; follow() re-reads the end instead.
		return -1, err
	}
	return n, err
}

// tailLines writes the last n lines. It asks for n*120 bytes from the
// end and asks for more while that held fewer than n lines.
func (r *logReader) tailLines(ctx context.Context, w io.Writer, n int64) (int64, error) {
	if n == 0 {
		return -1, nil
	}
	want := max(n*tailBytesPerLine, 4096)
	for {
		body, err := r.open(ctx, "end", want)
		if err != nil {
			return 0, err
		}
		data, err := io.ReadAll(body)
		body.Close()
		if err != nil {
			return 0, err
		}
		trimmed := bytes.TrimSuffix(data, []byte("\n"))
		if int64(bytes.Count(trimmed, []byte("\n"))) >= n || int64(len(data)) < want {
			// Enough lines, or the whole log.
			lines := bytes.SplitAfter(data, []byte("\n"))
			if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
				lines = lines[:len(lines)-1]
			}
			if int64(len(lines)) > n {
				lines = lines[int64(len(lines))-n:]
			}
			_, err := w.Write(bytes.Join(lines, nil))
			return -1, err
		}
		want *= 4
	}
}

// follow keeps printing what the task writes after the first read. The
// agent ends a log stream at the current end of the log, so follow asks
// again every poll interval for what came after it (from offset read,
// or from the end when read is -1).
func (r *logReader) follow(ctx context.Context, w io.Writer, read int64, poll time.Duration) error {
	if poll <= 0 {
		poll = time.Second
	}
	if read < 0 {
		// Learn the log's length: read it whole, print nothing.
		n, err := r.copy(ctx, io.Discard, "start", 0)
		if err != nil {
			return err
		}
		read = n
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		n, err := r.copy(ctx, w, "start", read)
		if err != nil {
			return err
		}
		read += n
	}
}

// resolveAllocPrefix resolves an allocation ID or unique prefix to its
// stub; an unknown or ambiguous prefix is an error that says so (and
// lists the matches).
func (m *Meta) resolveAllocPrefix(client *api.Client, prefix string) (*api.AllocationListStub, error) {
	verbose := m.verbose
	if len(prefix) < 2 {
		return nil, fmt.Errorf("Allocation ID %q is too short: give at least 2 characters.", prefix)
	}
	stubs, _, err := client.Allocations().PrefixList(prefix)
	if err != nil {
		return nil, errors.New(m.apiErr("listing allocations", err))
	}
	one, matches, ok := pickByPrefix(prefix, stubs, func(a *api.AllocationListStub) string { return a.ID })
	if ok {
		return one, nil
	}
	if len(matches) == 0 {
		return nil, notFound("allocation", prefix, "berth job status <job>")
	}
	// Servers list in index order, fakes in map order: sort so the table
	// reads the same every time.
	sort.Slice(matches, func(i, j int) bool { return matches[i].ID < matches[j].ID })
	rows := [][]string{{"ID", "Eval ID", "Job ID", "Task Group", "Desired", "Status"}}
	for _, a := range matches {
		rows = append(rows, []string{shortID(a.ID, verbose), shortID(a.EvalID, verbose), a.JobID, a.TaskGroup, a.DesiredStatus, a.ClientStatus})
	}
	return nil, ambiguous("allocation", prefix, rows)
}
