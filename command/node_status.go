package command

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berth-io/berth/api"
)

func init() {
	register("node status", func(ui *UI) Command { return &NodeStatusCommand{Meta: Meta{ui: ui}} })
}

// NodeStatusCommand lists client nodes or shows one.
type NodeStatusCommand struct{ Meta }

func (c *NodeStatusCommand) Synopsis() string { return "Show the status of client nodes" }

func (c *NodeStatusCommand) Help() string {
	return `Usage: berth node status [options] [<node>]

  Without an argument, lists the client nodes. With a node ID or a unique
  prefix of one, shows the node: its drivers (detected, healthy, whether
  they can mount volumes), the CSI plugins running on it with their health,
  and its allocations. -verbose adds the node's attributes and meta.
` + sharedHelp(true)
}

func (c *NodeStatusCommand) Run(args []string) int {
	fs := c.flagSet("node status", true)
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if fs.NArg() > 1 {
		return flagErr(c.ui, c.Help(), "This command takes at most one argument: a node ID or prefix.")
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	if fs.NArg() == 0 {
		return c.list(client)
	}
	stub, _, err := c.resolveNode(client, fs.Arg(0))
	if err != nil {
		c.ui.Error("%v", err)
		return 1
	}
	node, _, err := client.Nodes().Info(stub.ID, nil)
	if err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("reading node %s", stub.ID), err))
		return 1
	}
	if done, err := c.formatted(node); done {
		return c.fmtResult(err)
	}
	allocs, _, err := client.Nodes().Allocations(stub.ID, nil)
	if err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("listing allocations of node %s", stub.ID), err))
		return 1
	}
	c.ui.Output("%s", c.formatNode(node, allocs))
	return 0
}

func (c *NodeStatusCommand) list(client *api.Client) int {
	nodes, _, err := client.Nodes().List(nil)
	return nodeListing(c.verbose).print(&c.Meta, nodes, err)
}

// nodeListing lists nodes by name; verbose adds columns and full IDs.
func nodeListing(verbose bool) listing[*api.NodeListStub] {
	return listing[*api.NodeListStub]{
		kind: "node",
		none: "No client nodes",
		id:   func(n *api.NodeListStub) string { return n.ID },
		sort: sortNodes,
		rows: func(nodes []*api.NodeListStub) [][]string { return nodeRows(nodes, verbose) },
	}
}

func sortNodes(nodes []*api.NodeListStub) {
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
}

func nodeRows(nodes []*api.NodeListStub, verbose bool) [][]string {
	sortNodes(nodes)
	header := []string{"ID", "DC", "Name", "Class", "Drain", "Eligibility", "Status"}
	if verbose {
		header = append(header, "Address", "Version")
	}
	rows := [][]string{header}
	for _, n := range nodes {
		row := []string{shortID(n.ID, verbose), n.Datacenter, n.Name, n.NodeClass, strconv.FormatBool(n.Drain), n.SchedulingEligibility, n.Status}
		if verbose {
			row = append(row, n.Address, n.Version)
		}
		rows = append(rows, row)
	}
	return rows
}

