package agent

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/helper/steptrace"
	"github.com/berth-io/berth/nomad/structs"
)

// CSI volume and plugin routes, as Nomad's:
//
//	GET    /v1/volumes?type=csi[&plugin_id=][&node_id=]   list
//	GET    /v1/volume/csi/:id                             read
//	PUT    /v1/volume/csi/:id  {"Volumes": [...]}         register
//	DELETE /v1/volume/csi/:id[?force=true]                deregister
//	DELETE /v1/volume/csi/:id/detach?node=[&force=true]   detach from a node
//	PUT    /v1/volume/csi/:id/create {"Volumes": [...]}  create via the controller
//	DELETE /v1/volume/csi/:id/delete (X-Nomad-CSI-Secrets) delete via the controller
//	GET    /v1/plugins?type=csi                           list
//	GET    /v1/plugin/csi/:id                             read
//
// Volumes carry their plugin's health (Schedulable and the counts), the
// stubs of the allocs that claim them, and Berth's claim steps; never
// their secrets.

func (s *HTTPServer) csiVolumesRequest(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	// Nomad lists host volumes without ?type=; Berth has none.
	if r.URL.Query().Get("type") != api.CSIVolumeTypeCSI {
		return []*api.CSIVolumeListStub{}, nil
	}
	var args structs.CSIVolumeListRequest
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	args.PluginID = r.URL.Query().Get("plugin_id")
	args.NodeID = r.URL.Query().Get("node_id")
	var reply structs.CSIVolumeListResponse
	if err := s.agent.RPC("CSIVolume.List", &args, &reply); err != nil {
		return nil, err
	}
	setMeta(w, &reply.QueryMeta)
	health, err := s.pluginHealths(args.QueryOptions)
	if err != nil {
		return nil, err
	}
	if reply.Volumes == nil {
		reply.Volumes = []*structs.CSIVolumeListStub{} // [], not null
	}
	return volumeList{vols: reply.Volumes, health: health}, nil
}

func (s *HTTPServer) csiVolumeRequest(w http.ResponseWriter, r *http.Request) (any, error) {
	id := trimPath(r, "/v1/volume/csi/")
	if volID, ok := strings.CutSuffix(id, "/detach"); ok && volID != "" && !strings.Contains(volID, "/") {
		if r.Method != http.MethodDelete {
			return nil, methodNotAllowed(r)
		}
		return s.csiVolumeDetach(w, r, volID)
	}
	if volID, ok := strings.CutSuffix(id, "/create"); ok && volID != "" && !strings.Contains(volID, "/") {
		if r.Method != http.MethodPut && r.Method != http.MethodPost {
			return nil, methodNotAllowed(r)
		}
		return s.csiVolumeCreate(w, r, volID)
	}
	if volID, ok := strings.CutSuffix(id, "/explain"); ok && volID != "" && !strings.Contains(volID, "/") {
		if r.Method != http.MethodGet {
			return nil, methodNotAllowed(r)
		}
		return s.csiVolumeExplain(w, r, volID)
	}
	if volID, ok := strings.CutSuffix(id, "/delete"); ok && volID != "" && !strings.Contains(volID, "/") {
		if r.Method != http.MethodDelete {
			return nil, methodNotAllowed(r)
		}
		return s.csiVolumeDelete(w, r, volID)
	}
	if id == "" || strings.Contains(id, "/") {
		return nil, CodedError(http.StatusNotFound, "no such endpoint: "+r.URL.Path)
	}
	switch r.Method {
	case http.MethodGet:
		return s.csiVolumeGet(w, r, id)
	case http.MethodPut, http.MethodPost:
		return s.csiVolumeRegister(w, r, id)
	case http.MethodDelete:
		return s.csiVolumeDeregister(w, r, id)
	}
	return nil, methodNotAllowed(r)
}

func (s *HTTPServer) csiVolumeGet(w http.ResponseWriter, r *http.Request, id string) (any, error) {
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
	return s.volumeToAPI(reply.Volume, args.QueryOptions)
}

