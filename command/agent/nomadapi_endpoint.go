package agent

import (
	"context"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/jobspec"
	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/nomad/structs"
)

// Endpoints Nomad's CLI and api client reach for that are built from the
// servers' other reads:
//
//	GET       /v1/evaluation/:id/allocations   allocs the eval placed
//	PUT|POST  /v1/jobs/parse                   HCL2 jobspec → job JSON
//	GET       /v1/agent/members                the servers, their status, the leader
//	PUT|POST  /v1/search                       IDs by prefix, per context
//	PUT|POST  /v1/search/fuzzy                 IDs and names containing a text

// evalAllocations lists the allocs an evaluation created or updated.
func (s *HTTPServer) evalAllocations(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	args := structs.EvalSpecificRequest{EvalID: id}
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var eval structs.SingleEvalResponse
	if err := s.agent.RPC(structs.MethodEvalGetEval, &args, &eval); err != nil {
		return nil, err
	}
	if eval.Eval == nil {
		return nil, CodedError(http.StatusNotFound, "eval not found")
	}
	jargs := structs.JobSpecificRequest{JobID: eval.Eval.JobID, All: true}
	jargs.QueryOptions = followUp(args.QueryOptions)
	jargs.Namespace = eval.Eval.Namespace
	var reply structs.AllocListResponse
	if err := s.agent.RPC(structs.MethodJobAllocations, &jargs, &reply); err != nil {
		return nil, err
	}
	setMeta(w, &reply.QueryMeta)
	out := []*api.AllocationListStub{}
	for _, a := range reply.Allocations {
		if a.EvalID == id {
			out = append(out, allocStubToAPI(a))
		}
	}
	return out, nil
}

// jobsParseRequest is the body of /v1/jobs/parse, as Nomad's client
// sends it.
type jobsParseRequest struct {
	JobHCL       string
	HCLv1        bool `json:"hclv1,omitempty"`
	Canonicalize bool
	Variables    string
}

// jobsParse turns an HCL2 jobspec into the job's JSON. Berth's parser
// always fills the defaults, so the job comes back canonicalized whatever
// Canonicalize says.
func (s *HTTPServer) jobsParse(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method != http.MethodPut && r.Method != http.MethodPost {
		return nil, methodNotAllowed(r)
	}
	if err := s.authorizeHTTP(r, structs.HTTPJobsParse, r.URL.Query().Get("namespace")); err != nil {
		return nil, err
	}
	var body jobsParseRequest
	if err := decodeBody(r, &body); err != nil {
		return nil, err
	}
	switch {
	case body.HCLv1:
		return nil, CodedError(http.StatusBadRequest, "HCL1 jobspecs are not supported: Berth parses HCL2 only; drop hclv1 (nomad job run -hcl1)")
	case body.Variables != "":
		return nil, CodedError(http.StatusBadRequest, "jobspec variables are not supported: write the values into the jobspec")
	case strings.TrimSpace(body.JobHCL) == "":
		return nil, CodedError(http.StatusBadRequest, `request body has no jobspec: want {"JobHCL": "job \"<id>\" { ... }"}`)
	}
	job, err := jobspec.Parse("input.hcl", []byte(body.JobHCL))
	if err != nil {
		return nil, CodedError(http.StatusBadRequest, err.Error())
	}
	return job, nil
}

// serverMembers is Nomad's /v1/agent/members reply.
type serverMembers struct {
	ServerName   string
	ServerRegion string
	ServerDC     string
	Members      []*agentMember
}

// memberPingTimeout bounds how long /v1/agent/members waits on a server
// before calling it failed.
const memberPingTimeout = 2 * time.Second