func (c *NodeStatusCommand) formatNode(n *api.Node, allocs []*api.Allocation) string {
	var b strings.Builder
	drain := "false"
	if n.DrainStrategy != nil {
		switch d := n.DrainStrategy.Deadline; {
		case d < 0:
			drain = "true; force (stopping allocations now)"
		case n.DrainStrategy.ForceDeadline.IsZero():
			drain = "true; no deadline"
		default:
			drain = "true; deadline " + formatTime(n.DrainStrategy.ForceDeadline)
		}
		if n.DrainStrategy.IgnoreSystemJobs {
			drain += "; ignoring system jobs"
		}
	} else if n.Drain {
		drain = "true"
	}
	status := n.Status
	if n.StatusDescription != "" {
		status += " (" + n.StatusDescription + ")"
	}
	b.WriteString(kv([][2]string{
		{"ID", shortID(n.ID, c.verbose)},
		{"Name", n.Name},
		{"Class", n.NodeClass},
		{"DC", n.Datacenter},
		{"Address", n.HTTPAddr},
		{"Drain", drain},
		{"Eligibility", n.SchedulingEligibility},
		{"Status", status},
		{"CSI Controllers", strings.Join(sortedKeys(n.CSIControllerPlugins), ",")},
		{"CSI Drivers", strings.Join(sortedKeys(n.CSINodePlugins), ",")},
		{"Driver Status", strings.Join(healthyDrivers(n.Drivers), ",")},
	}))

	b.WriteString("\n\nDrivers\n")
	if len(n.Drivers) == 0 {
		b.WriteString("No drivers")
	} else {
		rows := [][]string{{"Driver", "Detected", "Healthy", "MountConfig", "Message", "Time"}}
		for _, name := range sortedKeys(n.Drivers) {
			d := n.Drivers[name]
			if d == nil {
				continue
			}
			rows = append(rows, []string{name, strconv.FormatBool(d.Detected), strconv.FormatBool(d.Healthy),
				d.MountConfig, oneLine(d.HealthDescription), formatTime(d.UpdateTime)})
		}
		b.WriteString(table(rows))
	}

	if len(n.CSIControllerPlugins)+len(n.CSINodePlugins) > 0 {
		b.WriteString("\n\nCSI Plugins\n")
		rows := [][]string{{"Plugin ID", "Type", "Alloc ID", "Healthy", "Description", "Updated"}}
		add := func(kind string, m map[string]*api.CSIInfo) {
			for _, id := range sortedKeys(m) {
				info := m[id]
				if info == nil {
					continue
				}
				rows = append(rows, []string{id, kind, shortID(info.AllocID, c.verbose), strconv.FormatBool(info.Healthy),
					oneLine(info.HealthDescription), ageOrTimeT(info.UpdateTime, c.verbose)})
			}
		}
		add("controller", n.CSIControllerPlugins)
		add("node", n.CSINodePlugins)
		b.WriteString(table(rows))
	}

	if c.verbose {
		if len(n.Attributes) > 0 {
			b.WriteString("\n\nAttributes\n")
			b.WriteString(kv(mapPairs(n.Attributes)))
		}
		if len(n.Meta) > 0 {
			b.WriteString("\n\nMeta\n")
			b.WriteString(kv(mapPairs(n.Meta)))
		}
	}

	b.WriteString("\n\nAllocations\n")
	if len(allocs) == 0 {
		b.WriteString("No allocations placed")
	} else {
		sort.Slice(allocs, func(i, j int) bool { return allocs[i].CreateIndex > allocs[j].CreateIndex })
		rows := [][]string{{"ID", "Job ID", "Task Group", "Version", "Desired", "Status", "Created", "Modified"}}
		for _, a := range allocs {
			s := a.Stub()
			rows = append(rows, []string{shortID(s.ID, c.verbose), s.JobID, s.TaskGroup, strconv.FormatUint(s.JobVersion, 10),
				s.DesiredStatus, s.ClientStatus, ageOrTime(s.CreateTime, c.verbose), ageOrTime(s.ModifyTime, c.verbose)})
		}
		b.WriteString(table(rows))
	}
	return b.String()
}

// healthyDrivers lists the detected, healthy drivers.
func healthyDrivers(ds map[string]*api.DriverInfo) []string {
	var out []string
	for _, name := range sortedKeys(ds) {
		if d := ds[name]; d != nil && d.Detected && d.Healthy {
			out = append(out, name)
		}
	}
	return out
}

func mapPairs(m map[string]string) [][2]string {
	out := make([][2]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, [2]string{k, m[k]})
	}
	return out
}

// ageOrTimeT is ageOrTime for a time.Time.
func ageOrTimeT(t time.Time, verbose bool) string {
	if verbose {
		return formatTime(t)
	}
	return prettyTimeDiff(t, timeNow())
}

// resolveNode resolves a node ID or unique prefix; the error says when
// it matched nothing or several nodes (listing them). exact reports
// whether id was the whole ID.
func (m *Meta) resolveNode(client *api.Client, id string) (stub *api.NodeListStub, exact bool, err error) {
	if len(id) < 2 {
		return nil, false, fmt.Errorf("Node ID %q is too short: give at least 2 characters.", id)
	}
	nodes, _, err := client.Nodes().PrefixList(id)
	stub, err = nodeListing(m.verbose).resolve(m, id, nodes, err)
	if err != nil {
		return nil, false, err
	}
	return stub, stub.ID == id, nil
}
