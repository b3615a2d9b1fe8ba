package command

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berth-io/berth/api"
)

func init() {
	register("volume status", func(ui *UI) Command { return &VolumeStatusCommand{Meta: Meta{ui: ui}} })
}

// VolumeStatusCommand lists CSI volumes or shows one with its claims.
type VolumeStatusCommand struct{ Meta }

func (c *VolumeStatusCommand) Synopsis() string { return "Show the status of CSI volumes" }

func (c *VolumeStatusCommand) Help() string {
	return `Usage: berth volume status [options] [<volume>]

  Without an argument, lists the CSI volumes. With a volume ID or a unique
  prefix of one, shows the volume: its plugin's health, its modes and
  topologies, the allocations that use it, and its claims, each with the
  step of the claim protocol it is at, its attempts and last error. With
  -verbose it also shows the recent past claims and how each ended.

  A claim goes reserved -> taken -> node-detached -> controller-detached ->
  freed. A claim that stays in a step shows why in Last Error; a claim on a
  node that is gone can be released with 'berth volume detach'.

Status Options:

  -type=csi
    The volume type; Berth has CSI volumes only.

  -plugin-id=<id>
    List only the volumes of this plugin.

  -node=<node>
    List only the volumes claimed on this node (ID or unique prefix).
` + sharedHelp(true)
}

func (c *VolumeStatusCommand) Run(args []string) int {
	fs := c.flagSet("volume status", true)
	var typ, pluginID, node string
	fs.StringVar(&typ, "type", api.CSIVolumeTypeCSI, "")
	fs.StringVar(&pluginID, "plugin-id", "", "")
	fs.StringVar(&node, "node", "", "")
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if typ != api.CSIVolumeTypeCSI {
		return flagErr(c.ui, c.Help(), "Berth has CSI volumes only: -type must be csi, not %q.", typ)
	}
	if fs.NArg() > 1 {
		return flagErr(c.ui, c.Help(), "This command takes at most one argument: a volume ID or prefix.")
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	if fs.NArg() == 0 {
		return c.list(client, pluginID, node)
	}
	if pluginID != "" || node != "" {
		return flagErr(c.ui, c.Help(), "-plugin-id and -node filter the list; leave them out when naming a volume.")
	}
	stub, err := c.resolveVolume(client, fs.Arg(0))
	if err != nil {
		c.ui.Error("%v", err)
		return 1
	}
	vol, _, err := client.CSIVolumes().Info(stub.ID, &api.QueryOptions{Namespace: stub.Namespace})
	if err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("reading volume %q", stub.ID), err))
		return 1
	}
	if done, err := c.formatted(vol); done {
		return c.fmtResult(err)
	}
	c.ui.Output("%s", c.formatVolume(vol))
	return 0
}

func (c *VolumeStatusCommand) list(client *api.Client, pluginID, node string) int {
	q := &api.QueryOptions{Params: map[string]string{}}
	if pluginID != "" {
		q.Params["plugin_id"] = pluginID
	}
	if node != "" {
		nodeID := node
		if len(node) < 36 {
			n, _, err := c.resolveNode(client, node)
			if err != nil {
				c.ui.Error("%v", err)
				return 1
			}
			nodeID = n.ID
		}
		q.Params["node_id"] = nodeID
	}
	vols, _, err := client.CSIVolumes().List(q)
	return volumeListing(c.verbose).print(&c.Meta, vols, err)
}

// volumeListing lists CSI volumes by namespace and ID; verbose adds
// columns.
func volumeListing(verbose bool) listing[*api.CSIVolumeListStub] {
	return listing[*api.CSIVolumeListStub]{
		kind: "volume",
		none: "No CSI volumes",
		id:   func(v *api.CSIVolumeListStub) string { return v.ID },
		sort: sortVolumes,
		rows: func(vols []*api.CSIVolumeListStub) [][]string { return volumeRows(vols, verbose) },
	}
}

// sortVolumes orders volumes by namespace, then ID.
func sortVolumes(vols []*api.CSIVolumeListStub) {
	sort.Slice(vols, func(i, j int) bool {
		if vols[i].Namespace != vols[j].Namespace {
			return vols[i].Namespace < vols[j].Namespace
		}
		return vols[i].ID < vols[j].ID
	})
}

func volumeRows(vols []*api.CSIVolumeListStub, verbose bool) [][]string {
	sortVolumes(vols)
	header := []string{"ID", "Name", "Namespace", "Plugin ID", "Schedulable", "Access Mode", "Claims"}
	if verbose {
		header = append(header, "State", "External ID", "Provider")
	}
	rows := [][]string{header}
	for _, v := range vols {
		claims := v.Claims
		if claims == 0 {
			claims = v.CurrentReaders + v.CurrentWriters
		}
		row := []string{v.ID, v.Name, v.Namespace, v.PluginID, strconv.FormatBool(v.Schedulable), string(v.AccessMode), strconv.Itoa(claims)}
		if verbose {
			row = append(row, string(v.State), v.ExternalID, v.Provider)
		}
		rows = append(rows, row)
	}
	return rows
}

