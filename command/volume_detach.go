package command

import (
	"fmt"
	"strings"

	"github.com/berth-io/berth/api"
)

func init() {
	register("volume detach", func(ui *UI) Command { return &VolumeDetachCommand{Meta: Meta{ui: ui}} })
}

// VolumeDetachCommand releases a volume's claims on a node.
type VolumeDetachCommand struct{ Meta }

func (c *VolumeDetachCommand) Synopsis() string { return "Detach a CSI volume from a node" }

func (c *VolumeDetachCommand) Help() string {
	return `Usage: berth volume detach [options] <volume> <node>

  Releases the volume's claims on a node: the node unpublishes it, then
  the controller detaches it, for claims whose allocations have stopped
  but were not released (a node that went away, a plugin that failed).
  The volume and node are named by their IDs or unique prefixes.

  Without -force, only claims whose allocations have stopped and whose
  node has confirmed the unpublish are released; Berth reports what each
  other claim waits for.

Detach Options:

  -force
    For a node that is gone for good: release its claims without waiting
    for the node to confirm the unpublish. The controller still detaches
    the volume first when the plugin needs it. Refused for allocations
    still running on a live node.
` + sharedHelp(false)
}

func (c *VolumeDetachCommand) Run(args []string) int {
	fs := c.flagSet("volume detach", false)
	force := fs.Bool("force", false, "")
	if err := fs.Parse(args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if fs.NArg() != 2 {
		return flagErr(c.ui, c.Help(), "This command takes two arguments: the volume ID and the node ID.")
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
	nodeID := fs.Arg(1)
	node, _, err := c.resolveNode(client, nodeID)
	switch {
	case err == nil:
		nodeID = node.ID
	case len(nodeID) == 36:
		// A node that is gone from the servers still has claims to drop.
	default:
		c.ui.Error("%v", err)
		return 1
	}
	w := &api.WriteOptions{Namespace: stub.Namespace}
	if *force {
		w.Params = map[string]string{"force": "true"}
	}
	if err := client.CSIVolumes().Detach(stub.ID, nodeID, w); err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("detaching volume %q from node %q", stub.ID, nodeID), err))
		return 1
	}
	c.ui.Output("Volume %q detached from node %q", stub.ID, nodeID)

	// The release may finish in the background: say what is left.
	vol, _, err := client.CSIVolumes().Info(stub.ID, &api.QueryOptions{Namespace: stub.Namespace})
	if err != nil {
		return 0
	}
	var left []string
	for _, cl := range vol.Claims {
		if cl != nil && cl.NodeID == nodeID {
			s := fmt.Sprintf("alloc %s at step %s", shortID(cl.AllocID, false), cl.Step)
			if cl.LastError != "" {
				s += " (last error: " + oneLine(cl.LastError) + ")"
			}
			left = append(left, s)
		}
	}
	if len(left) > 0 {
		c.ui.Output("Claims still being released on that node: %s\nFollow them with 'berth volume status %s'.", strings.Join(left, "; "), stub.ID)
	}
	return 0
}
