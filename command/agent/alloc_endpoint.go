package agent

import (
	"net/http"
	"strings"

	"github.com/berth-io/berth/nomad/structs"
)

// Allocation and evaluation routes, as Nomad's:
//
//	GET /v1/allocations        list (prefix, namespace, paging, filter)
//	GET /v1/allocation/:id     read (exact ID)
//	PUT /v1/allocation/:id/stop (alloc_lifecycle_endpoint.go)
//	GET /v1/evaluations        list
//	GET /v1/evaluation/:id     read

func (s *HTTPServer) allocsRequest(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	var args structs.GenericRequest
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var reply structs.AllocListResponse
	if err := s.agent.RPC("Alloc.List", &args, &reply); err != nil {
		return nil, err
	}
	setMeta(w, &reply.QueryMeta)
	return allocStubsToAPI(reply.Allocations), nil
}

func (s *HTTPServer) allocRequest(w http.ResponseWriter, r *http.Request) (any, error) {
	id := trimPath(r, "/v1/allocation/")
	if stopID, ok := strings.CutSuffix(id, "/stop"); ok && stopID != "" && !strings.Contains(stopID, "/") {
		return s.allocStop(w, r, stopID)
	}
	if id == "" || strings.Contains(id, "/") {
		return nil, CodedError(http.StatusNotFound, "no such endpoint: "+r.URL.Path)
	}
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	args := structs.AllocSpecificRequest{AllocID: id}
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var reply structs.SingleAllocResponse
	if err := s.agent.RPC("Alloc.GetAlloc", &args, &reply); err != nil {
		return nil, err
	}
	setMeta(w, &reply.QueryMeta)
	if reply.Alloc == nil {
		return nil, CodedError(http.StatusNotFound, "alloc not found")
	}
	return allocToAPI(reply.Alloc, s.agent.config.Region), nil
}
