package command

import (
	"fmt"
	"strings"

	"github.com/berth-io/berth/api"
)

func init() {
	register("volume explain", func(ui *UI) Command { return &VolumeExplainCommand{Meta: Meta{ui: ui}} })
}

// VolumeExplainCommand says why a volume cannot be claimed or released,
// and what to do.
type VolumeExplainCommand struct{ Meta }

func (c *VolumeExplainCommand) Synopsis() string {
	return "Say why a job cannot get a CSI volume, or why its release waits"
}

func (c *VolumeExplainCommand) Help() string {
	return `Usage: berth volume explain [options] <volume>

  Reads the volume, its claims, their allocations and nodes, and its plugin,
  and says in plain words why a job cannot get the volume or why a release
  has not finished, with the next action for each reason. The servers
  decide the same way (the claim state machine), so what it says is what
  they will do. The volume is named by its ID or a unique prefix.

Explain Options:

  -json
    Print the explanation as JSON.
` + sharedHelp(false)
}

func (c *VolumeExplainCommand) Run(args []string) int {
	fs := c.flagSet("volume explain", true)
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if fs.NArg() != 1 {
		return flagErr(c.ui, c.Help(), "This command takes one argument: a volume ID or prefix.")
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	stub, err := c.resolveVolume(client, fs.Arg(0))
	if err != nil {
		c.ui.Error("%v", err)
		return 1
	}
	e, _, err := client.CSIVolumes().Explain(stub.ID, &api.QueryOptions{Namespace: stub.Namespace})
	if err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("explaining volume %q", stub.ID), err))
		return 1
	}
	if done, err := c.formatted(e); done {
		return c.fmtResult(err)
	}
	c.ui.Output("%s", explanationText(e))
	return 0
}

func explanationText(e *api.CSIVolumeExplanation) string {
	var b strings.Builder
	b.WriteString(e.Summary)
	for _, f := range e.Findings {
		b.WriteString("\n\n- " + f.Why)
		if f.Action != "" {
			b.WriteString("\n  next: " + f.Action)
		}
	}
	return b.String()
}
