package agent

import (
	"net/http"
	"time"

	"github.com/berth-io/berth/nomad/explain"
	"github.com/berth-io/berth/nomad/structs"
)

// maxExplainPluginAllocs bounds the plugin instances whose jobs an
// explanation looks up (to name the job to check).
const maxExplainPluginAllocs = 16

// csiVolumeExplain serves GET /v1/volume/csi/:id/explain: why a job
// cannot get the volume, or why a release has not finished, and the next
// action (nomad/explain). It reads through the same RPCs as the volume's
// other reads, with the caller's token, so it shows nothing the token
// could not read; what it may not read counts as gone.
func (s *HTTPServer) csiVolumeExplain(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	args := structs.CSIVolumeGetRequest{ID: id}
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var reply structs.CSIVolumeGetResponse
	if err := s.agent.RPC("CSIVolume.Get", &args, &reply); err != nil {
		return nil, err
	}
	setMeta(w, &reply.QueryMeta)
	if reply.Volume == nil {
		return nil, CodedError(http.StatusNotFound, "volume not found")
	}
	vol := reply.Volume
	q := followUp(args.QueryOptions)
	in := explain.Input{Volume: vol, Allocs: map[string]*structs.Allocation{}, Nodes: map[string]*structs.Node{},
		PluginJobs: map[string]string{}, Now: time.Now()}

	var preply structs.CSIPluginGetResponse
	if err := s.agent.RPC("CSIPlugin.Get", &structs.CSIPluginGetRequest{ID: vol.PluginID, QueryOptions: q}, &preply); err != nil && !gone(err) {
		return nil, err
	}
	if p := preply.Plugin; p != nil && p.ID == vol.PluginID {
		in.Plugin = p
		n := 0
		for _, infos := range []map[string]*structs.CSIInfo{p.Controllers, p.Nodes} {
			for _, info := range infos {
				if n++; n > maxExplainPluginAllocs || info.AllocID == "" {
					continue
				}
				if a, err := s.explainAlloc(info.AllocID, q); err != nil {
					return nil, err
				} else if a != nil {
					in.PluginJobs[a.ID] = a.JobID
				}
			}
		}
	}
	for _, c := range vol.Claims {
		a, err := s.explainAlloc(c.AllocID, q)
		if err != nil {
			return nil, err
		}
		if a != nil {
			in.Allocs[a.ID] = a
		}
		if _, seen := in.Nodes[c.NodeID]; seen || c.NodeID == "" {
			continue
		}
		var nreply structs.SingleNodeResponse
		if err := s.agent.RPC("Node.GetNode", &structs.NodeSpecificRequest{NodeID: c.NodeID, QueryOptions: q}, &nreply); err != nil && !gone(err) {
			return nil, err
		}
		if nreply.Node != nil && nreply.Node.ID == c.NodeID {
			in.Nodes[c.NodeID] = nreply.Node
		}
	}
	return explain.Explain(in), nil
}

func (s *HTTPServer) explainAlloc(id string, q structs.QueryOptions) (*structs.Allocation, error) {
	q.Namespace = structs.AllNamespaces
	var reply structs.SingleAllocResponse
	if err := s.agent.RPC("Alloc.GetAlloc", &structs.AllocSpecificRequest{AllocID: id, QueryOptions: q}, &reply); err != nil && !gone(err) {
		return nil, err
	}
	if reply.Alloc == nil || reply.Alloc.ID != id {
		return nil, nil
	}
	return reply.Alloc, nil
}

// gone reports an object that no longer exists, or that the token may not
// read: either way the explanation goes on without it.
func gone(err error) bool {
	return structs.CodeOf(err) == structs.CodeNotFound || lacksRight(err)
}
