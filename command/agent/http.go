package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/command/agent/ui"
	"github.com/berth-io/berth/nomad/structs"
)

// HTTPServer serves Berth's HTTP API, wire-compatible with Nomad's for the
// endpoints it implements: PascalCase JSON, plain-text errors with exact
// status codes, X-Nomad-* headers for blocking queries.
type HTTPServer struct {
	agent  *Agent
	logger hclog.Logger
	ln     net.Listener
	srv    *http.Server
	mux    *http.ServeMux
	done   chan struct{}
	// maxBody and bodyTimeout bound reading a request body (limits.go).
	maxBody     int64
	bodyTimeout time.Duration
}

// NewHTTPServer listens on addr and serves until Shutdown.
func NewHTTPServer(a *Agent, addr string, logger hclog.Logger) (*HTTPServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("http: listening on %s: %w", addr, err)
	}
	if tc := a.httpTLS(); tc != nil {
		// HTTPS (tls.http); plain HTTP on this port gets a 400.
		ln = tls.NewListener(ln, tc)
	}
	s := &HTTPServer{agent: a, logger: logger.Named("http"), ln: ln, mux: http.NewServeMux(), done: make(chan struct{}),
		maxBody: DefaultHTTPMaxBodyBytes, bodyTimeout: httpBodyReadTimeout}
	if a != nil && a.config != nil {
		s.maxBody = a.config.httpMaxBody()
	}
	s.registerHandlers()
	// No ReadTimeout: limits.go says why; readBody bounds bodies instead.
	s.srv = &http.Server{Handler: s.mux, ReadHeaderTimeout: httpReadHeaderTimeout,
		WriteTimeout: httpWriteTimeout, IdleTimeout: httpIdleTimeout}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("http server stopped", "error", err)
		}
	}()
	s.logger.Info("http api listening", "addr", ln.Addr().String())
	return s, nil
}

// Addr is the listening address.
func (s *HTTPServer) Addr() string { return s.ln.Addr().String() }

// Shutdown stops accepting and waits for in-flight requests (blocking
// queries are cut short by the context).
func (s *HTTPServer) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = s.srv.Close()
	}
	<-s.done
	return err
}

func (s *HTTPServer) registerHandlers() {
	s.mux.HandleFunc("/v1/status/leader", s.wrap(s.statusLeader))
	s.mux.HandleFunc("/v1/status/peers", s.wrap(s.statusPeers))
	s.mux.HandleFunc("/v1/agent/health", s.wrap(s.agentHealth))
	s.mux.HandleFunc("/v1/operator/raft/configuration", s.wrap(s.operatorRaftConfiguration))
	s.mux.HandleFunc("/v1/operator/raft/peer", s.wrap(s.operatorRaftPeer))
	s.mux.HandleFunc("/v1/jobs", s.wrap(s.jobsRequest))
	s.mux.HandleFunc("/v1/jobs/parse", s.wrap(s.jobsParse))
	s.mux.HandleFunc("/v1/agent/members", s.wrap(s.agentMembers))
	s.mux.HandleFunc("/v1/search", s.wrap(s.search))
	s.mux.HandleFunc("/v1/search/fuzzy", s.wrap(s.fuzzySearch))
	s.mux.HandleFunc("/v1/job/", s.wrap(s.jobRequest))
	s.mux.HandleFunc("/v1/allocations", s.wrap(s.allocsRequest))
	s.mux.HandleFunc("/v1/allocation/", s.wrap(s.allocRequest))
	s.mux.HandleFunc("/v1/evaluations", s.wrap(s.evalsRequest))
	s.mux.HandleFunc("/v1/evaluation/", s.wrap(s.evalRequest))
	s.mux.HandleFunc("/v1/nodes", s.wrap(s.nodesRequest))
	s.mux.HandleFunc("/v1/node/", s.wrap(s.nodeRequest))
	s.mux.HandleFunc("/v1/volumes", s.wrap(s.csiVolumesRequest))
	s.mux.HandleFunc("/v1/volumes/snapshot", s.wrap(s.csiSnapshotsRequest))
	s.mux.HandleFunc("/v1/volume/csi/", s.wrap(s.csiVolumeRequest))
	s.mux.HandleFunc("/v1/plugins", s.wrap(s.csiPluginsRequest))
	s.mux.HandleFunc("/v1/plugin/csi/", s.wrap(s.csiPluginRequest))
	s.mux.HandleFunc("/v1/system/gc", s.wrap(s.systemGC))
	s.mux.HandleFunc("/v1/agent/self", s.wrap(s.agentSelfRequest))
	s.mux.HandleFunc("/v1/agent/monitor", s.wrap(s.agentMonitor))
	s.mux.HandleFunc("/v1/client/fs/logs/", s.wrap(s.clientFSLogs))
	s.mux.HandleFunc("/v1/client/fs/", s.wrap(s.clientFSRequest))
	s.mux.HandleFunc("/v1/client/stats", s.wrap(s.clientStats))
	s.mux.HandleFunc("/v1/client/allocation/", s.wrap(s.clientAllocRequest))
	s.mux.HandleFunc("/v1/operator/audit", s.wrap(s.operatorAudit))
	s.mux.HandleFunc("/v1/acl/bootstrap", s.wrap(s.aclBootstrap))
	s.mux.HandleFunc("/v1/acl/policies", s.wrap(s.aclPolicies))
	s.mux.HandleFunc("/v1/acl/policy/", s.wrap(s.aclPolicy))
	s.mux.HandleFunc("/v1/acl/tokens", s.wrap(s.aclTokens))
	s.mux.HandleFunc("/v1/acl/token", s.wrap(s.aclToken))
	s.mux.HandleFunc("/v1/acl/token/", s.wrap(s.aclToken))
	s.mux.HandleFunc("/v1/event/stream", s.wrap(s.eventStreamRequest))
	installMetrics()
	s.mux.HandleFunc("/v1/metrics", s.wrap(s.metricsRequest))
	// The web UI: a static shell; its script reads the API with the caller's token.
	s.mux.Handle(ui.Prefix, ui.Handler())
	s.mux.HandleFunc("/", s.wrap(func(w http.ResponseWriter, r *http.Request) (any, error) {
		if r.URL.Path == "/" && r.Method == http.MethodGet {
			http.Redirect(w, r, ui.Prefix, http.StatusTemporaryRedirect) // as Nomad's agent does
			return nil, nil
		}
		return nil, CodedError(http.StatusNotFound, "no such endpoint: "+r.URL.Path)
	}))
}

