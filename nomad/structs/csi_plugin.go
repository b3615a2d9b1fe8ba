package structs

// CSIPlugin is the servers' view of one CSI plugin across the cluster,
// derived from node fingerprints: which nodes run its controller and node
// instances, and whether they are healthy.
//
// The state store keeps the instances in a table of their own
// (CSIPluginInstance, one row per plugin and node) and the plugin's row
// as a summary: Controllers and Nodes are nil there, and the counts and
// flags below are kept up to date one node's instances at a time
// (ReplaceInstances), so a node write costs the same whatever the number
// of nodes. Reads that show the instances fill the maps in.
type CSIPlugin struct {
	ID                 string
	Provider           string
	Version            string
	ControllerRequired bool

	// PublishUnpublish and PublishReadOnly are what the plugin's
	// controllers advertise (PUBLISH_UNPUBLISH_VOLUME, PUBLISH_READONLY).
	// The claim protocol decides with them (nomad/claims), never with
	// "the plugin has a controller". Recomputed whenever a controller
	// instance fingerprints, they keep their last value while no
	// controller instance says what it advertises (none left: a controller
	// job restarting; or each one's ControllerGetCapabilities failed,
	// CSIInfo.ControllerCapsUnknown): that must not turn a plugin that
	// attaches into one that does not. A plugin none of whose controllers
	// ever said (node-only) has both false.
	PublishUnpublish bool
	PublishReadOnly  bool

	// Controllers and Nodes map node ID to that node's fingerprint. nil in
	// the store's summary row (state's CSIPluginSummary); filled in by the
	// reads that show them (state's CSIPluginByID).
	Controllers map[string]*CSIInfo
	Nodes       map[string]*CSIInfo

	ControllersHealthy  int
	ControllersExpected int
	NodesHealthy        int
	NodesExpected       int

	CreateIndex uint64
	ModifyIndex uint64

	// tally counts what the flags above summarize. It is not encoded:
	// the store recounts it from the instances when it restores a
	// snapshot (RecountFrom).
	tally pluginTally
}

// pluginTally counts the instances behind a plugin's derived flags, so
// that removing one instance can tell whether another still sets a flag
// without reading them all.
type pluginTally struct {
	requireController int // instances of either kind with RequiresControllerPlugin
	saidCaps          int // controllers that said what they advertise
	attachDetach      int // of those, with PUBLISH_UNPUBLISH_VOLUME
	readOnlyAttach    int // of those, with PUBLISH_READONLY
}

// CSIPluginInstance is one node's instances of one plugin: a row of the
// state store's csi_plugin_instances table, keyed by plugin and node.
// Controller or Node is nil when the node runs no instance of that kind;
// a row has at least one.
type CSIPluginInstance struct {
	PluginID   string
	NodeID     string
	Controller *CSIInfo
	Node       *CSIInfo

	// ModifyIndex is the Raft index of the write that last changed the
	// row.
	ModifyIndex uint64
}

// ReplaceInstances replaces one node's instances in p's counts and flags:
// oldController and oldNode (nil: none) are what the node ran before,
// controller and node what it runs now. It costs the same whatever the
// number of nodes.
//
// ControllerRequired holds when any instance requires a controller, and
// PublishUnpublish and PublishReadOnly when any controller that said what
// it advertises advertises them; ControllerRequired keeps its value while
// the plugin has no instance, and the publish flags theirs while no
// controller says.
//
// Why "said" (seed 6719): a controller whose ControllerGetCapabilities
// failed (a timeout, a plugin restarting) fingerprints with every
// capability false. Counted, it made a plugin that attaches look like one
// that does not while it was the only controller left, and the servers
// then freed controller-published claims without ControllerUnpublish — the
// volume stayed attached to the old node and the next claim attached it to
// a second one. An unhealthy controller that did answer still counts: the
// scheduler must know the plugin attaches to wait for a healthy one.
func (p *CSIPlugin) ReplaceInstances(oldController, oldNode, controller, node *CSIInfo) {
	p.count(oldController, oldNode, -1)
	p.count(controller, node, 1)
	if p.ControllersExpected+p.NodesExpected > 0 {
		p.ControllerRequired = p.tally.requireController > 0
	}
	if p.tally.saidCaps > 0 {
		p.PublishUnpublish = p.tally.attachDetach > 0
		p.PublishReadOnly = p.tally.readOnlyAttach > 0
	}
}