func (c *VolumeStatusCommand) formatVolume(v *api.CSIVolume) string {
	var b strings.Builder
	b.WriteString(kv([][2]string{
		{"ID", v.ID},
		{"Name", v.Name},
		{"External ID", v.ExternalID},
		{"Plugin ID", v.PluginID},
		{"Provider", v.Provider},
		{"Version", v.ProviderVersion},
		{"State", string(v.State)},
		{"Capacity", humanBytes(v.Capacity)},
		{"Schedulable", strconv.FormatBool(v.Schedulable)},
		{"Controllers Healthy", strconv.Itoa(v.ControllersHealthy)},
		{"Controllers Expected", strconv.Itoa(v.ControllersExpected)},
		{"Nodes Healthy", strconv.Itoa(v.NodesHealthy)},
		{"Nodes Expected", strconv.Itoa(v.NodesExpected)},
		{"Access Mode", string(v.AccessMode)},
		{"Attachment Mode", string(v.AttachmentMode)},
		{"Mount Options", mountOptions(v.MountOptions)},
		{"Namespace", v.Namespace},
	}))

	if len(v.Topologies) > 0 {
		b.WriteString("\n\nTopologies\n")
		rows := [][]string{{"Topology", "Segments"}}
		for i, t := range v.Topologies {
			if t != nil {
				rows = append(rows, []string{fmt.Sprintf("%02d", i), segments(t.Segments)})
			}
		}
		b.WriteString(table(rows))
	}

	if e := v.Expansion; e != nil {
		b.WriteString("\n\nExpansion\n")
		b.WriteString(expansionText(e))
	}

	if len(v.MutableParameters) > 0 || v.Modification != nil {
		b.WriteString("\n\nMutable Parameters\n")
		b.WriteString(modificationText(v.MutableParameters, v.Modification))
	}

	if len(v.Stats) > 0 {
		b.WriteString("\n\nUsage\n")
		b.WriteString(table(statsRows(v.Stats, c.verbose)))
	}

	b.WriteString("\n\nAllocations\n")
	if len(v.Allocations) == 0 {
		b.WriteString("No allocations placed")
	} else {
		b.WriteString(allocTable(v.Allocations, c.verbose))
	}

	b.WriteString("\n\nClaims\n")
	if len(v.Claims) == 0 {
		b.WriteString("No claims")
	} else {
		b.WriteString(table(c.claimRows(v.Claims)))
	}

	if c.verbose {
		writeClaimTimelines(&b, v.Claims, "Claim Timeline")
		b.WriteString("\n\nPast Claims\n")
		if len(v.PastClaims) == 0 {
			b.WriteString("No past claims")
		} else {
			b.WriteString(table(c.pastClaimRows(v.PastClaims)))
		}
	}
	return b.String()
}

// claimRows is the live claims table, oldest first.
func (c *VolumeStatusCommand) claimRows(claims []*api.CSIVolumeClaim) [][]string {
	header := []string{"Alloc ID", "Node ID", "Mode", "Step", "Attempts", "Last Error", "Age"}
	if c.verbose {
		header = append(header, "Next Retry", "External Node ID", "Job ID")
	}
	rows := [][]string{header}
	for _, cl := range claims {
		if cl == nil {
			continue
		}
		row := []string{shortID(cl.AllocID, c.verbose), shortID(cl.NodeID, c.verbose), string(cl.Mode), string(cl.Step),
			strconv.Itoa(cl.Attempts), oneLine(cl.LastError), prettyTimeDiff(unixNano(cl.CreateTime), timeNow())}
		if c.verbose {
			next := ""
			if cl.NextRetry != 0 {
				next = prettyTimeDiff(unixNano(cl.NextRetry), timeNow())
			}
			row = append(row, next, cl.ExternalNodeID, cl.JobID)
		}
		rows = append(rows, row)
	}
	return rows
}

// pastClaimRows is the past claims table, newest first, saying how each
// ended: "released" for the normal path, else the release reason
// ("detach -force", "node disconnect deadline passed", ...).
func (c *VolumeStatusCommand) pastClaimRows(claims []*api.CSIVolumeClaim) [][]string {
	rows := [][]string{{"Alloc ID", "Node ID", "Mode", "Step", "Ended", "Attempts", "Last Error", "Freed"}}
	for i := len(claims) - 1; i >= 0; i-- {
		cl := claims[i]
		if cl == nil {
			continue
		}
		ended := cl.ReleaseReason
		if ended == "" {
			ended = "released"
		}
		rows = append(rows, []string{shortID(cl.AllocID, c.verbose), shortID(cl.NodeID, c.verbose), string(cl.Mode), string(cl.Step),
			ended, strconv.Itoa(cl.Attempts), oneLine(cl.LastError), ageOrTime(cl.ModifyTime, false)})
	}
	return rows
}

