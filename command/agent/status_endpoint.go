package agent

import (
	"net/http"

	"github.com/berth-io/berth/nomad/structs"
)

func (s *HTTPServer) statusLeader(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	var args structs.GenericRequest
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var reply structs.LeaderResponse
	if err := s.agent.RPC("Status.Leader", &args, &reply); err != nil {
		return nil, err
	}
	return reply.Leader, nil
}

func (s *HTTPServer) statusPeers(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	var args structs.GenericRequest
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var reply structs.PeersResponse
	if err := s.agent.RPC("Status.Peers", &args, &reply); err != nil {
		return nil, err
	}
	return reply.Peers, nil
}

// healthResponse is Nomad's /v1/agent/health shape.
type healthResponse struct {
	Client *healthResponseAgent `json:"client,omitempty"`
	Server *healthResponseAgent `json:"server,omitempty"`
}

type healthResponseAgent struct {
	Ok      bool   `json:"ok"`
	Message string `json:"message"`
}

// agentHealth answers 200 when the server has a leader, 500 otherwise.
func (s *HTTPServer) agentHealth(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	var resp healthResponse
	if srv := s.agent.Server(); srv != nil {
		if srv.Leader() == "" {
			resp.Server = &healthResponseAgent{Ok: false, Message: "no known leader"}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			return resp, nil
		}
		resp.Server = &healthResponseAgent{Ok: true, Message: "ok"}
	}
	return resp, nil
}
