package command

import (
	"fmt"
)

func init() {
	register("job validate", func(ui *UI) Command { return &JobValidateCommand{Meta: Meta{ui: ui}} })
}

// JobValidateCommand checks a jobspec without registering it.
type JobValidateCommand struct{ Meta }

func (c *JobValidateCommand) Synopsis() string { return "Check a jobspec without running it" }

func (c *JobValidateCommand) Help() string {
	return `Usage: berth job validate [options] <file>

  Parses the jobspec ("-" reads standard input) and has the servers check
  it as a registration would (a dry run: nothing is registered or placed).
  Exits 0 when the job is valid, 1 with every problem found otherwise.
` + sharedHelp(false)
}

func (c *JobValidateCommand) Run(args []string) int {
	fs := c.flagSet("job validate", false)
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if fs.NArg() != 1 {
		return flagErr(c.ui, c.Help(), "This command takes one argument: the jobspec file (or - for standard input).")
	}
	job, err := parseJob(fs.Arg(0), nil)
	if err != nil {
		c.ui.Error("Job validation errors:\n%v", err)
		return 1
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	resp, _, err := client.Jobs().Plan(job, nil)
	if err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("validating job %q", deref(job.ID)), err))
		return 1
	}
	if resp.Warnings != "" {
		c.ui.Output("Job Warnings:\n%s\n", resp.Warnings)
	}
	c.ui.Output("Job validation successful")
	return 0
}

// valueOf is *p, or the zero value for nil.
func valueOf[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
