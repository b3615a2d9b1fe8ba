package structs

// CSIPlugin is the servers' view of one CSI plugin across the cluster,
// derived from node fingerprints: which nodes run its controller and node
// instances, and whether they are healthy.
type CSIPlugin struct {
	ID                 string
	Provider           string
	Version            string
	ControllerRequired bool

	// PublishUnpublish and PublishReadOnly are what the plugin's
	// controllers advertise (PUBLISH_UNPUBLISH_VOLUME, PUBLISH_READONLY).
	// The claim protocol decides with them (nomad/claims), never with
	// "the plugin has a controller". Recomputed whenever a controller
	// instance fingerprints, they keep their last value while the plugin
	// has no controller instance (a controller job restarting must not
	// turn a plugin that attaches into one that does not); a plugin that
	// never had a controller instance (node-only) has both false.
	PublishUnpublish bool
	PublishReadOnly  bool

	// Controllers and Nodes map node ID to that node's fingerprint.
	Controllers map[string]*CSIInfo
	Nodes       map[string]*CSIInfo

	ControllersHealthy  int
	ControllersExpected int
	NodesHealthy        int
	NodesExpected       int

	CreateIndex uint64
	ModifyIndex uint64
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

// IsEmpty reports whether no node runs any instance of the plugin.
func (p *CSIPlugin) IsEmpty() bool {
	return len(p.Controllers) == 0 && len(p.Nodes) == 0
}

// RecountHealth recomputes the healthy and expected counts from the
// instance maps.
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
