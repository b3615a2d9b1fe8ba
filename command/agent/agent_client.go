package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"

	"github.com/berth-io/berth/client"
	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/plugins/drivers/builtin"
	"github.com/berth-io/berth/plugins/drivers/exec"
	"github.com/berth-io/berth/plugins/drivers/executor"
	"github.com/berth-io/berth/plugins/drivers/rawexec"
)

// setupClient builds the client from the agent config and starts it; it
// stores it in a.client. Call it after setupServer (with a server in the
// same agent and no client.servers, the client talks to it in process) and
// after the HTTP server exists (the node advertises its HTTP address).
// Shut the client down before the server: a -dev client stops its tasks
// and reports their last states to that server.
func (a *Agent) setupClient() error {
	cfg := a.config
	logger := a.logger.ResetNamed("")
	rpc, err := a.clientRPC()
	if err != nil {
		return err
	}
	a.serversRPC = rpc
	enabled, err := enabledDrivers(cfg)
	if err != nil {
		return err
	}
	allowCaps, err := execAllowCaps(cfg)
	if err != nil {
		return err
	}
	cc := &client.Config{
		DataDir: cfg.DataDir, // empty in -dev: the client uses a temporary dir
		Node: &structs.Node{
			Name:       cfg.Name,
			Datacenter: cfg.Datacenter,
			NodeClass:  cfg.Client.NodeClass,
			Meta:       maps.Clone(cfg.Client.Meta),
			HTTPAddr:   a.clientHTTPAddr(),
			TLSEnabled: cfg.tlsHTTP(),
		},
		RPC: rpc,
		DriverFactory: func(stateDir string) map[string]drivers.Driver {
			all := builtin.DriversWith(logger, stateDir, builtin.Options{ExecAllowCaps: allowCaps})
			out := map[string]drivers.Driver{}
			for name, d := range all {
				if enabled[name] {
					out[name] = d
				}
			}
			if cfg.ExtraDrivers != nil {
				maps.Copy(out, cfg.ExtraDrivers(logger, stateDir))
			}
			return out
		},
		Logger:  logger,
		DevMode: cfg.DevMode,
	}
	cc.DisconnectDeadline = cfg.Client.DisconnectDeadlineOrDefault()
	if cfg.Client.CSIStatsInterval != nil {
		cc.CSI.StatsInterval = *cfg.Client.CSIStatsInterval
	}
	if ip := net.ParseIP(cfg.BindAddr); ip != nil && !ip.IsUnspecified() {
		cc.NetworkIP = ip.String()
	}
	if ip, err := cfg.Client.networkIP(); err != nil {
		return err
	} else if ip != "" {
		cc.NetworkIP = ip
	}
	c, err := client.New(cc)
	if err != nil {
		return fmt.Errorf("starting client: %w", err)
	}
	a.client = c
	return nil
}

// clientHTTPAddr is the HTTP address the node advertises (operators and
// other agents reach its client endpoints, e.g. logs, there).
func (a *Agent) clientHTTPAddr() string {
	cfg := a.config
	if cfg.Advertise.HTTP != "" {
		return cfg.Advertise.HTTP
	}
	if a.http != nil {
		return a.http.Addr()
	}
	return net.JoinHostPort(cfg.BindAddr, strconv.Itoa(cfg.Ports.HTTPPort()))
}

// clientRPC is how the client reaches the servers: the agent's own server
// in process when there is one and client.servers is empty, else a pool
// over client.servers.
func (a *Agent) clientRPC() (client.RPCer, error) {
	servers := a.config.Client.Servers
	if len(servers) == 0 {
		if a.server == nil {
			return nil, errors.New("client: set client { servers = [\"host:port\"] } or enable the server in this agent")
		}
		return a.server, nil
	}
	return newServerPool(servers, a.clientTLS()), nil
}

// enabledDrivers decides which built-in drivers the client runs: exec
// always (its fingerprint says whether it works here), raw_exec in -dev
// or with a `plugin "raw_exec" {}` block (unless its config sets
// enabled = false).
func enabledDrivers(cfg *Config) (map[string]bool, error) {
	out := map[string]bool{exec.Name: true, rawexec.Name: cfg.DevMode}
	if on, set := cfg.Client.rawExecOption(); set {
		out[rawexec.Name] = on
	}
	for _, p := range cfg.Plugins {
		if p.Name != rawexec.Name && p.Name != exec.Name {
			continue
		}
		on, err := pluginEnabled(p)
		if err != nil {
			return nil, err
		}
		out[p.Name] = on
	}
	return out, nil
}

// pluginEnabled reads `config { enabled = <bool> }` of a plugin block; a
// block without it enables the plugin.
func pluginEnabled(p *PluginConfig) (bool, error) {
	if p.Remain == nil {
		return true, nil
	}
	var body struct {
		Config *struct {
			Enabled *bool    `hcl:"enabled,optional"`
			Remain  hcl.Body `hcl:",remain"`
		} `hcl:"config,block"`
		Remain hcl.Body `hcl:",remain"`
	}
	if diags := gohcl.DecodeBody(p.Remain, nil, &body); diags.HasErrors() {
		return false, fmt.Errorf("plugin %q: %s", p.Name, diags.Error())
	}
	if body.Config == nil || body.Config.Enabled == nil {
		return true, nil
	}
	return *body.Config.Enabled, nil
}