// HTTPCodedError is an error with an HTTP status.
type HTTPCodedError struct {
	Code int
	Msg  string
}

func (e *HTTPCodedError) Error() string { return e.Msg }

// CodedError makes an error that answers with the given status.
func CodedError(code int, msg string) error { return &HTTPCodedError{Code: code, Msg: msg} }

// handlerFunc returns the object to encode as JSON, or an error.
type handlerFunc func(w http.ResponseWriter, r *http.Request) (any, error)

// wrap turns a handlerFunc into an http.HandlerFunc: JSON out (indented
// with ?pretty), errors as plain text with the status their code maps to.
func (s *HTTPServer) wrap(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		err := readBody(w, r, s.maxBody, s.bodyTimeout)
		var obj any
		if err == nil {
			obj, err = h(w, r)
		}
		if err != nil {
			code, msg := errorStatus(err)
			msg = truncateError(msg)
			if code >= 500 {
				s.logger.Error("request failed", "method", r.Method, "path", r.URL.Path, "error", err)
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(code)
			fmt.Fprint(w, msg)
			return
		}
		if obj == nil {
			return
		}
		var buf bytes.Buffer
		_, pretty := r.URL.Query()["pretty"]
		if ja, ok := obj.(jsonAppender); ok && !pretty {
			pb := answerBufs.Get().(*[]byte)
			defer putAnswerBuf(pb)
			b, err := ja.appendJSON((*pb)[:0])
			*pb = b
			if err != nil {
				s.logger.Error("encoding response", "path", r.URL.Path, "error", err)
				http.Error(w, "encoding response: "+err.Error(), http.StatusInternalServerError)
				return
			}
			b = append(b, '\n') // as json.Encoder ends it
			*pb = b
			w.Header().Set("Content-Type", "application/json")
			// The length lets the client size its buffer once instead of
			// growing it through a big answer (and saves chunk framing).
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			w.Write(b)
			s.logger.Trace("request complete", "method", r.Method, "path", r.URL.Path, "duration", time.Since(start))
			return
		}
		enc := json.NewEncoder(&buf)
		if pretty {
			enc.SetIndent("", "    ")
		}
		if err := enc.Encode(obj); err != nil {
			s.logger.Error("encoding response", "path", r.URL.Path, "error", err)
			http.Error(w, "encoding response: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
		w.Write(buf.Bytes())
		s.logger.Trace("request complete", "method", r.Method, "path", r.URL.Path, "duration", time.Since(start))
	}
}

// errorStatus maps an error to an HTTP status and body.
func errorStatus(err error) (int, string) {
	var he *HTTPCodedError
	if errors.As(err, &he) {
		return he.Code, he.Msg
	}
	switch structs.CodeOf(err) {
	case structs.CodeInvalid:
		return http.StatusBadRequest, err.Error()
	case structs.CodeNotFound:
		return http.StatusNotFound, err.Error()
	case structs.CodePermissionDenied:
		return http.StatusForbidden, err.Error()
	case structs.CodeConflict:
		return http.StatusConflict, err.Error()
	case structs.CodeUnsupported:
		return http.StatusNotImplemented, err.Error()
	}
	if errors.Is(err, errNoServer) {
		return http.StatusBadRequest, err.Error()
	}
	return http.StatusInternalServerError, err.Error()
}

// methodNotAllowed is the 405 answer.
func methodNotAllowed(r *http.Request) error {
	return CodedError(http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path))
}

// parseQuery fills QueryOptions from the URL and headers.
func parseQuery(r *http.Request, q *structs.QueryOptions) error {
	v := r.URL.Query()
	if idx := v.Get("index"); idx != "" {
		n, err := strconv.ParseUint(idx, 10, 64)
		if err != nil {
			return CodedError(http.StatusBadRequest, fmt.Sprintf("invalid index %q: want an integer", idx))
		}
		q.MinQueryIndex = n
	}
	if wait := v.Get("wait"); wait != "" {
		d, err := time.ParseDuration(wait)
		if err != nil {
			return CodedError(http.StatusBadRequest, fmt.Sprintf("invalid wait %q: want a duration such as 30s or 5m", wait))
		}
		q.MaxQueryTime = d
	}
	if _, ok := v["stale"]; ok {
		q.AllowStale = v.Get("stale") != "false"
	}
	q.Prefix = v.Get("prefix")
	q.Namespace = v.Get("namespace")
	q.Region = v.Get("region")
	q.Filter = v.Get("filter")
	q.NextToken = v.Get("next_token")
	if pp := v.Get("per_page"); pp != "" {
		n, err := strconv.ParseInt(pp, 10, 32)
		if err != nil || n < 0 {
			return CodedError(http.StatusBadRequest, fmt.Sprintf("invalid per_page %q: want a non-negative integer", pp))
		}
		q.PerPage = int32(n)
	}
	q.Reverse = v.Get("reverse") == "true"
	q.AuthToken = authToken(r)
	return nil
}

// authToken reads X-Nomad-Token or Authorization: Bearer.
func authToken(r *http.Request) string {
	if t := r.Header.Get("X-Nomad-Token"); t != "" {
		return t
	}
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") {
		return strings.TrimSpace(strings.TrimPrefix(a, "Bearer "))
	}
	return ""
}

