package command

func init() {
	register("system gc", func(ui *UI) Command { return &SystemGCCommand{Meta: Meta{ui: ui}} })
}

// SystemGCCommand runs the servers' garbage collection now.
type SystemGCCommand struct{ Meta }

func (c *SystemGCCommand) Synopsis() string { return "Run the garbage collector now" }

func (c *SystemGCCommand) Help() string {
	return `Usage: berth system gc [options]

  Runs the servers' garbage collection now instead of at its next interval:
  terminal evaluations, allocations and stopped jobs, freed volume claims
  and plugins without instances are removed.
` + sharedHelp(false)
}

func (c *SystemGCCommand) Run(args []string) int {
	fs := c.flagSet("system gc", false)
	client, code := c.startNoArgs(fs, args, c.Help())
	if client == nil {
		return code
	}
	if err := client.System().GarbageCollect(); err != nil {
		c.ui.Error("%s", c.apiErr("running garbage collection", err))
		return 1
	}
	c.ui.Output("Garbage collection requested")
	return 0
}
