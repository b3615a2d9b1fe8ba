package command

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/berth-io/berth/api"
)

func init() {
	register("plugin status", func(ui *UI) Command { return &PluginStatusCommand{Meta: Meta{ui: ui}} })
}

// PluginStatusCommand lists CSI plugins or shows one.
type PluginStatusCommand struct{ Meta }

func (c *PluginStatusCommand) Synopsis() string { return "Show the status of CSI plugins" }

func (c *PluginStatusCommand) Help() string {
	return `Usage: berth plugin status [options] [<plugin>]

  Without an argument, lists the CSI plugins with how many of their
  controller and node instances are healthy. With a plugin ID or a unique
  prefix of one, shows the plugin and each instance: the node it runs on,
  whether it is healthy and, when it is not, why.

Status Options:

  -type=csi
    The plugin type; Berth has CSI plugins only.
` + sharedHelp(true)
}

func (c *PluginStatusCommand) Run(args []string) int {
	fs := c.flagSet("plugin status", true)
	typ := fs.String("type", api.CSIVolumeTypeCSI, "")
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if *typ != api.CSIVolumeTypeCSI {
		return flagErr(c.ui, c.Help(), "Berth has CSI plugins only: -type must be csi, not %q.", *typ)
	}
	if fs.NArg() > 1 {
		return flagErr(c.ui, c.Help(), "This command takes at most one argument: a plugin ID or prefix.")
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	if fs.NArg() == 0 {
		return c.list(client)
	}
	stub, err := c.resolvePlugin(client, fs.Arg(0))
	if err != nil {
		c.ui.Error("%v", err)
		return 1
	}
	p, _, err := client.CSIPlugins().Info(stub.ID, nil)
	if err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("reading plugin %q", stub.ID), err))
		return 1
	}
	if done, err := c.formatted(p); done {
		return c.fmtResult(err)
	}
	c.ui.Output("%s", c.formatPlugin(p))
	return 0
}

func (c *PluginStatusCommand) list(client *api.Client) int {
	plugins, _, err := client.CSIPlugins().List(nil)
	return pluginListing.print(&c.Meta, plugins, err)
}

// pluginListing lists CSI plugins by ID.
var pluginListing = listing[*api.CSIPluginListStub]{
	kind: "plugin",
	none: "No CSI plugins",
	id:   func(p *api.CSIPluginListStub) string { return p.ID },
	sort: sortPlugins,
	rows: pluginRows,
}

func sortPlugins(plugins []*api.CSIPluginListStub) {
	sort.Slice(plugins, func(i, j int) bool { return plugins[i].ID < plugins[j].ID })
}

func pluginRows(plugins []*api.CSIPluginListStub) [][]string {
	sortPlugins(plugins)
	rows := [][]string{{"ID", "Provider", "Controllers Healthy/Expected", "Nodes Healthy/Expected"}}
	for _, p := range plugins {
		rows = append(rows, []string{p.ID, p.Provider,
			fmt.Sprintf("%d/%d", p.ControllersHealthy, p.ControllersExpected),
			fmt.Sprintf("%d/%d", p.NodesHealthy, p.NodesExpected)})
	}
	return rows
}

