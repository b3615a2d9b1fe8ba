package agent

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/nomad/structs"
)

// Node routes, as Nomad's:
//
//	GET      /v1/nodes                    list (prefix)
//	GET      /v1/node/:id                 read (ID or unique prefix)
//	GET      /v1/node/:id/allocations     the allocs placed on it
//	PUT|POST /v1/node/:id/drain           {"DrainSpec": {...}|null, "MarkEligible": bool}
//	PUT|POST /v1/node/:id/eligibility     {"Eligibility": "eligible"|"ineligible"}

func (s *HTTPServer) nodesRequest(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	var args structs.GenericRequest
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var reply structs.NodeListResponse
	if err := s.agent.RPC("Node.List", &args, &reply); err != nil {
		return nil, err
	}
	setMeta(w, &reply.QueryMeta)
	out := make([]*api.NodeListStub, 0, len(reply.Nodes))
	for _, n := range reply.Nodes {
		out = append(out, nodeStubToAPI(n))
	}
	return out, nil
}

func (s *HTTPServer) nodeRequest(w http.ResponseWriter, r *http.Request) (any, error) {
	rest := trimPath(r, "/v1/node/")
	id, action, _ := strings.Cut(rest, "/")
	if id == "" {
		return nil, CodedError(http.StatusNotFound, "no such endpoint: "+r.URL.Path)
	}
	switch action {
	case "":
		if r.Method != http.MethodGet {
			return nil, methodNotAllowed(r)
		}
		return s.nodeGet(w, r, id)
	case "allocations":
		if r.Method != http.MethodGet {
			return nil, methodNotAllowed(r)
		}
		return s.nodeAllocations(w, r, id)
	case "drain":
		if r.Method != http.MethodPut && r.Method != http.MethodPost {
			return nil, methodNotAllowed(r)
		}
		return s.nodeDrain(w, r, id)
	case "eligibility":
		if r.Method != http.MethodPut && r.Method != http.MethodPost {
			return nil, methodNotAllowed(r)
		}
		return s.nodeEligibility(w, r, id)
	}
	return nil, CodedError(http.StatusNotFound, "no such endpoint: "+r.URL.Path)
}

// nodeGet reads a node by ID, or by a unique ID prefix.
func (s *HTTPServer) nodeGet(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	args := structs.NodeSpecificRequest{NodeID: id}
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var reply structs.SingleNodeResponse
	if err := s.agent.RPC("Node.GetNode", &args, &reply); err != nil {
		return nil, err
	}
	if reply.Node == nil {
		full, err := s.resolveNodePrefix(id, args.QueryOptions)
		if err != nil {
			return nil, err
		}
		if full != "" {
			// The first read already waited; this one must not.
			args.NodeID, args.MinQueryIndex = full, 0
			if err := s.agent.RPC("Node.GetNode", &args, &reply); err != nil {
				return nil, err
			}
		}
	}
	setMeta(w, &reply.QueryMeta)
	if reply.Node == nil {
		return nil, CodedError(http.StatusNotFound, "node not found")
	}
	return nodeToAPI(reply.Node), nil
}

// resolveNodePrefix returns the ID of the one node whose ID starts with
// prefix, "" when none does, and a 400 listing them when several do.
func (s *HTTPServer) resolveNodePrefix(prefix string, q structs.QueryOptions) (string, error) {
	args := structs.GenericRequest{QueryOptions: followUp(q)}
	args.Prefix = prefix
	var reply structs.NodeListResponse
	if err := s.agent.RPC("Node.List", &args, &reply); err != nil {
		return "", err
	}
	switch len(reply.Nodes) {
	case 0:
		return "", nil
	case 1:
		return reply.Nodes[0].ID, nil
	}
	ids := make([]string, 0, len(reply.Nodes))
	for _, n := range reply.Nodes {
		ids = append(ids, n.ID)
	}
	return "", CodedError(http.StatusBadRequest, fmt.Sprintf(
		"node ID prefix %q is ambiguous: it matches %d nodes (%s); give more of the ID", prefix, len(ids), strings.Join(ids, ", ")))
}

// nodeAllocations lists a node's allocs in full, with their jobs, as
// Nomad's does: its CLI reads Job.Type of each.
func (s *HTTPServer) nodeAllocations(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	args := structs.NodeSpecificRequest{NodeID: id}
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var reply structs.NodeAllocsResponse
	if err := s.agent.RPC(structs.MethodNodeGetAllocs, &args, &reply); err != nil {
		return nil, err
	}
	setMeta(w, &reply.QueryMeta)
	out := make([]*api.Allocation, 0, len(reply.Allocs))
	for _, a := range reply.Allocs {
		out = append(out, allocToAPI(a, s.agent.config.Region))
	}
	return out, nil
}

func (s *HTTPServer) nodeDrain(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	var body api.NodeUpdateDrainRequest
	if err := decodeBody(r, &body); err != nil {
		return nil, err
	}
	args := structs.NodeUpdateDrainRequest{NodeID: id, MarkEligible: body.MarkEligible}
	parseWrite(r, &args.WriteRequest)
	if d := body.DrainSpec; d != nil {
		args.DrainStrategy = &structs.DrainStrategy{Deadline: d.Deadline, IgnoreSystemJobs: d.IgnoreSystemJobs}
	}
	var reply structs.NodeUpdateResponse
	if err := s.agent.RPC("Node.UpdateDrain", &args, &reply); err != nil {
		return nil, err
	}
	setIndex(w, reply.Index)
	return nodeUpdateReply(reply), nil
}

func (s *HTTPServer) nodeEligibility(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	var body api.NodeUpdateEligibilityRequest
	if err := decodeBody(r, &body); err != nil {
		return nil, err
	}
	args := structs.NodeUpdateEligibilityRequest{NodeID: id, Eligibility: body.Eligibility}
	parseWrite(r, &args.WriteRequest)
	var reply structs.NodeUpdateResponse
	if err := s.agent.RPC("Node.UpdateEligibility", &args, &reply); err != nil {
		return nil, err
	}
	setIndex(w, reply.Index)
	return nodeUpdateReply(reply), nil
}

// nodeUpdateReply is Nomad's reply to drain and eligibility updates.
func nodeUpdateReply(reply structs.NodeUpdateResponse) *api.NodeDrainUpdateResponse {
	out := &api.NodeDrainUpdateResponse{NodeModifyIndex: reply.Index, EvalIDs: reply.EvalIDs}
	if len(reply.EvalIDs) > 0 {
		out.EvalCreateIndex = reply.Index
	}
	if out.EvalIDs == nil {
		out.EvalIDs = []string{}
	}
	return out
}