// agentMembers lists the cluster's servers from the Raft configuration.
// Berth has no gossip layer, so a server's Status is what a Status.Ping
// to it says now: "alive" if it answered, "failed" if not.
func (s *HTTPServer) agentMembers(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	var args structs.GenericRequest
	if err := parseQuery(r, &args.QueryOptions); err != nil {
		return nil, err
	}
	var reply structs.RaftConfigurationResponse
	if err := s.agent.RPC(structs.MethodOperatorRaftGetConfiguration, &args, &reply); err != nil {
		return nil, err
	}
	cfg := s.agent.config
	out := &serverMembers{ServerName: cfg.Name, ServerRegion: cfg.Region, ServerDC: cfg.Datacenter, Members: []*agentMember{}}
	pool := nomad.NewConnPool(memberPingTimeout)
	defer pool.Close()
	ctx, cancel := context.WithTimeout(r.Context(), memberPingTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range reply.Servers {
		m := &agentMember{Name: p.NodeName + "." + cfg.Region, Status: "failed", Tags: map[string]string{
			"id": p.ID, "region": cfg.Region, "role": "nomad", "rpc_addr": p.Address,
			"leader": strconv.FormatBool(p.Leader), "voter": strconv.FormatBool(p.Voter),
		}}
		if p.NodeName == "" {
			m.Name = p.ID + "." + cfg.Region
		}
		if host, port, err := net.SplitHostPort(p.Address); err == nil {
			n, _ := strconv.ParseUint(port, 10, 16)
			m.Addr, m.Port = host, uint16(n)
			m.Tags["port"] = port
		}
		out.Members = append(out.Members, m)
		wg.Add(1)
		go func(addr, id string) {
			defer wg.Done()
			var ping structs.PingResponse
			if err := pool.RPC(ctx, addr, structs.MethodStatusPing, &structs.GenericRequest{}, &ping); err == nil && ping.ServerID == id {
				m.Status = "alive"
				m.Tags["build"] = helper.Version
			}
		}(p.Address, p.ID)
	}
	wg.Wait()
	sort.Slice(out.Members, func(i, j int) bool { return out.Members[i].Name < out.Members[j].Name })
	return out, nil
}

// Search contexts, as Nomad names them.
const (
	searchAll     = "all"
	searchJobs    = "jobs"
	searchNodes   = "nodes"
	searchAllocs  = "allocs"
	searchEvals   = "evals"
	searchVolumes = "volumes"
	searchPlugins = "plugins"
)

var searchContexts = []string{searchJobs, searchNodes, searchAllocs, searchEvals, searchVolumes, searchPlugins}

// searchLimit is how many matches a context returns; more are reported
// as truncated.
const searchLimit = 20

type searchRequest struct {
	Prefix  string
	Context string
}

type searchResponse struct {
	Matches     map[string][]string
	Truncations map[string]bool
	Index       uint64
}

type fuzzySearchRequest struct {
	Text    string
	Context string
}

// fuzzyMatch is one match: ID is what matched (an ID or a name), Scope
// what it is found under (namespace and job for a job's objects).
type fuzzyMatch struct {
	ID    string
	Scope []string `json:",omitempty"`
}

type fuzzySearchResponse struct {
	Matches     map[string][]fuzzyMatch
	Truncations map[string]bool
	Index       uint64
}

// searchItem is one object a search may find.
type searchItem struct {
	id, name string
	scope    []string
}

// searchCandidates reads the objects of one context, by ID prefix (empty:
// all). A context the token may not list is empty, as in Nomad.
func (s *HTTPServer) searchCandidates(ctx, prefix string, q structs.QueryOptions) ([]searchItem, uint64, error) {
	q.Prefix = prefix
	args := structs.GenericRequest{QueryOptions: q}
	var out []searchItem
	var err error
	var index uint64
	switch ctx {
	case searchJobs:
		var reply structs.JobListResponse
		if err = s.agent.RPC(structs.MethodJobList, &args, &reply); err == nil {
			index = reply.Index
			for _, j := range reply.Jobs {
				out = append(out, searchItem{id: j.ID, name: j.Name, scope: []string{j.Namespace}})
			}
		}
	case searchNodes:
		var reply structs.NodeListResponse
		if err = s.agent.RPC(structs.MethodNodeList, &args, &reply); err == nil {
			index = reply.Index
			for _, n := range reply.Nodes {
				out = append(out, searchItem{id: n.ID, name: n.Name})
			}
		}
	case searchAllocs:
		var reply structs.AllocListResponse
		if err = s.agent.RPC(structs.MethodAllocList, &args, &reply); err == nil {
			index = reply.Index
			for _, a := range reply.Allocations {
				out = append(out, searchItem{id: a.ID, name: a.Name, scope: []string{a.Namespace, a.JobID}})
			}
		}
	case searchEvals:
		var reply structs.EvalListResponse
		if err = s.agent.RPC(structs.MethodEvalList, &args, &reply); err == nil {
			index = reply.Index
			for _, e := range reply.Evaluations {
				out = append(out, searchItem{id: e.ID, scope: []string{e.Namespace, e.JobID}})
			}
		}
	case searchVolumes:
		vargs := structs.CSIVolumeListRequest{QueryOptions: q}
		var reply structs.CSIVolumeListResponse
		if err = s.agent.RPC(structs.MethodCSIVolumeList, &vargs, &reply); err == nil {
			index = reply.Index
			for _, v := range reply.Volumes {
				out = append(out, searchItem{id: v.ID, name: v.Name, scope: []string{v.Namespace}})
			}
		}
	case searchPlugins:
		var reply structs.CSIPluginListResponse
		if err = s.agent.RPC(structs.MethodCSIPluginList, &args, &reply); err == nil {
			index = reply.Index
			for _, p := range reply.Plugins {
				out = append(out, searchItem{id: p.ID})
			}
		}
	}
	if lacksRight(err) {
		return nil, 0, nil
	}
	return out, index, err
}

// searchContextsOf is the contexts a request names: one, or every one for
// "all" or none.
func searchContextsOf(ctx string) ([]string, error) {
	switch ctx {
	case "", searchAll:
		return searchContexts, nil
	}
	for _, c := range searchContexts {
		if c == ctx {
			return []string{c}, nil
		}
	}
	return nil, CodedError(http.StatusBadRequest, "unknown search context "+strconv.Quote(ctx)+": want all, "+strings.Join(searchContexts, ", "))
}

// search finds IDs that start with a prefix. Prefixes of UUIDs with an odd
// number of hex digits work as Nomad's do, since the servers' lists match
// prefixes as strings.
func (s *HTTPServer) search(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method != http.MethodPut && r.Method != http.MethodPost {
		return nil, methodNotAllowed(r)
	}
	var q structs.QueryOptions
	if err := parseQuery(r, &q); err != nil {
		return nil, err
	}
	var body searchRequest
	if err := decodeBody(r, &body); err != nil {
		return nil, err
	}
	ctxs, err := searchContextsOf(body.Context)
	if err != nil {
		return nil, err
	}
	out := &searchResponse{Matches: map[string][]string{}, Truncations: map[string]bool{}}
	for _, c := range ctxs {
		items, index, err := s.searchCandidates(c, body.Prefix, followUp(q))
		if err != nil {
			return nil, err
		}
		out.Index = max(out.Index, index)
		ids := []string{}
		for _, it := range items {
			ids = append(ids, it.id)
		}
		sort.Strings(ids)
		if len(ids) > searchLimit {
			ids, out.Truncations[c] = ids[:searchLimit], true
		} else {
			out.Truncations[c] = false
		}
		out.Matches[c] = ids
	}
	setIndex(w, out.Index)
	return out, nil
}

// fuzzySearch finds objects whose ID or name contains a text, ignoring
// case.
func (s *HTTPServer) fuzzySearch(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method != http.MethodPut && r.Method != http.MethodPost {
		return nil, methodNotAllowed(r)
	}
	var q structs.QueryOptions
	if err := parseQuery(r, &q); err != nil {
		return nil, err
	}
	var body fuzzySearchRequest
	if err := decodeBody(r, &body); err != nil {
		return nil, err
	}
	if len(body.Text) < 2 {
		return nil, CodedError(http.StatusBadRequest, "fuzzy search text must be at least 2 characters")
	}
	ctxs, err := searchContextsOf(body.Context)
	if err != nil {
		return nil, err
	}
	text := strings.ToLower(body.Text)
	out := &fuzzySearchResponse{Matches: map[string][]fuzzyMatch{}, Truncations: map[string]bool{}}
	for _, c := range ctxs {
		items, index, err := s.searchCandidates(c, "", followUp(q))
		if err != nil {
			return nil, err
		}
		out.Index = max(out.Index, index)
		matches := []fuzzyMatch{}
		for _, it := range items {
			switch {
			case it.name != "" && strings.Contains(strings.ToLower(it.name), text):
				matches = append(matches, fuzzyMatch{ID: it.name, Scope: append(append([]string{}, it.scope...), it.id)})
			case strings.Contains(strings.ToLower(it.id), text):
				matches = append(matches, fuzzyMatch{ID: it.id, Scope: it.scope})
			}
		}
		sort.Slice(matches, func(i, j int) bool { return matches[i].ID < matches[j].ID })
		out.Truncations[c] = len(matches) > searchLimit
		if len(matches) > searchLimit {
			matches = matches[:searchLimit]
		}
		out.Matches[c] = matches
	}
	setIndex(w, out.Index)
	return out, nil
}