// mountOptions renders mount options as "fs_type: ext4 flags: noatime".
func mountOptions(o *api.CSIMountOptions) string {
	if o == nil || (o.FSType == "" && len(o.MountFlags) == 0) {
		return ""
	}
	var parts []string
	if o.FSType != "" {
		parts = append(parts, "fs_type: "+o.FSType)
	}
	if len(o.MountFlags) > 0 {
		parts = append(parts, "flags: "+strings.Join(o.MountFlags, ","))
	}
	return strings.Join(parts, " ")
}

// resolveVolume resolves a volume ID or unique prefix in the CLI's
// namespace; the error says when it matched nothing or several volumes
// (listing them).
func (m *Meta) resolveVolume(client *api.Client, id string) (*api.CSIVolumeListStub, error) {
	vols, _, err := client.CSIVolumes().List(&api.QueryOptions{Prefix: id})
	return volumeListing(false).resolve(m, id, vols, err)
}

// writeClaimTimelines prints each claim's history as a timeline: when it
// moved, from which step to which, and the error and attempts it had.
func writeClaimTimelines(b *strings.Builder, claims []*api.CSIVolumeClaim, title string) {
	shown := false
	for _, cl := range claims {
		if cl == nil || len(cl.History) == 0 {
			continue
		}
		if !shown {
			b.WriteString("\n\n" + title)
			shown = true
		}
		fmt.Fprintf(b, "\nalloc %s on node %s\n", cl.AllocID, cl.NodeID)
		rows := [][]string{{"Time", "Transition", "Attempts", "Error"}}
		for _, t := range cl.History {
			rows = append(rows, []string{formatUnixNano(t.Time), transitionText(t), strconv.Itoa(t.Attempts), oneLine(t.Error + reasonSuffix(t))})
		}
		b.WriteString(table(rows))
	}
}

func transitionText(t api.CSIClaimTransition) string {
	switch {
	case t.From == "":
		return string(t.To)
	case t.From == t.To:
		return string(t.To) + " (retry)"
	}
	return string(t.From) + " -> " + string(t.To)
}

func reasonSuffix(t api.CSIClaimTransition) string {
	if t.Reason == "" {
		return ""
	}
	if t.Error == "" {
		return t.Reason
	}
	return " (" + t.Reason + ")"
}

// statsRows is the per-node usage table, by node ID.
func statsRows(stats map[string]*api.CSIVolumeStats, verbose bool) [][]string {
	rows := [][]string{{"Node ID", "Used", "Available", "Total", "Inodes Used", "Inodes Free", "Condition", "Sampled"}}
	ids := make([]string, 0, len(stats))
	for id := range stats {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	size := func(n int64) string {
		switch {
		case n < 0:
			return "-"
		case n == 0:
			return "0 B"
		}
		return humanBytes(n)
	}
	count := func(n int64) string {
		if n < 0 {
			return "-"
		}
		return strconv.FormatInt(n, 10)
	}
	for _, id := range ids {
		st := stats[id]
		cond := "-"
		if st.Condition != nil {
			cond = "healthy"
			if st.Condition.Abnormal {
				cond = "abnormal: " + st.Condition.Message
			}
		}
		rows = append(rows, []string{shortID(id, verbose), size(st.UsedBytes), size(st.AvailableBytes), size(st.TotalBytes),
			count(st.UsedInodes), count(st.AvailableInodes), cond, formatTime(time.Unix(0, st.SampledAt))})
	}
	return rows
}

// modificationText lists the mutable parameters in force and the last
// change, with the plugin's refusal when it refused.
func modificationText(params map[string]string, m *api.CSIVolumeModification) string {
	var lines [][2]string
	for _, k := range slices.Sorted(maps.Keys(params)) {
		lines = append(lines, [2]string{k, params[k]})
	}
	if m != nil {
		var sent []string
		for _, k := range slices.Sorted(maps.Keys(m.Parameters)) {
			sent = append(sent, k+"="+m.Parameters[k])
		}
		what := "set " + strings.Join(sent, ", ")
		if m.Error != "" {
			what = "refused " + strings.Join(sent, ", ") + ": " + m.Error
		}
		lines = append(lines, [2]string{"Last Change", what}, [2]string{"Changed", formatTime(time.Unix(0, m.Time))})
	}
	return kv(lines)
}

// expansionText says where the last expansion got.
func expansionText(e *api.CSIVolumeExpansion) string {
	step := "controller: pending"
	if e.ControllerDone {
		step = "controller: expanded to " + humanBytes(e.CapacityBytes)
	}
	lines := [][2]string{{"Requested", humanBytes(e.RequestedBytes)}, {"Controller", strings.TrimPrefix(step, "controller: ")}}
	if e.NodeRequired {
		ids := make([]string, 0, len(e.Nodes))
		for id := range e.Nodes {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		var nodes []string
		for _, id := range ids {
			nodes = append(nodes, shortID(id, false)+" "+e.Nodes[id])
		}
		lines = append(lines, [2]string{"Nodes", strings.Join(nodes, ", ")})
	}
	if e.Error != "" {
		lines = append(lines, [2]string{"Last Error", e.Error})
	}
	lines = append(lines, [2]string{"Updated", formatTime(time.Unix(0, e.Time))})
	return kv(lines)
}
