package agent

import (
	"net/http"

	"github.com/berth-io/berth/nomad/structs"
)

// raftServer is one peer in Nomad's /v1/operator/raft/configuration shape.
type raftServer struct {
	ID           string
	Node         string
	Address      string
	Leader       bool
	Voter        bool
	RaftProtocol string
}

type raftConfiguration struct {
	Servers []*raftServer
	Index   uint64
}

func (s *HTTPServer) operatorRaftConfiguration(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	var args structs.GenericRequest
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var reply structs.RaftConfigurationResponse
	if err := s.agent.RPC("Operator.RaftGetConfiguration", &args, &reply); err != nil {
		return nil, err
	}
	out := raftConfiguration{Index: reply.Index, Servers: []*raftServer{}}
	for _, p := range reply.Servers {
		out.Servers = append(out.Servers, &raftServer{
			ID: p.ID, Node: p.NodeName, Address: p.Address, Leader: p.Leader, Voter: p.Voter, RaftProtocol: "3",
		})
	}
	return out, nil
}

// operatorRaftPeer removes (DELETE ?id= or ?address=) or adds (PUT
// ?address=[&id=]) a Raft peer.
func (s *HTTPServer) operatorRaftPeer(w http.ResponseWriter, r *http.Request) (any, error) {
	args := structs.RaftPeerRequest{ID: r.URL.Query().Get("id"), Address: r.URL.Query().Get("address")}
	args.AuthToken = authToken(r)
	var reply structs.GenericResponse
	switch r.Method {
	case http.MethodDelete:
		if args.ID == "" && args.Address == "" {
			return nil, CodedError(http.StatusBadRequest, "must specify ?id= or ?address= of the peer to remove")
		}
		if err := s.agent.RPC("Operator.RaftRemovePeer", &args, &reply); err != nil {
			return nil, err
		}
	case http.MethodPut, http.MethodPost:
		if args.Address == "" {
			return nil, CodedError(http.StatusBadRequest, "must specify ?address= of the peer to add")
		}
		if err := s.agent.RPC("Operator.RaftAddPeer", &args, &reply); err != nil {
			return nil, err
		}
	default:
		return nil, methodNotAllowed(r)
	}
	setIndex(w, reply.Index)
	return nil, nil
}
