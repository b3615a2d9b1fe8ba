// Package agent wires a Berth agent together: the server (nomad), the
// client (client), and the HTTP API in front of them. It is the only part
// of command/ that may import nomad and client (DESIGN.md §1).
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/client"
	"github.com/berth-io/berth/helper/tlsutil"
	"github.com/berth-io/berth/nomad"
)

// Agent is one running berth agent.
type Agent struct {
	config *Config
	logger hclog.Logger

	server *nomad.Server
	client *client.Client
	http   *HTTPServer
	// tls holds the agent's certificates when tls.http or tls.rpc is on
	// (tls.go); ReloadTLS swaps them.
	tls *tlsutil.Reloader
	// devPlugin is set when the agent runs the dev plugin (dev_plugin.go).
	devPlugin *devPlugin
	// intercept is the agent's root logger, where monitors add sinks.
	intercept hclog.InterceptLogger
	// serversRPC reaches the servers for a client-only agent, which must
	// ask them to authorize what it serves itself (task logs).
	serversRPC client.RPCer
}

// authRPC asks the servers to authorize an HTTP-only endpoint: the
// in-process server, or through the client's server pool.
func (a *Agent) authRPC(method string, args, reply any) error {
	if a.server == nil && a.serversRPC != nil {
		return a.serversRPC.RPC(method, args, reply)
	}
	return a.RPC(method, args, reply)
}

// NewAgent validates the config and starts the server (if enabled) and the
// HTTP API. On error, whatever was started is stopped again.
func NewAgent(cfg *Config, logOutput io.Writer) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid agent config: %w", err)
	}
	// An intercept logger: /v1/agent/monitor adds sinks to it.
	logger := hclog.NewInterceptLogger(&hclog.LoggerOptions{
		Name:       "agent",
		Level:      hclog.LevelFromString(cfg.LogLevel),
		Output:     logOutput,
		JSONFormat: cfg.LogJSON != nil && *cfg.LogJSON,
	})
	a := &Agent{config: cfg, logger: logger, intercept: logger}
	if err := a.setupTLS(); err != nil {
		return nil, fmt.Errorf("invalid agent config: %w", err)
	}
	if cfg.ServerEnabled() {
		if err := a.setupServer(logOutput); err != nil {
			return nil, err
		}
	}
	httpSrv, err := NewHTTPServer(a, net.JoinHostPort(cfg.BindAddr, strconv.Itoa(cfg.Ports.HTTPPort())), logger)
	if err != nil {
		a.Shutdown()
		return nil, err
	}
	a.http = httpSrv
	// The client starts after the HTTP server so its node can advertise
	// the HTTP address (alloc logs are served there).
	if cfg.ClientEnabled() {
		if err := a.setupClient(); err != nil {
			a.Shutdown()
			return nil, err
		}
	}
	if cfg.DevMode && cfg.DevPlugin != nil && cfg.ACLEnabled() {
		// The agent has no token of its own to submit the plugin job
		// with: with ACLs on, run examples/ hostpath job with a token.
		a.logger.Warn("not starting the dev hostpath plugin: ACLs are enabled; submit its job with a token (berth job run -token ...)")
	} else if cfg.DevMode && cfg.DevPlugin != nil && a.server != nil && a.client != nil {
		if err := a.startDevPlugin(); err != nil {
			a.Shutdown()
			return nil, err
		}
	}
	return a, nil
}

func (a *Agent) setupServer(logOutput io.Writer) error {
	cfg := a.config
	sc := nomad.DefaultConfig()
	sc.NodeName = cfg.Name
	sc.Datacenter = cfg.Datacenter
	sc.Region = cfg.Region
	sc.DevMode = cfg.DevMode
	if cfg.DataDir != "" {
		sc.DataDir = cfg.DataDir
	}
	sc.Logger = a.logger.ResetNamed("")
	sc.LogOutput = logOutput
	sc.BootstrapExpect = cfg.Server.BootstrapExpect
	sc.ServerJoin = cfg.Server.ServerJoin
	sc.EventBufferSize = cfg.Server.EventBufferSize
	if cfg.Server.JobTrackedVersions != nil {
		sc.JobTrackedVersions = *cfg.Server.JobTrackedVersions
	}
	sc.RPCMaxConnsPerClient = cfg.rpcMaxConnsPerClient()
	sc.ACLEnabled = cfg.ACLEnabled()
	if cfg.ACL != nil && cfg.ACL.AuditLog != "" {
		sc.AuditLogPath = cfg.ACL.AuditLog
	} else if !cfg.DevMode && sc.DataDir != "" {
		sc.AuditLogPath = filepath.Join(sc.DataDir, "server", "audit.log")
	}
	if cfg.ACL != nil {
		sc.AuditLogMaxBytes = int64(cfg.ACL.AuditLogMaxMB) << 20
	}
	if cfg.tlsRPC() {
		sc.TLS = a.tls
	}
	ip := net.ParseIP(cfg.BindAddr)
	sc.RPCAddr = &net.TCPAddr{IP: ip, Port: cfg.Ports.RPCPort()}
	if cfg.Advertise.RPC != "" {
		adv, err := net.ResolveTCPAddr("tcp", cfg.Advertise.RPC)
		if err != nil {
			return fmt.Errorf("advertise.rpc %q: %w", cfg.Advertise.RPC, err)
		}
		sc.RPCAdvertise = adv
	}
	if cfg.DevMode {
		// Dev agents elect themselves at once.
		sc.RaftConfig.HeartbeatTimeout = 100 * time.Millisecond
		sc.RaftConfig.ElectionTimeout = 100 * time.Millisecond
		sc.RaftConfig.LeaderLeaseTimeout = 50 * time.Millisecond
	}
	srv, err := nomad.NewServer(sc)
	if err != nil {
		return err
	}
	a.server = srv
	return nil
}

// Halted returns a channel closed when the agent's server stopped
// applying the Raft log (nil, never closed, without a server), and why.
func (a *Agent) Halted() (<-chan struct{}, error) {
	if a.server == nil {
		return nil, nil
	}
	return a.server.Halted()
}

// Server returns the agent's server, or nil when it runs none.
func (a *Agent) Server() *nomad.Server { return a.server }

// HTTPAddr is the address the HTTP API listens on.
func (a *Agent) HTTPAddr() string { return a.http.Addr() }

// HTTPURL is the API's URL: https:// with tls.http.
func (a *Agent) HTTPURL() string {
	if a.config.tlsHTTP() {
		return "https://" + a.http.Addr()
	}
	return "http://" + a.http.Addr()
}

// RPC routes an HTTP handler's call to the local server.
func (a *Agent) RPC(method string, args, reply any) error {
	if a.server == nil {
		return errNoServer
	}
	return a.server.RPC(method, args, reply)
}

var errNoServer = errors.New("this agent runs no server; point BERTH_ADDR at a server agent")

// Shutdown stops the HTTP API, then the client, then the server: a -dev
// client stops its tasks and reports that to the server on its way out.
// Safe to call twice.
func (a *Agent) Shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	var errs []error
	a.stopDevPlugin(ctx)
	if a.http != nil {
		// In-flight requests get a short grace; blocking queries would
		// otherwise hold shutdown for their whole wait (up to 5 minutes).
		hctx, hcancel := context.WithTimeout(ctx, httpShutdownGrace)
		errs = append(errs, a.http.Shutdown(hctx))
		hcancel()
	}
	if a.client != nil {
		errs = append(errs, a.client.Shutdown())
	}
	if a.server != nil {
		errs = append(errs, a.server.Shutdown())
	}
	a.removeDevPluginRoot()
	return errors.Join(errs...)
}
