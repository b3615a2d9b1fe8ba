package command

import (
	"fmt"

	"github.com/berth-io/berth/api"
)

func init() {
	register("volume deregister", func(ui *UI) Command { return &VolumeDeregisterCommand{Meta: Meta{ui: ui}} })
}

// VolumeDeregisterCommand removes a volume from Berth, keeping it in the
// storage provider.
type VolumeDeregisterCommand struct{ Meta }

func (c *VolumeDeregisterCommand) Synopsis() string { return "Deregister a CSI volume" }

func (c *VolumeDeregisterCommand) Help() string {
	return `Usage: berth volume deregister [options] <volume>

  Removes a volume from Berth; the storage provider keeps it (use
  'berth volume delete' to delete it there). The volume is named by its ID
  or a unique prefix. A volume with claims cannot be deregistered.

Deregister Options:

  -force
    Drop the claims of allocations that have stopped. It still fails while
    allocations using the volume run: stop their jobs first.
` + sharedHelp(false)
}

func (c *VolumeDeregisterCommand) Run(args []string) int {
	fs := c.flagSet("volume deregister", false)
	force := fs.Bool("force", false, "")
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if fs.NArg() != 1 {
		return flagErr(c.ui, c.Help(), "This command takes one argument: the volume ID.")
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
	if err := client.CSIVolumes().Deregister(stub.ID, *force, &api.WriteOptions{Namespace: stub.Namespace}); err != nil {
		msg := c.apiErr(fmt.Sprintf("deregistering volume %q", stub.ID), err)
		if !*force && !api.IsNotFound(err) && !isConnErr(err) {
			msg += fmt.Sprintf("\nSee its claims with 'berth volume status %s'; once their allocations have stopped, -force drops them.", stub.ID)
		}
		c.ui.Error("%s", msg)
		return 1
	}
	c.ui.Output("Volume %q deregistered", stub.ID)
	return 0
}
