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
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if fs.NArg() != 0 {
		return flagErr(c.ui, c.Help(), "This command takes no arguments.")
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	if err := client.System().GarbageCollect(); err != nil {
		c.ui.Error("%s", c.apiErr("running garbage collection", err))
		return 1
	}
	c.ui.Output("Garbage collection requested")
	return 0
}