// volumeToAPI adds the plugin's health and the claiming allocs' stubs to
// a volume the servers sanitized.
func (s *HTTPServer) volumeToAPI(vol *structs.CSIVolume, q structs.QueryOptions) (*api.CSIVolume, error) {
	// A list by prefix, not a get: Get resolves ID prefixes, and the
	// volume's plugin may be gone while others share its ID as a prefix.
	preq := structs.GenericRequest{QueryOptions: followUp(q)}
	preq.Prefix = vol.PluginID
	var plugs structs.CSIPluginListResponse
	if err := s.agent.RPC("CSIPlugin.List", &preq, &plugs); err != nil && !lacksRight(err) {
		return nil, err
	}
	var health pluginHealth
	for _, p := range plugs.Plugins {
		if p.ID == vol.PluginID {
			health = healthOfPlugin(p)
		}
	}
	return s.volumeWithAllocs(vol, health, q)
}

// volumeWithAllocs is volumeToAPI with the plugin's health already read:
// it reads only the stubs of the claiming allocs, and nothing for an
// unclaimed volume.
func (s *HTTPServer) volumeWithAllocs(vol *structs.CSIVolume, health pluginHealth, q structs.QueryOptions) (*api.CSIVolume, error) {
	ids := make([]string, 0, len(vol.Claims))
	for id := range vol.Claims {
		ids = append(ids, id)
	}
	allocs, err := s.allocStubs(ids, q)
	if err != nil {
		return nil, err
	}
	return volumeToAPI(vol, health, allocs), nil
}

// lacksRight reports a follow-up read the token may not make (plugin
// health without plugin read, claiming allocs without read-job): the
// answer goes out without that part, as Nomad's does, rather than failing
// a read the token may make.
func lacksRight(err error) bool { return structs.CodeOf(err) == structs.CodePermissionDenied }

// followUp is the query of the extra reads that complete an answer: the
// same consistency, but never blocking (the first read already waited).
func followUp(q structs.QueryOptions) structs.QueryOptions {
	return structs.QueryOptions{Region: q.Region, Namespace: q.Namespace, AllowStale: q.AllowStale, AuthToken: q.AuthToken}
}

// allocStubs reads the allocs with the given IDs, in any namespace; those
// that no longer exist are left out. Like volumeToAPI it lists by prefix
// rather than get, so a gone alloc never reads as an ambiguous prefix.
func (s *HTTPServer) allocStubs(ids []string, q structs.QueryOptions) (map[string]*structs.AllocListStub, error) {
	out := make(map[string]*structs.AllocListStub, len(ids))
	for _, id := range ids {
		args := structs.GenericRequest{QueryOptions: followUp(q)}
		args.Namespace, args.Prefix = structs.AllNamespaces, id
		var reply structs.AllocListResponse
		if err := s.agent.RPC("Alloc.List", &args, &reply); err != nil && !lacksRight(err) {
			return nil, err
		}
		for _, a := range reply.Allocations {
			if a.ID == id {
				out[id] = a
			}
		}
	}
	return out, nil
}

// pluginHealths reads every plugin's list stub, by ID.
func (s *HTTPServer) pluginHealths(q structs.QueryOptions) (map[string]*structs.CSIPluginListStub, error) {
	args := structs.GenericRequest{QueryOptions: followUp(q)}
	var reply structs.CSIPluginListResponse
	if err := s.agent.RPC("CSIPlugin.List", &args, &reply); err != nil && !lacksRight(err) {
		return nil, err
	}
	out := make(map[string]*structs.CSIPluginListStub, len(reply.Plugins))
	for _, p := range reply.Plugins {
		out[p.ID] = p
	}
	return out, nil
}

// csiVolumeRegister is PUT /v1/volume/csi/:id: register the volumes in
// the body.
func (s *HTTPServer) csiVolumeRegister(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	return s.csiVolumesWrite(w, r, id, "CSIVolume.Register")
}

// csiVolumeCreate is PUT /v1/volume/csi/:id/create: create the volumes in
// the body through their plugins' controllers.
func (s *HTTPServer) csiVolumeCreate(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	return s.csiVolumesWrite(w, r, id, "CSIVolume.Create")
}

