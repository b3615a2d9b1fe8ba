package command

import (
	"fmt"
	"io"

	"github.com/berth-io/berth/api"
)

func init() {
	register("volume delete", func(ui *UI) Command { return &VolumeDeleteCommand{Meta: Meta{ui: ui}} })
}

// VolumeDeleteCommand deletes a volume in the storage provider.
type VolumeDeleteCommand struct {
	Meta
	// stdin answers the confirmation; nil means os.Stdin.
	stdin io.Reader
}

func (c *VolumeDeleteCommand) Synopsis() string { return "Delete a CSI volume in the storage provider" }

func (c *VolumeDeleteCommand) Help() string {
	return `Usage: berth volume delete [options] <volume>

  Deletes a volume in the storage provider through its plugin's controller
  and deregisters it. Its data is gone. The volume is named by its ID or a
  unique prefix; it must have no claims.

  A volume that was registered (it existed before Berth knew it), not
  made by 'berth volume create', is deleted only after you confirm, or
  with -yes. To make Berth forget a volume and keep its data, use
  'berth volume deregister'.

Delete Options:

  -yes
    Do not ask before deleting a volume Berth did not create.

  -secret=<key>=<value>
    A secret for the plugin's DeleteVolume call; repeat for more.
` + sharedHelp(false)
}

func (c *VolumeDeleteCommand) Run(args []string) int {
	fs := c.flagSet("volume delete", false)
	secrets := kvFlag{}
	fs.Var(secrets, "secret", "")
	yes := fs.Bool("yes", false, "")
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
	if !*yes {
		vol, _, err := client.CSIVolumes().Info(stub.ID, &api.QueryOptions{Namespace: stub.Namespace})
		if err != nil {
			c.ui.Error("%s", c.apiErr(fmt.Sprintf("reading volume %q", stub.ID), err))
			return 1
		}
		if !vol.Created && !confirm(c.ui, c.stdin, fmt.Sprintf(
			"Volume %q was registered, not created by Berth: plugin %q will DELETE it and its data in the storage provider "+
				"(to keep the data, run 'berth volume deregister %s' instead). Delete it?", stub.ID, vol.PluginID, stub.ID)) {
			c.ui.Output("Volume %q not deleted", stub.ID)
			return 1
		}
	}
	req := &api.CSIVolumeDeleteRequest{ExternalVolumeID: stub.ID, Secrets: api.CSISecrets(secrets)}
	if _, err := whileWaiting(c.ui, fmt.Sprintf("deleting volume %q", stub.ID), controllerDetail(client, stub.PluginID, "DeleteVolume"),
		func() (struct{}, error) {
			return struct{}{}, client.CSIVolumes().DeleteOpts(req, &api.WriteOptions{Namespace: stub.Namespace})
		}); err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("deleting volume %q", stub.ID), err))
		return 1
	}
	c.ui.Output("Volume %q deleted", stub.ID)
	return 0
}
