package command

import (
	"fmt"
	"strconv"
	"time"

	"github.com/berth-io/berth/api"
)

func init() {
	register("volume snapshot create", func(ui *UI) Command { return &VolumeSnapshotCreateCommand{Meta: Meta{ui: ui}} })
	register("volume snapshot list", func(ui *UI) Command { return &VolumeSnapshotListCommand{Meta: Meta{ui: ui}} })
	register("volume snapshot delete", func(ui *UI) Command { return &VolumeSnapshotDeleteCommand{Meta: Meta{ui: ui}} })
}

// VolumeSnapshotCreateCommand snapshots a volume through its plugin.
type VolumeSnapshotCreateCommand struct{ Meta }

func (c *VolumeSnapshotCreateCommand) Synopsis() string { return "Snapshot a CSI volume" }

func (c *VolumeSnapshotCreateCommand) Help() string {
	return `Usage: berth volume snapshot create [options] <volume> [<name>]

  Snapshots a volume through its plugin's controller, which must advertise
  CREATE_DELETE_SNAPSHOT. The name is the idempotency key (running the
  same create again gives the same snapshot); it defaults to the volume
  ID and the time. Whether a volume in use may be snapshotted is the
  plugin's call. A new volume can start from the snapshot with
  snapshot_id in its spec ('berth volume create').

Snapshot Create Options:

  -secret=<key>=<value>
    A secret for the plugin's CreateSnapshot call; repeat for more.

  -parameter=<key>=<value>
    A parameter for the plugin's CreateSnapshot call; repeat for more.
` + sharedHelp(true)
}

func (c *VolumeSnapshotCreateCommand) Run(args []string) int {
	fs := c.flagSet("volume snapshot create", true)
	secrets, params := kvFlag{}, kvFlag{}
	fs.Var(secrets, "secret", "")
	fs.Var(params, "parameter", "")
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return flagErr(c.ui, c.Help(), "This command takes a volume ID and, optionally, a snapshot name.")
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
	c.ui.Output("Snapshotting volume %q through plugin %q...", stub.ID, stub.PluginID)
	resp, err := whileWaiting(c.ui, fmt.Sprintf("snapshotting volume %q", stub.ID), controllerDetail(client, stub.PluginID, "CreateSnapshot"),
		func() (*api.CSISnapshotCreateResponse, error) {
			return client.CSIVolumes().CreateSnapshot(&api.CSISnapshot{
				SourceVolumeID: stub.ID, PluginID: stub.PluginID, Name: fs.Arg(1),
				Secrets: api.CSISecrets(secrets), Parameters: map[string]string(params),
			}, &api.WriteOptions{Namespace: stub.Namespace})
		})
	if err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("snapshotting volume %q", stub.ID), err))
		return 1
	}
	if done, err := c.formatted(resp.Snapshots); done {
		return c.fmtResult(err)
	}
	c.ui.Output("%s", table(snapshotRows(resp.Snapshots)))
	return 0
}

// VolumeSnapshotListCommand lists a plugin's snapshots.
type VolumeSnapshotListCommand struct{ Meta }

func (c *VolumeSnapshotListCommand) Synopsis() string { return "List the snapshots of a CSI plugin" }

func (c *VolumeSnapshotListCommand) Help() string {
	return `Usage: berth volume snapshot list -plugin <plugin> [options]

  Lists the snapshots a plugin's storage provider holds, newest first,
  one page at a time. The plugin's controller must advertise
  LIST_SNAPSHOTS.

Snapshot List Options:

  -plugin=<id>
    The plugin whose snapshots to list (required).

  -per-page=<n>
    How many snapshots to ask the plugin for (default: all it returns).

  -page-token=<token>
    Where to go on from: the token a previous page printed.
` + sharedHelp(true)
}

func (c *VolumeSnapshotListCommand) Run(args []string) int {
	fs := c.flagSet("volume snapshot list", true)
	plugin := fs.String("plugin", "", "")
	perPage := fs.Int("per-page", 0, "")
	token := fs.String("page-token", "", "")
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if *plugin == "" || fs.NArg() != 0 {
		return flagErr(c.ui, c.Help(), "Name the plugin with -plugin; this command takes no argument.")
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	q := &api.QueryOptions{PerPage: int32(*perPage), NextToken: *token}
	resp, _, err := client.CSIVolumes().ListSnapshots(*plugin, q)
	if err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("listing the snapshots of plugin %q", *plugin), err))
		return 1
	}
	if done, err := c.formatted(resp); done {
		return c.fmtResult(err)
	}
	if len(resp.Snapshots) == 0 {
		c.ui.Output("No snapshots of plugin %q", *plugin)
		return 0
	}
	c.ui.Output("%s", table(snapshotRows(resp.Snapshots)))
	if resp.NextToken != "" {
		c.ui.Output("\nMore: 'berth volume snapshot list -plugin %s -page-token %s'", *plugin, resp.NextToken)
	}
	return 0
}

// VolumeSnapshotDeleteCommand deletes a snapshot in the provider.
type VolumeSnapshotDeleteCommand struct{ Meta }

func (c *VolumeSnapshotDeleteCommand) Synopsis() string { return "Delete a CSI volume snapshot" }

func (c *VolumeSnapshotDeleteCommand) Help() string {
	return `Usage: berth volume snapshot delete [options] <plugin> <snapshot>

  Deletes a snapshot in the storage provider through the plugin's
  controller. Deleting a snapshot that is already gone succeeds.

Snapshot Delete Options:

  -secret=<key>=<value>
    A secret for the plugin's DeleteSnapshot call; repeat for more.
` + sharedHelp(false)
}

func (c *VolumeSnapshotDeleteCommand) Run(args []string) int {
	fs := c.flagSet("volume snapshot delete", false)
	secrets := kvFlag{}
	fs.Var(secrets, "secret", "")
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if fs.NArg() != 2 {
		return flagErr(c.ui, c.Help(), "This command takes two arguments: the plugin ID and the snapshot ID.")
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	snap := &api.CSISnapshot{PluginID: fs.Arg(0), ID: fs.Arg(1), Secrets: api.CSISecrets(secrets)}
	if _, err := whileWaiting(c.ui, fmt.Sprintf("deleting snapshot %q", snap.ID), controllerDetail(client, snap.PluginID, "DeleteSnapshot"),
		func() (struct{}, error) { return struct{}{}, client.CSIVolumes().DeleteSnapshot(snap, nil) }); err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("deleting snapshot %q of plugin %q", snap.ID, snap.PluginID), err))
		return 1
	}
	c.ui.Output("Snapshot %q of plugin %q deleted", snap.ID, snap.PluginID)
	return 0
}

func snapshotRows(snaps []*api.CSISnapshot) [][]string {
	rows := [][]string{{"Snapshot ID", "Volume ID", "External Volume ID", "Size", "Created", "Ready"}}
	for _, s := range snaps {
		created := "-"
		if s.CreateTime > 0 {
			created = time.Unix(s.CreateTime, 0).UTC().Format(time.RFC3339)
		}
		vol := s.SourceVolumeID
		if vol == "" {
			vol = "<none>"
		}
		rows = append(rows, []string{s.ID, vol, s.ExternalSourceVolumeID, humanBytes(s.SizeBytes), created, strconv.FormatBool(s.IsReady)})
	}
	return rows
}
