package command

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/berth-io/berth/api"
)

func init() {
	register("job stop", func(ui *UI) Command { return &JobStopCommand{Meta: Meta{ui: ui}} })
}

// JobStopCommand stops (deregisters) a job.
type JobStopCommand struct {
	Meta
	// stdin answers the confirmation; nil means os.Stdin.
	stdin io.Reader
}

func (c *JobStopCommand) Synopsis() string { return "Stop a running job" }

func (c *JobStopCommand) Help() string {
	return `Usage: berth job stop [options] <job>

  Stops a job: its allocations are stopped and its volume claims released
  once their tasks have exited. Then follows the evaluation that stops
  them, unless -detach is given. A unique prefix of the job ID works too;
  the command then asks for confirmation (or takes -yes).

  Purging never releases a volume claim early: claims are freed only
  after the allocation's tasks have exited and the volume is unpublished.

Stop Options:

  -purge
    Remove the job from the servers at once instead of keeping it, stopped,
    until garbage collection.

  -detach
    Return at once, printing the evaluation ID.

  -timeout=<duration>
    How long to follow the evaluation. Default 5m.

  -yes
    Do not ask for confirmation when the job was named by a prefix.

  -verbose
    Show full IDs.
` + sharedHelp(false)
}

func (c *JobStopCommand) Run(args []string) int {
	fs := c.flagSet("job stop", false)
	var purge, detach, yes bool
	var timeout time.Duration
	fs.BoolVar(&purge, "purge", false, "")
	fs.BoolVar(&detach, "detach", false, "")
	fs.BoolVar(&yes, "yes", false, "")
	fs.BoolVar(&c.verbose, "verbose", false, "")
	fs.DurationVar(&timeout, "timeout", 5*time.Minute, "")
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if fs.NArg() != 1 {
		return flagErr(c.ui, c.Help(), "This command takes one argument: the job ID.")
	}
	if timeout <= 0 {
		return flagErr(c.ui, c.Help(), "-timeout must be positive, got %s.", timeout)
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	stub, exact, err := c.resolveJob(client, fs.Arg(0))
	if err != nil {
		c.ui.Error("%v", err)
		return 1
	}
	if !exact && !yes && !confirm(c.ui, c.stdin, fmt.Sprintf("Are you sure you want to stop job %q?", stub.ID)) {
		c.ui.Output("Cancelled: job %q was not stopped.", stub.ID)
		return 0
	}
	evalID, _, err := client.Jobs().Deregister(stub.ID, purge, &api.WriteOptions{Namespace: stub.Namespace})
	if err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("stopping job %q", stub.ID), err))
		return 1
	}
	if evalID == "" || detach {
		if evalID != "" {
			c.ui.Output("%s", evalID)
		} else {
			c.ui.Output("Job %q stopped", stub.ID)
		}
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	return newMonitor(c.ui, client, stub.Namespace, c.verbose).run(ctx, evalID, stub.ID, false, timeout)
}
