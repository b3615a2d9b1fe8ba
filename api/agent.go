package api

// Agent is the /v1/agent endpoints of the agent the client talks to.
type Agent struct{ c *Client }

// Agent returns the agent endpoints.
func (c *Client) Agent() *Agent { return &Agent{c: c} }

// Self describes the agent (GET /v1/agent/self).
func (a *Agent) Self() (*AgentSelf, error) {
	var out AgentSelf
	if _, err := a.c.query("/v1/agent/self", &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// Health reports whether the agent's server and client are healthy
// (GET /v1/agent/health). An unhealthy agent answers 500, which comes back
// as a *StatusError.
func (a *Agent) Health() (*AgentHealthResponse, error) {
	var out AgentHealthResponse
	if _, err := a.c.query("/v1/agent/health", &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// AgentSelf is an agent's configuration, membership and statistics.
type AgentSelf struct {
	Config map[string]interface{}
	Member AgentMember
	Stats  map[string]map[string]string
}

// AgentMember is an agent as a cluster member.
type AgentMember struct {
	Name   string
	Addr   string
	Port   uint16
	Tags   map[string]string
	Status string
}

// AgentHealthResponse is the health of an agent's server and client
// halves; a half the agent does not run is nil.
type AgentHealthResponse struct {
	Server *AgentHealth `json:"server,omitempty"`
	Client *AgentHealth `json:"client,omitempty"`
}

// AgentHealth is the health of one half of an agent.
type AgentHealth struct {
	Ok      bool   `json:"ok"`
	Message string `json:"message"`
}

// ServerMembers is the cluster's servers as /v1/agent/members lists them.
type ServerMembers struct {
	ServerName   string
	ServerRegion string
	ServerDC     string
	Members      []*AgentMember
}

// Members lists the servers, each with its status (GET /v1/agent/members).
func (a *Agent) Members() (*ServerMembers, error) {
	var out ServerMembers
	if _, err := a.c.query("/v1/agent/members", &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// SearchResponse is /v1/search's answer: matching IDs per context.
type SearchResponse struct {
	Matches     map[string][]string
	Truncations map[string]bool
}

// PrefixSearch finds the IDs that start with prefix in context ("all",
// "jobs", "nodes", "allocs", "evals", "volumes", "plugins").
func (c *Client) PrefixSearch(prefix, context string) (*SearchResponse, error) {
	var out SearchResponse
	body := map[string]string{"Prefix": prefix, "Context": context}
	if _, err := c.write("PUT", "/v1/search", body, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}
