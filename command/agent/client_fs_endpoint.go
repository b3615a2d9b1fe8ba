package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/berth-io/berth/client"
	"github.com/berth-io/berth/client/logs"
	"github.com/berth-io/berth/nomad/structs"
)

// Client file system routes, served by the agent whose client runs the
// alloc (as Nomad's):
//
//	GET /v1/client/fs/logs/:alloc_id?task=<name>&type=stdout|stderr
//	    &origin=start|end&offset=N&plain=true
//
// The logs are read across the task's rotated files, oldest first. With
// plain=true the body is the raw bytes; otherwise it is a sequence of JSON
// frames {"File", "Offset", "Data" (base64)} as Nomad's stream frames.
// follow is not supported yet: the answer ends at the current end.

// clientFSLogs serves /v1/client/fs/logs/.
func (s *HTTPServer) clientFSLogs(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	req, err := parseLogsRequest(r)
	if err != nil {
		return nil, err
	}
	if s.agent.client == nil {
		return nil, CodedError(http.StatusBadRequest, fmt.Sprintf("this agent runs no client; %s", s.whereIsAlloc(r, req.allocID)))
	}
	if err := s.authorizeLogs(r, s.agent.client, req.allocID); err != nil {
		return nil, err
	}
	return nil, s.serveAllocLogs(w, r, s.agent.client, req)
}

// authorizeLogs needs read-logs in the namespace of the alloc (looked up
// by the servers, so the caller cannot name a namespace it holds rights
// in for an alloc of another).
func (s *HTTPServer) authorizeLogs(r *http.Request, src logSource, id string) error {
	full := id
	if m := resolveLocalAlloc(src.AllocIDs(), id); m != "" {
		full = m
	}
	args := structs.ACLAuthorizeRequest{Endpoint: structs.HTTPClientLogs, AllocID: full, QueryOptions: structs.QueryOptions{AuthToken: authToken(r)}}
	var reply structs.ACLAuthorizeResponse
	return s.agent.authRPC(structs.MethodACLAuthorize, &args, &reply)
}

// logSource is what serving logs needs from the client.
type logSource interface {
	AllocLogs(allocID, task, logType string) (*logs.Reader, error)
	AllocIDs() []string
	NodeID() string
}

// logsRequest is a parsed logs request.
type logsRequest struct {
	allocID, task, logType string
	fromEnd                bool
	offset                 int64
	plain                  bool
}

func parseLogsRequest(r *http.Request) (*logsRequest, error) {
	q := r.URL.Query()
	req := &logsRequest{
		allocID: strings.TrimPrefix(r.URL.Path, "/v1/client/fs/logs/"),
		task:    q.Get("task"),
		logType: q.Get("type"),
		plain:   q.Get("plain") == "true",
	}
	if req.allocID == "" || strings.Contains(req.allocID, "/") {
		return nil, CodedError(http.StatusBadRequest, "missing alloc ID: use /v1/client/fs/logs/<alloc_id>")
	}
	if req.task == "" {
		return nil, CodedError(http.StatusBadRequest, "missing task name: add ?task=<name>")
	}
	if !logs.ValidStream(req.logType) {
		return nil, CodedError(http.StatusBadRequest, fmt.Sprintf("invalid log type %q: want type=stdout or type=stderr", req.logType))
	}
	switch o := q.Get("origin"); o {
	case "", "start":
	case "end":
		req.fromEnd = true
	default:
		return nil, CodedError(http.StatusBadRequest, fmt.Sprintf("invalid origin %q: want start or end", o))
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, CodedError(http.StatusBadRequest, fmt.Sprintf("invalid offset %q: want a non-negative integer", v))
		}
		req.offset = n
	}
	return req, nil
}

// serveAllocLogs writes the logs; errors are returned before anything is
// written.
func (s *HTTPServer) serveAllocLogs(w http.ResponseWriter, r *http.Request, src logSource, req *logsRequest) error {
	allocID := resolveLocalAlloc(src.AllocIDs(), req.allocID)
	rd, err := src.AllocLogs(allocID, req.task, req.logType)
	switch {
	case errors.Is(err, client.ErrUnknownAlloc):
		return CodedError(http.StatusBadRequest, fmt.Sprintf("alloc %s is not on this client (node %s); %s", req.allocID, src.NodeID(), s.whereIsAlloc(r, req.allocID)))
	case errors.Is(err, client.ErrUnknownTask):
		return CodedError(http.StatusBadRequest, fmt.Sprintf("alloc %s has no task %q", allocID, req.task))
	case err != nil:
		return err
	}
	defer rd.Close()
	if req.fromEnd {
		_, err = rd.Seek(-req.offset, io.SeekEnd)
	} else {
		_, err = rd.Seek(req.offset, io.SeekStart)
	}
	if err != nil {
		return err
	}
	if req.plain {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, err := io.Copy(w, rd)
		return s.logCopyErr(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	file := "alloc/logs/" + logs.Base(req.task, req.logType) + ".0"
	buf := make([]byte, 64<<10)
	for {
		off, _ := rd.Seek(0, io.SeekCurrent)
		n, err := rd.Read(buf)
		if n > 0 {
			if err := enc.Encode(logFrame{File: file, Offset: off + int64(n), Data: buf[:n]}); err != nil {
				return s.logCopyErr(err)
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return s.logCopyErr(err)
		}
	}
}

// logFrame is Nomad's stream frame: Offset is where the data ends.
type logFrame struct {
	Offset int64
	Data   []byte
	File   string
}

// logCopyErr logs an error that happened after the status was written
// (the client sees a cut-short body); nothing more can be sent.
func (s *HTTPServer) logCopyErr(err error) error {
	if err != nil {
		s.logger.Warn("sending task logs failed", "error", err)
	}
	return nil
}

// resolveLocalAlloc expands a unique ID prefix among the local allocs.
func resolveLocalAlloc(local []string, id string) string {
	match := ""
	for _, l := range local {
		if l == id {
			return id
		}
		if strings.HasPrefix(l, id) {
			if match != "" {
				return id // ambiguous: let the lookup fail
			}
			match = l
		}
	}
	if match == "" {
		return id
	}
	return match
}

// whereIsAlloc tells the operator which node runs the alloc, when this
// agent's server knows.
func (s *HTTPServer) whereIsAlloc(r *http.Request, allocID string) string {
	if s.agent.server == nil {
		return "ask the agent of the node that runs it (berth alloc status shows the node)"
	}
	var reply structs.SingleAllocResponse
	args := structs.AllocSpecificRequest{AllocID: allocID, QueryOptions: structs.QueryOptions{AuthToken: authToken(r)}}
	if err := s.agent.RPC("Alloc.GetAlloc", &args, &reply); err != nil || reply.Alloc == nil {
		return "no alloc with that ID is known to the servers"
	}
	a := reply.Alloc
	where := fmt.Sprintf("it runs on node %s (%s)", a.NodeName, a.NodeID)
	var nreply structs.SingleNodeResponse
	nargs := structs.NodeSpecificRequest{NodeID: a.NodeID, QueryOptions: structs.QueryOptions{AuthToken: authToken(r)}}
	if err := s.agent.RPC("Node.GetNode", &nargs, &nreply); err == nil && nreply.Node != nil && nreply.Node.HTTPAddr != "" {
		where += fmt.Sprintf(": ask that node's agent at http://%s", nreply.Node.HTTPAddr)
	}
	return where
}
