package command

import (
	"fmt"
	"io"
	"strings"

	"github.com/berth-io/berth/api"
)

func init() {
	register("volume create", func(ui *UI) Command { return &VolumeCreateCommand{Meta: Meta{ui: ui}} })
}

// VolumeCreateCommand creates a volume through the plugin's controller.
type VolumeCreateCommand struct {
	Meta
	// stdin is read for the file "-"; nil means os.Stdin.
	stdin io.Reader
}

func (c *VolumeCreateCommand) Synopsis() string { return "Create a CSI volume in the storage provider" }

func (c *VolumeCreateCommand) Help() string {
	return `Usage: berth volume create [options] <file>

  Creates a volume in the storage provider through its CSI plugin's
  controller, from a volume specification in HCL or JSON ("-" reads
  standard input; see 'berth volume init'), and registers it. Prints the
  volume as created: its external ID, capacity and topologies.
` + sharedHelp(true)
}

func (c *VolumeCreateCommand) Run(args []string) int {
	vol, client, code := c.volumeSpecArgs(c.flagSet("volume create", true), c.Help(), args, c.stdin)
	if code != 0 {
		return code
	}
	resp, err := whileWaiting(c.ui, fmt.Sprintf("creating volume %q", vol.ID), controllerDetail(client, vol.PluginID, "CreateVolume"),
		func() (*api.CSIVolumeCreateResponse, error) {
			resp, _, err := client.CSIVolumes().CreateOpts(&api.CSIVolumeCreateRequest{Volumes: []*api.CSIVolume{vol}},
				&api.WriteOptions{Namespace: vol.Namespace})
			return resp, err
		})
	if err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("creating volume %q with plugin %q", vol.ID, vol.PluginID), err))
		return 1
	}
	vols := resp.Volumes
	if vols == nil {
		vols = []*api.CSIVolume{}
	}
	if done, err := c.formatted(vols); done {
		return c.fmtResult(err)
	}
	printWarnings(c.ui, resp.Warnings)
	if len(vols) == 0 {
		c.ui.Output("Volume %q created", vol.ID)
		return 0
	}
	for i, v := range vols {
		if i > 0 {
			c.ui.Output("")
		}
		c.ui.Output("%s", createdLine(v, outcomeOf(resp.Outcomes, i)))
		c.ui.Output("%s", kv([][2]string{
			{"ID", v.ID},
			{"Name", v.Name},
			{"External ID", v.ExternalID},
			{"Namespace", v.Namespace},
			{"Plugin ID", v.PluginID},
			{"Capacity", humanBytes(v.Capacity)},
			{"Topologies", topologiesInline(v.Topologies)},
		}))
	}
	return 0
}

// outcomeOf is the outcome of volume i; an agent that does not say (an
// older one) created it.
func outcomeOf(outcomes []string, i int) string {
	if i < len(outcomes) && outcomes[i] != "" {
		return outcomes[i]
	}
	return api.CSIVolumeCreated
}

// createdLine says what the create did to v: a volume that already
// existed was not created, only expanded or modified.
func createdLine(v *api.CSIVolume, outcome string) string {
	switch outcome {
	case api.CSIVolumeExpanded:
		return fmt.Sprintf("Expanded volume %q to %s", v.ID, humanBytes(v.Capacity))
	case api.CSIVolumeModified:
		return fmt.Sprintf("Modified volume %q", v.ID)
	case api.CSIVolumeExpandedModified:
		return fmt.Sprintf("Expanded volume %q to %s and modified it", v.ID, humanBytes(v.Capacity))
	}
	return fmt.Sprintf("Created volume %q (external ID %q)", v.ID, v.ExternalID)
}

// topologiesInline renders topologies on one line: "zone=a; zone=b".
func topologiesInline(ts []*api.CSITopology) string {
	var parts []string
	for _, t := range ts {
		if t != nil {
			parts = append(parts, segments(t.Segments))
		}
	}
	return strings.Join(parts, "; ")
}

// segments renders topology segments "k=v, k2=v2", sorted by key.
func segments(s map[string]string) string {
	var parts []string
	for _, k := range sortedKeys(s) {
		parts = append(parts, k+"="+s[k])
	}
	return strings.Join(parts, ", ")
}
