package agent

import (
	"maps"
	"net/http"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/nomad/structs"
)

// Volume snapshot routes, as Nomad's (secrets in X-Nomad-CSI-Secrets):
//
//	PUT    /v1/volumes/snapshot {"Snapshots": [{SourceVolumeID, Name, PluginID?, Parameters}]}
//	GET    /v1/volumes/snapshot?plugin_id=[&per_page=][&next_token=]
//	DELETE /v1/volumes/snapshot?plugin_id=&snapshot_id=
func (s *HTTPServer) csiSnapshotsRequest(w http.ResponseWriter, r *http.Request) (any, error) {
	var secrets structs.CSISecrets
	if h := r.Header.Get(api.CSISecretsHeader); h != "" {
		secrets = structs.CSISecrets(api.DecodeCSISecrets(h))
	}
	switch r.Method {
	case http.MethodPut, http.MethodPost:
		var in api.CSISnapshotCreateRequest
		if err := decodeBody(r, &in); err != nil {
			return nil, err
		}
		args := structs.CSISnapshotCreateRequest{}
		parseWrite(r, &args.WriteRequest)
		for _, sn := range in.Snapshots {
			if sn == nil {
				return nil, CodedError(http.StatusBadRequest, "a snapshot in the request is empty")
			}
			sec := maps.Clone(structs.CSISecrets(sn.Secrets))
			if sec == nil {
				sec = structs.CSISecrets{}
			}
			maps.Copy(sec, secrets)
			args.Snapshots = append(args.Snapshots, &structs.CSISnapshot{
				SourceVolumeID: sn.SourceVolumeID, PluginID: sn.PluginID, Name: sn.Name,
				Secrets: sec, Parameters: maps.Clone(sn.Parameters),
			})
		}
		var reply structs.CSISnapshotCreateResponse
		if err := s.agent.RPC(structs.MethodCSIVolumeCreateSnapshot, &args, &reply); err != nil {
			return nil, err
		}
		setIndex(w, reply.Index)
		return &api.CSISnapshotCreateResponse{Snapshots: snapshotsToAPI(reply.Snapshots)}, nil
	case http.MethodGet:
		args := structs.CSISnapshotListRequest{PluginID: r.URL.Query().Get("plugin_id"), Secrets: secrets}
		if err := parseQuery(r, &args.QueryOptions); err != nil {
			return nil, err
		}
		var reply structs.CSISnapshotListResponse
		if err := s.agent.RPC(structs.MethodCSIVolumeListSnapshots, &args, &reply); err != nil {
			return nil, err
		}
		setMeta(w, &reply.QueryMeta)
		return &api.CSISnapshotListResponse{Snapshots: snapshotsToAPI(reply.Snapshots), NextToken: reply.NextToken}, nil
	case http.MethodDelete:
		q := r.URL.Query()
		args := structs.CSISnapshotDeleteRequest{Snapshots: []*structs.CSISnapshot{{
			ID: q.Get("snapshot_id"), PluginID: q.Get("plugin_id"), Secrets: secrets,
		}}}
		parseWrite(r, &args.WriteRequest)
		var reply structs.GenericResponse
		if err := s.agent.RPC(structs.MethodCSIVolumeDeleteSnapshot, &args, &reply); err != nil {
			return nil, err
		}
		setIndex(w, reply.Index)
		return nil, nil
	}
	return nil, methodNotAllowed(r)
}

func snapshotsToAPI(in []*structs.CSISnapshot) []*api.CSISnapshot {
	out := make([]*api.CSISnapshot, 0, len(in))
	for _, s := range in {
		out = append(out, &api.CSISnapshot{
			ID: s.ID, ExternalSourceVolumeID: s.ExternalSourceVolumeID, SourceVolumeID: s.SourceVolumeID,
			PluginID: s.PluginID, SizeBytes: s.SizeBytes, CreateTime: s.CreateTime, IsReady: s.IsReady, Name: s.Name,
		})
	}
	return out
}