// authorizeHTTP applies the endpoint table's rule for an endpoint the
// agent serves itself (not through an RPC), via ACL.Authorize on the
// servers. ns is the namespace of the object, "" when there is none.
func (s *HTTPServer) authorizeHTTP(r *http.Request, endpoint, ns string) error {
	args := structs.ACLAuthorizeRequest{Endpoint: endpoint, QueryOptions: structs.QueryOptions{Namespace: ns, AuthToken: authToken(r)}}
	var reply structs.ACLAuthorizeResponse
	return s.agent.authRPC(structs.MethodACLAuthorize, &args, &reply)
}

// setMeta writes the blocking-query headers.
func setMeta(w http.ResponseWriter, m *structs.QueryMeta) {
	w.Header().Set("X-Nomad-Index", strconv.FormatUint(m.Index, 10))
	w.Header().Set("X-Nomad-KnownLeader", strconv.FormatBool(m.KnownLeader))
	w.Header().Set("X-Nomad-LastContact", strconv.FormatInt(m.LastContact.Milliseconds(), 10))
	if m.NextToken != "" {
		w.Header().Set("X-Nomad-NextToken", m.NextToken)
	}
}

// setIndex writes X-Nomad-Index for writes.
func setIndex(w http.ResponseWriter, index uint64) {
	w.Header().Set("X-Nomad-Index", strconv.FormatUint(index, 10))
}

// answerBufs hold the buffers of the answers that write their own JSON
// (jsonAppender): a list of 1,000 volumes is ~450 KB, which allocated
// and cleared on every request was a tenth of the list's agent time.
var answerBufs = sync.Pool{New: func() any { return new([]byte) }}

// putAnswerBuf returns a buffer to answerBufs once its answer is
// written; an outsized one (a one-off huge list) is left to the GC.
func putAnswerBuf(pb *[]byte) {
	if cap(*pb) > 8<<20 {
		return
	}
	*pb = (*pb)[:0]
	answerBufs.Put(pb)
}