// csiVolumesWrite decodes a body of volumes (register's and create's have
// one shape; a lone volume without an ID takes the one in the path), runs
// method, and answers Nomad's {"Volumes": [...], "Warnings": ""} with the
// volumes as stored, which the Terraform provider reads.
func (s *HTTPServer) csiVolumesWrite(w http.ResponseWriter, r *http.Request, id, method string) (any, error) {
	steptrace.Mark(id, steptrace.RegisterReceived)
	body, err := decodeVolumesBody(r)
	if err != nil {
		return nil, err
	}
	if len(body.Volumes) == 0 {
		return nil, CodedError(http.StatusBadRequest, `request body has no volumes: want {"Volumes": [{...}]}`)
	}
	if len(body.Volumes) > structs.MaxItemsPerRequest {
		return nil, CodedError(http.StatusBadRequest, fmt.Sprintf("request body has %d volumes, over the limit of %d per request; send them in batches",
			len(body.Volumes), structs.MaxItemsPerRequest))
	}
	if len(body.Volumes) == 1 && body.Volumes[0] != nil && body.Volumes[0].ID == "" {
		body.Volumes[0].ID = id
	}
	var wr structs.WriteRequest
	parseWrite(r, &wr)
	vols := make([]*structs.CSIVolume, 0, len(body.Volumes))
	for _, v := range body.Volumes {
		vols = append(vols, apiVolumeToStructs(v))
	}
	reg := &structs.CSIVolumeRegisterRequest{Volumes: vols, WriteRequest: wr}
	reg.HandOverVolumes() // built above for this call alone
	var args any = reg
	if method == "CSIVolume.Create" {
		args = &structs.CSIVolumeCreateRequest{Volumes: vols, WriteRequest: wr}
	}
	traced := vols[0] != nil && vols[0].ID == id // the step trace's key
	if traced {
		steptrace.Mark(id, steptrace.RegisterDecoded)
	}
	var reply structs.CSIVolumeRegisterResponse
	if err := s.agent.RPC(method, args, &reply); err != nil {
		return nil, err
	}
	setIndex(w, reply.Index)
	out := api.CSIVolumeRegisterResponse{Volumes: make([]*api.CSIVolume, 0, len(reply.Volumes)), Warnings: reply.Warnings, Outcomes: reply.Outcomes}
	q := structs.QueryOptions{Namespace: wr.Namespace, AuthToken: wr.AuthToken}
	// One read of the plugins for the whole answer: a batch of 1,000
	// volumes made one plugin read per volume, most of its time.
	health, err := s.pluginHealths(q)
	if err != nil {
		return nil, err
	}
	for _, v := range reply.Volumes {
		av, err := s.volumeWithAllocs(v, healthOfPlugin(health[v.PluginID]), q)
		if err != nil {
			return nil, err
		}
		out.Volumes = append(out.Volumes, av)
	}
	if traced {
		steptrace.Mark(id, steptrace.RegisterReplied)
	}
	return (*registerAnswer)(&out), nil
}

// decodeVolumesBody decodes a register or create body with the api
// package's volume decoder (encoding/json's result, ~4x faster on a
// 1,000-volume body). A body it refuses goes through decodeBody, so the
// errors, and what is accepted after the value, are decodeBody's.
func decodeVolumesBody(r *http.Request) (api.CSIVolumeRegisterRequest, error) {
	var body api.CSIVolumeRegisterRequest
	if r.Body == nil {
		return body, decodeBody(r, &body)
	}
	buf, err := bodyBytes(r)
	if err != nil {
		return body, CodedError(http.StatusBadRequest, fmt.Sprintf("reading request body: %v", err))
	}
	if err := api.DecodeCSIVolumeRegisterRequest(buf, &body); err == nil {
		return body, nil
	}
	body = api.CSIVolumeRegisterRequest{}
	r.Body = io.NopCloser(bytes.NewReader(buf))
	return body, decodeBody(r, &body)
}

