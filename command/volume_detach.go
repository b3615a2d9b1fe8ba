package command

import (
	"fmt"
	"strings"
	"time"

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
  other claim waits for. A claim whose release stopped on a plugin error
  (step needs-operator) is retried at the step it stopped at, or, when
  the plugin does not implement that step, the step is skipped.

  The command then follows the node's claims, printing each step they
  take, until they are all freed (exit 0), or one stops on an error that
  needs an operator, or -timeout passes (exit 1, naming the claim, its
  step and its last error).

Detach Options:

  -force
    For a node that is gone for good: release its claims without waiting
    for the node to confirm the unpublish. The controller still detaches
    the volume first when the plugin needs it. Refused for allocations
    still running on a live node. A claim whose release stopped on a
    plugin error has the failing step skipped.

  -timeout <duration>
    How long to follow the release (default 2m). 0 returns at once.
` + sharedHelp(false)
}

func (c *VolumeDetachCommand) Run(args []string) int {
	fs := c.flagSet("volume detach", false)
	force := fs.Bool("force", false, "")
	timeout := fs.Duration("timeout", 2*time.Minute, "")
	if err := parseArgs(fs, args); err != nil {
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
	if *timeout <= 0 {
		c.ui.Output("Release of volume %q on node %q started; follow it with 'berth volume status -verbose %s'", stub.ID, nodeID, stub.ID)
		return 0
	}
	return c.follow(client, stub.ID, stub.Namespace, nodeID, *timeout)
}

// follow watches the volume's claims on nodeID with blocking queries,
// printing each step they take, until none is left (0), one needs an
// operator, or timeout passes (1).
func (c *VolumeDetachCommand) follow(client *api.Client, volID, ns, nodeID string, timeout time.Duration) int {
	deadline := timeNow().Add(timeout)
	seen := map[string]string{}
	var index uint64
	for {
		wait := time.Until(deadline)
		if wait <= 0 {
			break
		}
		vol, qm, err := client.CSIVolumes().Info(volID, &api.QueryOptions{Namespace: ns, WaitIndex: index, WaitTime: min(wait, 30*time.Second)})
		if err != nil {
			c.ui.Error("%s", c.apiErr(fmt.Sprintf("following the release of volume %q", volID), err))
			return 1
		}
		index = qm.LastIndex
		var left, stuck []string
		for _, cl := range vol.Claims {
			if cl == nil || cl.NodeID != nodeID {
				continue
			}
			id := cl.AllocID
			state := string(cl.Step)
			if cl.LastError != "" {
				state += fmt.Sprintf(" (attempt %d: %s)", cl.Attempts, oneLine(cl.LastError))
			}
			if seen[id] != state {
				seen[id] = state
				c.ui.Output("  alloc %s: %s", shortID(id, false), state)
			}
			left = append(left, id)
			if cl.Step == api.CSIClaimNeedsOperator {
				stuck = append(stuck, fmt.Sprintf("alloc %s stopped at step %s: %s", shortID(id, false), cl.BlockedStep, oneLine(cl.LastError)))
			}
		}
		if len(left) == 0 {
			c.ui.Output("Volume %q detached from node %q: every claim there is freed", volID, nodeID)
			return 0
		}
		if len(stuck) > 0 {
			c.ui.Error("Volume %q is not detached from node %q: %s.\nFix the plugin and run 'berth volume detach %s %s' again to retry the step, "+
				"or add -force if the volume is known to be detached", volID, nodeID, strings.Join(stuck, "; "), volID, nodeID)
			return 1
		}
	}
	c.ui.Error("Volume %q is still being released on node %q after %s; follow it with 'berth volume status -verbose %s'",
		volID, nodeID, timeout, volID)
	return 1
}
