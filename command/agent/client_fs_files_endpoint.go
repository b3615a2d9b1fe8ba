package agent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/berth-io/berth/client"
	"github.com/berth-io/berth/nomad/structs"
)

// alloc fs routes, as Nomad's, served by the agent whose client runs the
// alloc (see client/alloc_fs.go for how paths stay inside the alloc dir):
//
//	GET /v1/client/fs/ls/:alloc_id?path=/          [AllocFileInfo], by name
//	GET /v1/client/fs/stat/:alloc_id?path=<p>      AllocFileInfo
//	GET /v1/client/fs/cat/:alloc_id?path=<p>       the file's bytes
//	GET /v1/client/fs/readat/:alloc_id?path=<p>&offset=N&limit=M
//
// Authorization: read-fs in the alloc's namespace. A server agent whose
// client does not run the alloc (or that runs no client) asks the servers
// (Alloc.FS), which read through the alloc's client over its node
// session: the upstream client sends ls and stat to the agent it is
// configured with, not to the node's.

func (s *HTTPServer) clientFSRequest(w http.ResponseWriter, r *http.Request) (any, error) {
	op, id, ok := strings.Cut(trimPath(r, "/v1/client/fs/"), "/")
	if !ok || id == "" || strings.Contains(id, "/") {
		return nil, CodedError(http.StatusNotFound, "no such endpoint: "+r.URL.Path)
	}
	switch op {
	case "ls", "stat", "cat", "readat":
	default:
		return nil, CodedError(http.StatusNotFound, "no such endpoint: "+r.URL.Path)
	}
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	c := s.agent.client
	if (c == nil || !slices.Contains(c.AllocIDs(), resolveLocalAlloc(c.AllocIDs(), id))) && s.agent.server != nil {
		return s.clientFSRemote(w, r, op, id)
	}
	if c == nil {
		return nil, CodedError(http.StatusBadRequest, fmt.Sprintf("this agent runs no client; %s", s.whereIsAlloc(r, id)))
	}
	allocID := resolveLocalAlloc(c.AllocIDs(), id)
	args := structs.ACLAuthorizeRequest{Endpoint: structs.HTTPClientFS, AllocID: allocID, QueryOptions: structs.QueryOptions{AuthToken: authToken(r)}}
	var reply structs.ACLAuthorizeResponse
	if err := s.agent.authRPC(structs.MethodACLAuthorize, &args, &reply); err != nil {
		return nil, err
	}
	q := r.URL.Query()
	p := q.Get("path")
	if p == "" {
		p = "/"
	}
	fsErr := func(err error) error { return allocFSError(err, id, c.NodeID(), s.whereIsAlloc(r, id)) }
	switch op {
	case "ls":
		out, err := c.AllocFSList(allocID, p)
		if err != nil {
			return nil, fsErr(err)
		}
		return out, nil
	case "stat":
		out, err := c.AllocFSStat(allocID, p)
		if err != nil {
			return nil, fsErr(err)
		}
		return out, nil
	}
	var offset, limit int64 = 0, -1
	if op == "readat" {
		var err error
		if offset, err = nonNegative(q.Get("offset"), "offset", 0); err != nil {
			return nil, err
		}
		if limit, err = nonNegative(q.Get("limit"), "limit", -1); err != nil {
			return nil, err
		}
	}
	f, err := c.AllocFSOpen(allocID, p)
	if err != nil {
		return nil, fsErr(err)
	}
	defer f.Close()
	var rd io.Reader = f
	if offset > 0 {
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			return nil, err
		}
	}
	if limit >= 0 {
		rd = io.LimitReader(f, limit)
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, rd); err != nil {
		s.logger.Warn("alloc fs: sending a file failed", "alloc_id", allocID, "path", p, "error", err)
	}
	return nil, nil
}

func nonNegative(v, name string, def int64) (int64, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, CodedError(http.StatusBadRequest, fmt.Sprintf("invalid %s %q: want a non-negative integer", name, v))
	}
	return n, nil
}

// allocFSError maps a client alloc fs failure to an HTTP error.
func allocFSError(err error, id, nodeID, where string) error {
	switch {
	case errors.Is(err, client.ErrUnknownAlloc):
		return CodedError(http.StatusBadRequest, fmt.Sprintf("alloc %s is not on this client (node %s); %s", id, nodeID, where))
	case errors.Is(err, client.ErrPathEscapes), errors.Is(err, client.ErrNotRegular):
		return CodedError(http.StatusBadRequest, err.Error())
	case errors.Is(err, fs.ErrNotExist):
		return CodedError(http.StatusNotFound, err.Error())
	}
	return err
}

// clientFSRemote serves alloc fs through the servers and the alloc's
// client (the alloc ID must be exact).
func (s *HTTPServer) clientFSRemote(w http.ResponseWriter, r *http.Request, op, id string) (any, error) {
	args := structs.AllocFSRequest{AllocID: id}
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	q := r.URL.Query()
	args.Path = q.Get("path")
	if args.Path == "" {
		args.Path = "/"
	}
	var reply structs.AllocFSResponse
	switch op {
	case "ls", "stat":
		args.Op = map[string]string{"ls": structs.AllocFSList, "stat": structs.AllocFSStat}[op]
		if err := s.agent.RPC(structs.MethodAllocFS, &args, &reply); err != nil {
			return nil, err
		}
		if op == "ls" {
			if reply.Files == nil {
				reply.Files = []*structs.AllocFileInfo{}
			}
			return reply.Files, nil
		}
		return reply.File, nil
	}
	var offset, limit int64 = 0, -1
	if op == "readat" {
		var err error
		if offset, err = nonNegative(q.Get("offset"), "offset", 0); err != nil {
			return nil, err
		}
		if limit, err = nonNegative(q.Get("limit"), "limit", -1); err != nil {
			return nil, err
		}
	}
	args.Op = structs.AllocFSRead
	started := false
	for limit != 0 {
		args.Offset, args.Limit = offset, structs.MaxAllocFSRead
		if limit > 0 && limit < args.Limit {
			args.Limit = limit
		}
		reply = structs.AllocFSResponse{}
		if err := s.agent.RPC(structs.MethodAllocFS, &args, &reply); err != nil {
			if !started {
				return nil, err
			}
			s.logger.Warn("alloc fs: reading a file through the servers failed", "alloc_id", id, "path", args.Path, "error", err)
			return nil, nil // the caller sees a cut-short body
		}
		if !started {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		if _, err := w.Write(reply.Data); err != nil {
			return nil, nil
		}
		offset += int64(len(reply.Data))
		if limit > 0 {
			limit -= int64(len(reply.Data))
		}
		if reply.EOF || len(reply.Data) == 0 {
			break
		}
	}
	if !started {
		w.WriteHeader(http.StatusOK)
	}
	return nil, nil
}