// csiVolumeDelete is DELETE /v1/volume/csi/:id/delete, with the plugin's
// secrets in the X-Nomad-CSI-Secrets header.
func (s *HTTPServer) csiVolumeDelete(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	args := structs.CSIVolumeDeleteRequest{VolumeID: id}
	parseWrite(r, &args.WriteRequest)
	if h := r.Header.Get(api.CSISecretsHeader); h != "" {
		args.Secrets = structs.CSISecrets(api.DecodeCSISecrets(h))
	}
	var reply structs.GenericResponse
	if err := s.agent.RPC("CSIVolume.Delete", &args, &reply); err != nil {
		return nil, err
	}
	setIndex(w, reply.Index)
	return nil, nil
}

func (s *HTTPServer) csiVolumeDeregister(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	args := structs.CSIVolumeDeregisterRequest{VolumeIDs: []string{id}}
	parseWrite(r, &args.WriteRequest)
	if f := r.URL.Query().Get("force"); f != "" {
		force, err := strconv.ParseBool(f)
		if err != nil {
			return nil, CodedError(http.StatusBadRequest, "invalid force "+strconv.Quote(f)+": want true or false")
		}
		args.Force = force
	}
	var reply structs.GenericResponse
	if err := s.agent.RPC("CSIVolume.Deregister", &args, &reply); err != nil {
		return nil, err
	}
	setIndex(w, reply.Index)
	return nil, nil
}

// csiVolumeDetach is DELETE /v1/volume/csi/:id/detach?node=<id or
// prefix>[&force=true] (force is Berth's: detach from a node that is gone
// without waiting for it).
func (s *HTTPServer) csiVolumeDetach(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	args := structs.CSIVolumeDetachRequest{VolumeID: id, NodeID: r.URL.Query().Get("node")}
	parseWrite(r, &args.WriteRequest)
	if args.NodeID == "" {
		return nil, CodedError(http.StatusBadRequest, "missing node: want ?node=<node ID or prefix>")
	}
	if f := r.URL.Query().Get("force"); f != "" {
		force, err := strconv.ParseBool(f)
		if err != nil {
			return nil, CodedError(http.StatusBadRequest, "invalid force "+strconv.Quote(f)+": want true or false")
		}
		args.Force = force
	}
	var reply structs.GenericResponse
	if err := s.agent.RPC("CSIVolume.Detach", &args, &reply); err != nil {
		return nil, err
	}
	setIndex(w, reply.Index)
	return nil, nil
}

func (s *HTTPServer) csiPluginsRequest(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	if r.URL.Query().Get("type") != api.CSIVolumeTypeCSI {
		return []*api.CSIPluginListStub{}, nil
	}
	var args structs.GenericRequest
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var reply structs.CSIPluginListResponse
	if err := s.agent.RPC("CSIPlugin.List", &args, &reply); err != nil {
		return nil, err
	}
	setMeta(w, &reply.QueryMeta)
	out := make([]*api.CSIPluginListStub, 0, len(reply.Plugins))
	for _, p := range reply.Plugins {
		out = append(out, pluginStubToAPI(p))
	}
	return out, nil
}

func (s *HTTPServer) csiPluginRequest(w http.ResponseWriter, r *http.Request) (any, error) {
	id := trimPath(r, "/v1/plugin/csi/")
	if id == "" || strings.Contains(id, "/") {
		return nil, CodedError(http.StatusNotFound, "no such endpoint: "+r.URL.Path)
	}
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	args := structs.CSIPluginGetRequest{ID: id}
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var reply structs.CSIPluginGetResponse
	if err := s.agent.RPC("CSIPlugin.Get", &args, &reply); err != nil {
		return nil, err
	}
	setMeta(w, &reply.QueryMeta)
	if reply.Plugin == nil {
		return nil, CodedError(http.StatusNotFound, "plugin not found")
	}
	allocs, err := s.allocStubs(pluginAllocIDs(reply.Plugin), args.QueryOptions)
	if err != nil {
		return nil, err
	}
	stubs := make([]*structs.AllocListStub, 0, len(allocs))
	for _, id := range pluginAllocIDs(reply.Plugin) {
		if a := allocs[id]; a != nil {
			stubs = append(stubs, a)
		}
	}
	return pluginToAPI(reply.Plugin, stubs), nil
}
