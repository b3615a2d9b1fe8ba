package agent

import (
	"net/http"

	"github.com/berth-io/berth/nomad/structs"
)

// systemGC is PUT /v1/system/gc: the servers' garbage collection, now.
// Nomad answers with an empty 200; so does Berth.
func (s *HTTPServer) systemGC(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method != http.MethodPut && r.Method != http.MethodPost {
		return nil, methodNotAllowed(r)
	}
	var args structs.GenericRequest
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var reply structs.GenericResponse
	if err := s.agent.RPC("System.GarbageCollect", &args, &reply); err != nil {
		return nil, err
	}
	setIndex(w, reply.Index)
	return nil, nil
}