func (p *CSIPlugin) count(controller, node *CSIInfo, delta int) {
	if c := controller; c != nil {
		p.ControllersExpected += delta
		if c.Healthy {
			p.ControllersHealthy += delta
		}
		if c.RequiresControllerPlugin {
			p.tally.requireController += delta
		}
		if ci := c.ControllerInfo; ci != nil && !c.ControllerCapsUnknown {
			p.tally.saidCaps += delta
			if ci.SupportsAttachDetach {
				p.tally.attachDetach += delta
			}
			if ci.SupportsReadOnlyAttach {
				p.tally.readOnlyAttach += delta
			}
		}
	}
	if n := node; n != nil {
		p.NodesExpected += delta
		if n.Healthy {
			p.NodesHealthy += delta
		}
		if n.RequiresControllerPlugin {
			p.tally.requireController += delta
		}
	}
}

// RecountFrom recomputes p's counts and flags from every instance of the
// plugin (a restore's: the tally is not in snapshots). Flags keep their
// values where ReplaceInstances would (no instance, no controller that said).
func (p *CSIPlugin) RecountFrom(instances []*CSIPluginInstance) {
	p.ControllersHealthy, p.ControllersExpected, p.NodesHealthy, p.NodesExpected = 0, 0, 0, 0
	p.tally = pluginTally{}
	for _, in := range instances {
		p.ReplaceInstances(nil, nil, in.Controller, in.Node)
	}
}

// Copy returns a deep copy.
func (p *CSIPlugin) Copy() *CSIPlugin {
	if p == nil {
		return nil
	}
	out := *p
	out.Controllers = copyCSIInfos(p.Controllers)
	out.Nodes = copyCSIInfos(p.Nodes)
	return &out
}

func copyCSIInfos(m map[string]*CSIInfo) map[string]*CSIInfo {
	if m == nil {
		return nil
	}
	out := make(map[string]*CSIInfo, len(m))
	for k, v := range m {
		out[k] = v.Copy()
	}
	return out
}

// IsEmpty reports whether no node runs any instance of the plugin (by
// the counts, which the summary row has too).
func (p *CSIPlugin) IsEmpty() bool {
	return p.ControllersExpected == 0 && p.NodesExpected == 0
}

// RecountHealth recomputes the healthy and expected counts from the
// instance maps (of a plugin built with them, e.g. in a test).
func (p *CSIPlugin) RecountHealth() {
	p.ControllersHealthy, p.NodesHealthy = 0, 0
	for _, c := range p.Controllers {
		if c.Healthy {
			p.ControllersHealthy++
		}
	}
	for _, n := range p.Nodes {
		if n.Healthy {
			p.NodesHealthy++
		}
	}
	p.ControllersExpected = len(p.Controllers)
	p.NodesExpected = len(p.Nodes)
}

// HealthyControllerNodes returns the IDs of nodes with a healthy controller
// instance.
func (p *CSIPlugin) HealthyControllerNodes() []string {
	var out []string
	for id, c := range p.Controllers {
		if c.Healthy {
			out = append(out, id)
		}
	}
	return out
}

// CSIPluginListStub is the list view of a plugin.
type CSIPluginListStub struct {
	ID                  string
	Provider            string
	ControllerRequired  bool
	PublishUnpublish    bool
	ControllersHealthy  int
	ControllersExpected int
	NodesHealthy        int
	NodesExpected       int
	CreateIndex         uint64
	ModifyIndex         uint64
}

// Stub returns the list view.
func (p *CSIPlugin) Stub() *CSIPluginListStub {
	return &CSIPluginListStub{
		ID: p.ID, Provider: p.Provider, ControllerRequired: p.ControllerRequired,
		PublishUnpublish: p.PublishUnpublish, ControllersHealthy: p.ControllersHealthy, ControllersExpected: p.ControllersExpected,
		NodesHealthy: p.NodesHealthy, NodesExpected: p.NodesExpected,
		CreateIndex: p.CreateIndex, ModifyIndex: p.ModifyIndex,
	}
}

// CSIPluginDeleteRequest removes an empty plugin (plugin GC).
type CSIPluginDeleteRequest struct {
	ID string
	WriteRequest
}

// CSIPluginGetRequest reads one plugin.
type CSIPluginGetRequest struct {
	ID string
	QueryOptions
}

// CSIPluginGetResponse carries the plugin, or nil.
type CSIPluginGetResponse struct {
	Plugin *CSIPlugin
	QueryMeta
}

// CSIPluginListResponse carries list stubs.
type CSIPluginListResponse struct {
	Plugins []*CSIPluginListStub
	QueryMeta
}
