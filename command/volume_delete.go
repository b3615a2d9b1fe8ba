package command

import (
	"fmt"

	"github.com/berth-io/berth/api"
)

func init() {
	register("volume delete", func(ui *UI) Command { return &VolumeDeleteCommand{Meta: Meta{ui: ui}} })
}

// VolumeDeleteCommand deletes a volume in the storage provider.
type VolumeDeleteCommand struct{ Meta }

func (c *VolumeDeleteCommand) Synopsis() string { return "Delete a CSI volume in the storage provider" }

func (c *VolumeDeleteCommand) Help() string {
	return `Usage: berth volume delete [options] <volume>

  Deletes a volume in the storage provider through its plugin's controller
  and deregisters it. Its data is gone. The volume is named by its ID or a
  unique prefix; it must have no claims.

Delete Options:

  -secret=<key>=<value>
    A secret for the plugin's DeleteVolume call; repeat for more.
` + sharedHelp(false)
}

func (c *VolumeDeleteCommand) Run(args []string) int {
	fs := c.flagSet("volume delete", false)
	secrets := kvFlag{}
	fs.Var(secrets, "secret", "")
	if err := fs.Parse(args); err != nil {
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
	req := &api.CSIVolumeDeleteRequest{ExternalVolumeID: stub.ID, Secrets: api.CSISecrets(secrets)}
	if err := client.CSIVolumes().DeleteOpts(req, &api.WriteOptions{Namespace: stub.Namespace}); err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("deleting volume %q", stub.ID), err))
		return 1
	}
	c.ui.Output("Volume %q deleted", stub.ID)
	return 0
}