func (c *PluginStatusCommand) formatPlugin(p *api.CSIPlugin) string {
	var b strings.Builder
	b.WriteString(kv([][2]string{
		{"ID", p.ID},
		{"Provider", p.Provider},
		{"Version", p.Version},
		{"Controllers Healthy", strconv.Itoa(p.ControllersHealthy)},
		{"Controllers Expected", strconv.Itoa(p.ControllersExpected)},
		{"Nodes Healthy", strconv.Itoa(p.NodesHealthy)},
		{"Nodes Expected", strconv.Itoa(p.NodesExpected)},
	}))

	b.WriteString("\n\nInstances\n")
	if len(p.Controllers)+len(p.Nodes) == 0 {
		b.WriteString("No instances: no allocation runs this plugin, or none has reported yet")
	} else {
		// Description last: an unhealthy instance's reason can be long (the
		// plugin's own words), and the columns after it would drift.
		rows := [][]string{{"Node ID", "Type", "Alloc ID", "Healthy", "Updated", "Description"}}
		add := func(kind string, m map[string]*api.CSIInfo) {
			for _, node := range sortedKeys(m) {
				info := m[node]
				if info == nil {
					continue
				}
				rows = append(rows, []string{shortID(node, c.verbose), kind, shortID(info.AllocID, c.verbose),
					strconv.FormatBool(info.Healthy), ageOrTimeT(info.UpdateTime, c.verbose), oneLine(info.HealthDescription)})
			}
		}
		add("controller", p.Controllers)
		add("node", p.Nodes)
		b.WriteString(table(rows))
	}

	if rows := capacityRows(p.Controllers, c.verbose); len(rows) > 1 {
		b.WriteString("\n\nCapacity\n")
		b.WriteString(table(rows))
	}

	if c.verbose {
		if caps := controllerCaps(p.Controllers); caps != "" {
			b.WriteString("\n\nController Capabilities\n" + caps)
		}
		if caps := nodeCaps(p.Nodes); caps != "" {
			b.WriteString("\n\nNode Capabilities\n" + caps)
		}
	}

	b.WriteString("\n\nAllocations\n")
	if len(p.Allocations) == 0 {
		b.WriteString("No allocations placed")
	} else {
		b.WriteString(allocTable(p.Allocations, c.verbose))
	}
	return b.String()
}

// capacityRows is what each controller's GetCapacity said (controllers
// with GET_CAPACITY), with the topology it was asked about; just the
// header when no controller said anything.
func capacityRows(m map[string]*api.CSIInfo, verbose bool) [][]string {
	rows := [][]string{{"Node ID", "Topology", "Available", "Max Volume", "Min Volume"}}
	for _, node := range sortedKeys(m) {
		info := m[node]
		if info == nil || info.Capacity == nil {
			continue
		}
		cp := info.Capacity
		topo := "(all)"
		if cp.Topology != nil {
			topo = segments(cp.Topology.Segments)
		}
		if cp.Error != "" {
			rows = append(rows, []string{shortID(node, verbose), topo, oneLine(cp.Error), "", ""})
			continue
		}
		orUnknown := func(n int64) string {
			if n == 0 {
				return "-"
			}
			return humanBytes(n)
		}
		avail := "0 B" // a full provider, not an unknown
		if cp.AvailableBytes > 0 {
			avail = humanBytes(cp.AvailableBytes)
		}
		rows = append(rows, []string{shortID(node, verbose), topo, avail, orUnknown(cp.MaximumVolumeSize), orUnknown(cp.MinimumVolumeSize)})
	}
	return rows
}

// controllerCaps lists what any controller instance supports.
func controllerCaps(m map[string]*api.CSIInfo) string {
	set := map[string]bool{}
	for _, info := range m {
		if info == nil || info.ControllerInfo == nil {
			continue
		}
		for _, name := range info.ControllerInfo.Capabilities() {
			set[name] = true
		}
	}
	return capList(set)
}

// nodeCaps lists what any node instance supports.
func nodeCaps(m map[string]*api.CSIInfo) string {
	set := map[string]bool{}
	for _, info := range m {
		if info == nil || info.NodeInfo == nil {
			continue
		}
		for _, name := range info.NodeInfo.Capabilities() {
			set[name] = true
		}
	}
	return capList(set)
}

func capList(set map[string]bool) string {
	var lines []string
	for _, k := range sortedKeys(set) {
		lines = append(lines, "  * "+k)
	}
	return strings.Join(lines, "\n")
}

// resolvePlugin resolves a plugin ID or unique prefix.
func (m *Meta) resolvePlugin(client *api.Client, id string) (*api.CSIPluginListStub, error) {
	plugins, _, err := client.CSIPlugins().List(&api.QueryOptions{Prefix: id})
	return pluginListing.resolve(m, id, plugins, err)
}
