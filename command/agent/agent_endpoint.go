package agent

import (
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"strconv"

	"github.com/berth-io/berth/nomad/structs"
)

// agentSelf is Nomad's /v1/agent/self shape: lowercase top-level keys,
// PascalCase inside.
type agentSelf struct {
	Config map[string]any               `json:"config"`
	Member agentMember                  `json:"member"`
	Stats  map[string]map[string]string `json:"stats"`
}

type agentMember struct {
	Name   string
	Addr   string
	Port   uint16
	Tags   map[string]string
	Status string
}

// agentSelfRequest describes this agent: its configuration (without
// anything secret: plugin blocks are shown by name only), its membership
// and its statistics.
func (s *HTTPServer) agentSelfRequest(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	if err := s.authorizeHTTP(r, structs.HTTPAgentSelf, ""); err != nil {
		return nil, err
	}
	cfg := s.agent.config
	out := agentSelf{
		Config: agentConfigView(cfg),
		Member: agentMember{Name: cfg.Name + "." + cfg.Region, Status: "alive", Tags: map[string]string{
			"region": cfg.Region, "dc": cfg.Datacenter, "build": berthVersion(), "role": "client",
		}},
		Stats: map[string]map[string]string{
			"runtime": {
				"version":    runtime.Version(),
				"arch":       runtime.GOARCH,
				"os":         runtime.GOOS,
				"goroutines": strconv.Itoa(runtime.NumGoroutine()),
				"max_procs":  strconv.Itoa(runtime.GOMAXPROCS(0)),
				"cpu_count":  strconv.Itoa(runtime.NumCPU()),
			},
		},
	}
	if srv := s.agent.Server(); srv != nil {
		host, port, err := net.SplitHostPort(srv.RPCAddr())
		if err == nil {
			p, _ := strconv.ParseUint(port, 10, 16)
			out.Member.Addr, out.Member.Port = host, uint16(p)
			out.Member.Tags["port"] = port
		}
		out.Member.Tags["role"] = "nomad"
		out.Member.Tags["id"] = srv.ID()
		out.Member.Tags["rpc_addr"] = srv.RPCAddr()
		out.Member.Tags["expect"] = strconv.Itoa(cfg.Server.BootstrapExpect)
		leader := srv.Leader()
		out.Stats["nomad"] = map[string]string{
			"server":       "true",
			"leader":       strconv.FormatBool(srv.IsLeader()),
			"leader_addr":  leader,
			"known_leader": strconv.FormatBool(leader != ""),
		}
		out.Stats["raft"] = srv.Raft().Stats()
	}
	if cfg.ClientEnabled() {
		out.Stats["client"] = map[string]string{"enabled": "true"}
	}
	return out, nil
}

// agentConfigView is the agent's configuration as /v1/agent/self shows
// it. Plugin blocks may hold credentials, so only their names appear.
func agentConfigView(c *Config) map[string]any {
	plugins := make([]map[string]any, 0, len(c.Plugins))
	for _, p := range c.Plugins {
		plugins = append(plugins, map[string]any{"Name": p.Name})
	}
	view := map[string]any{
		"Region":     c.Region,
		"Datacenter": c.Datacenter,
		"NodeName":   c.Name,
		"DataDir":    c.DataDir,
		"BindAddr":   c.BindAddr,
		"LogLevel":   c.LogLevel,
		"LogJson":    c.LogJSON != nil && *c.LogJSON,
		"DevMode":    c.DevMode,
		"Ports":      map[string]any{"HTTP": c.Ports.HTTPPort(), "RPC": c.Ports.RPCPort()},
		"Plugins":    plugins,
		"Version":    map[string]any{"Version": berthVersion()},
	}
	if c.Advertise != nil {
		view["AdvertiseAddrs"] = map[string]any{"HTTP": c.Advertise.HTTP, "RPC": c.Advertise.RPC}
	}
	if c.Server != nil {
		view["Server"] = map[string]any{
			"Enabled": c.ServerEnabled(), "BootstrapExpect": c.Server.BootstrapExpect,
			"ServerJoin": map[string]any{"RetryJoin": c.Server.ServerJoin},
		}
	}
	if c.Client != nil {
		view["Client"] = map[string]any{
			"Enabled": c.ClientEnabled(), "Servers": c.Client.Servers,
			"NodeClass": c.Client.NodeClass, "Meta": c.Client.Meta,
		}
	}
	return view
}

// berthVersion is the module version the binary was built from, or
// "(devel)" for a local build.
func berthVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
