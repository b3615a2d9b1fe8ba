package command

import "fmt"

func init() {
	register("node eligibility", func(ui *UI) Command { return &NodeEligibilityCommand{Meta: Meta{ui: ui}} })
}

// NodeEligibilityCommand marks a node eligible or ineligible for new
// allocations.
type NodeEligibilityCommand struct{ Meta }

func (c *NodeEligibilityCommand) Synopsis() string {
	return "Mark a node eligible or ineligible for new allocations"
}

func (c *NodeEligibilityCommand) Help() string {
	return `Usage: berth node eligibility [options] (-enable | -disable) <node>

  An ineligible node gets no new allocations; those it runs keep running.
  Use 'berth node drain' to move them away.

Eligibility Options:

  -enable
    Mark the node eligible.

  -disable
    Mark the node ineligible.
` + sharedHelp(false)
}

func (c *NodeEligibilityCommand) Run(args []string) int {
	fs := c.flagSet("node eligibility", false)
	var enable, disable bool
	fs.BoolVar(&enable, "enable", false, "")
	fs.BoolVar(&disable, "disable", false, "")
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if enable == disable {
		return flagErr(c.ui, c.Help(), "Give exactly one of -enable and -disable.")
	}
	if fs.NArg() != 1 {
		return flagErr(c.ui, c.Help(), "This command takes one argument: the node ID.")
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	node, _, err := c.resolveNode(client, fs.Arg(0))
	if err != nil {
		c.ui.Error("%v", err)
		return 1
	}
	if _, err := client.Nodes().ToggleEligibility(node.ID, enable, nil); err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("updating the eligibility of node %q", node.ID), err))
		return 1
	}
	if enable {
		c.ui.Output("Node %q scheduling eligibility set: eligible for scheduling", node.ID)
	} else {
		c.ui.Output("Node %q scheduling eligibility set: ineligible for scheduling", node.ID)
	}
	return 0
}
