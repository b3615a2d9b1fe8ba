package agent

import (
	"net/http"

	"github.com/berth-io/berth/nomad/structs"
)

// Alloc lifecycle routes, as Nomad's:
//
//	PUT|POST /v1/allocation/:id/stop              stop; the scheduler replaces it
//	PUT|POST /v1/client/allocation/:id/restart    {"TaskName", "AllTasks"}
//	PUT|POST /v1/client/allocation/:id/signal     {"Task", "Signal"}
//
// Every one goes to the servers (Alloc.Stop, Alloc.Restart, Alloc.Signal),
// which check alloc-lifecycle in the alloc's namespace; restart and
// signal then reach the alloc's client over its node session, so any
// server agent serves them, whichever node runs the alloc. The ID is
// exact: the CLI resolves prefixes.

type allocStopReply struct {
	EvalID string
	Index  uint64
}

func isWriteMethod(r *http.Request) bool {
	return r.Method == http.MethodPut || r.Method == http.MethodPost
}

func (s *HTTPServer) allocStop(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	if !isWriteMethod(r) {
		return nil, methodNotAllowed(r)
	}
	args := structs.AllocStopRequest{AllocID: id}
	parseWrite(r, &args.WriteRequest)
	var reply structs.AllocStopResponse
	if err := s.agent.RPC(structs.MethodAllocStop, &args, &reply); err != nil {
		return nil, err
	}
	setIndex(w, reply.Index)
	return &allocStopReply{EvalID: reply.EvalID, Index: reply.Index}, nil
}

func (s *HTTPServer) allocRestart(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	if !isWriteMethod(r) {
		return nil, methodNotAllowed(r)
	}
	var body struct {
		TaskName string
		AllTasks bool
	}
	if err := decodeOptionalBody(r, &body); err != nil {
		return nil, err
	}
	args := structs.AllocRestartRequest{AllocID: id, TaskName: body.TaskName, AllTasks: body.AllTasks}
	parseWrite(r, &args.WriteRequest)
	var reply structs.GenericResponse
	if err := s.agent.RPC(structs.MethodAllocRestart, &args, &reply); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

func (s *HTTPServer) allocSignal(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	if !isWriteMethod(r) {
		return nil, methodNotAllowed(r)
	}
	var body struct {
		Task   string
		Signal string
	}
	if err := decodeOptionalBody(r, &body); err != nil {
		return nil, err
	}
	args := structs.AllocSignalRequest{AllocID: id, Task: body.Task, Signal: body.Signal}
	parseWrite(r, &args.WriteRequest)
	var reply structs.GenericResponse
	if err := s.agent.RPC(structs.MethodAllocSignal, &args, &reply); err != nil {
		return nil, err
	}
	return struct{ Index uint64 }{}, nil
}