// execAllowCaps reads `plugin "exec" { config { allow_caps = [...] } }`:
// the capability bounding set of exec tasks (nil: the driver's default).
func execAllowCaps(cfg *Config) ([]string, error) {
	var caps []string
	for _, p := range cfg.Plugins {
		if p.Name != exec.Name || p.Remain == nil {
			continue
		}
		var body struct {
			Config *struct {
				AllowCaps []string `hcl:"allow_caps,optional"`
				Remain    hcl.Body `hcl:",remain"`
			} `hcl:"config,block"`
			Remain hcl.Body `hcl:",remain"`
		}
		if diags := gohcl.DecodeBody(p.Remain, nil, &body); diags.HasErrors() {
			return nil, fmt.Errorf("plugin %q: %s", p.Name, diags.Error())
		}
		if body.Config == nil || body.Config.AllowCaps == nil {
			continue
		}
		for _, c := range body.Config.AllowCaps {
			if _, ok := executor.CapabilityByName(c); !ok {
				return nil, fmt.Errorf("plugin %q: allow_caps names %q, which is not a Linux capability (e.g. \"net_bind_service\")", p.Name, c)
			}
		}
		caps = body.Config.AllowCaps
	}
	return caps, nil
}

// serverPool is the client's RPCer over client.servers: calls go to the
// server that last answered, and move on to the next one when a server
// cannot be reached. An answer from a server, even an error, ends the
// call. Blocking queries get connections of their own: a server serves
// the requests of one connection one after the other, so a query blocked
// for minutes would hold up heartbeats and alloc updates behind it.
type serverPool struct {
	pool     *nomad.ConnPool
	blocking *nomad.ConnPool
	servers  []string
	// tls gives each dial's TLS config; nil without tls.rpc.
	tls func() *tls.Config

	// lock guards next.
	lock sync.Mutex
	next int
}

// rpcDialTimeout bounds dialling one server.
const rpcDialTimeout = 10 * time.Second

func newServerPool(servers []string, tlsConfig func() *tls.Config) *serverPool {
	return &serverPool{
		pool:     nomad.NewConnPool(rpcDialTimeout).WithTLS(tlsConfig),
		blocking: nomad.NewConnPool(rpcDialTimeout).WithTLS(tlsConfig),
		servers:  append([]string(nil), servers...),
		tls:      tlsConfig,
	}
}

// isBlocking reports whether a call is a blocking query.
func isBlocking(args any) bool {
	q, ok := args.(interface{ IsRead() bool })
	if !ok || !q.IsRead() {
		return false
	}
	switch a := args.(type) {
	case *structs.NodeSpecificRequest:
		return a.MinQueryIndex > 0
	case *structs.GenericRequest:
		return a.MinQueryIndex > 0
	}
	return false
}

// RPC implements client.RPCer.
func (p *serverPool) RPC(method string, args, reply any) error {
	return p.RPCContext(context.Background(), method, args, reply)
}

// RPCContext implements client.ContextRPCer.
func (p *serverPool) RPCContext(ctx context.Context, method string, args, reply any) error {
	pool := p.pool
	if isBlocking(args) {
		pool = p.blocking
	}
	p.lock.Lock()
	start := p.next
	p.lock.Unlock()
	var errs []error
	for i := range p.servers {
		idx := (start + i) % len(p.servers)
		addr := p.servers[idx]
		err := pool.RPC(ctx, addr, method, args, reply)
		var coded *structs.Error
		if err == nil || errors.As(err, &coded) || ctx.Err() != nil {
			p.lock.Lock()
			p.next = idx
			p.lock.Unlock()
			return err
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("no server of %v answered %s: %w", p.servers, method, errors.Join(errs...))
}

// DialNodeSession implements client.SessionDialer: it asks a server for
// the leader and opens a node session to it.
func (p *serverPool) DialNodeSession(ctx context.Context) (net.Conn, error) {
	var leader structs.LeaderResponse
	if err := p.RPCContext(ctx, "Status.Leader", &structs.GenericRequest{}, &leader); err != nil {
		return nil, err
	}
	if leader.Leader == "" {
		return nil, errors.New("no cluster leader yet")
	}
	var tc *tls.Config
	if p.tls != nil {
		tc = p.tls()
	}
	return nomad.DialNodeSession(ctx, leader.Leader, tc)
}

// Close closes the pooled connections; the client calls it on Shutdown.
func (p *serverPool) Close() error {
	p.pool.Close()
	p.blocking.Close()
	return nil
}

var (
	_ client.ContextRPCer  = (*serverPool)(nil)
	_ client.SessionDialer = (*serverPool)(nil)
	_ client.SessionDialer = (*nomad.Server)(nil)
)
