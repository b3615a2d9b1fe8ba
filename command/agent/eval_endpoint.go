package agent

import (
	"net/http"
	"strings"

	"github.com/berth-io/berth/nomad/structs"
)

func (s *HTTPServer) evalsRequest(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	var args structs.GenericRequest
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var reply structs.EvalListResponse
	if err := s.agent.RPC("Eval.List", &args, &reply); err != nil {
		return nil, err
	}
	setMeta(w, &reply.QueryMeta)
	return evalsToAPI(reply.Evaluations), nil
}

func (s *HTTPServer) evalRequest(w http.ResponseWriter, r *http.Request) (any, error) {
	id := trimPath(r, "/v1/evaluation/")
	if e, ok := strings.CutSuffix(id, "/allocations"); ok && e != "" && !strings.Contains(e, "/") {
		return s.evalAllocations(w, r, e)
	}
	if id == "" || strings.Contains(id, "/") {
		return nil, CodedError(http.StatusNotFound, "no such endpoint: "+r.URL.Path)
	}
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	args := structs.EvalSpecificRequest{EvalID: id}
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var reply structs.SingleEvalResponse
	if err := s.agent.RPC("Eval.GetEval", &args, &reply); err != nil {
		return nil, err
	}
	setMeta(w, &reply.QueryMeta)
	if reply.Eval == nil {
		return nil, CodedError(http.StatusNotFound, "eval not found")
	}
	return evalToAPI(reply.Eval), nil
}
