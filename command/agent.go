package command

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/berth-io/berth/command/agent"
)

func init() {
	register("agent", func(ui *UI) Command { return &AgentCommand{ui: ui} })
}

// AgentCommand runs a Berth agent: server, client, or both.
type AgentCommand struct {
	ui *UI
	// ready, when set, receives the agent once it is up (tests).
	ready chan<- *agent.Agent
	// stop, when set, stops the agent like a signal would (tests).
	stop <-chan struct{}
	// executable, when set, is the berth binary the -dev hostpath plugin
	// runs instead of os.Executable() (tests: the test binary is not berth).
	executable string
}

func (c *AgentCommand) Synopsis() string {
	return "Run a Berth agent (server, client, or both with -dev)"
}

func (c *AgentCommand) Help() string {
	return `
Usage: berth agent [options]

  Starts a Berth agent and runs until interrupted. An agent runs a server
  (Raft-replicated state), a client (runs tasks), or both.

Options:

  -config=<path>
    An HCL2 agent config file. May be given more than once; later files
    override earlier ones.

  -dev
    Development mode: server and client in one process, in-memory Raft,
    listening on 127.0.0.1 only. -config files still override its defaults.
    It also runs Berth's hostpath CSI plugin (plugin ID "hostpath",
    monolith) as the system job "hostpath", from this berth binary, with
    its volumes under <data-dir>/hostpath (a temporary dir without
    -data-dir; the agent prints it). Mounting volumes needs root.

  -dev-no-plugin
    With -dev, do not run the hostpath CSI plugin.

  -data-dir=<path>
    Overrides data_dir.

  -bind=<ip>
    Overrides bind_addr.

  -log-level=<level>
    TRACE, DEBUG, INFO, WARN or ERROR.
`
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func (c *AgentCommand) Run(args []string) int {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var (
		configs                 stringList
		dev, devNoPlugin        bool
		dataDir, bind, logLevel string
	)
	fs.Var(&configs, "config", "")
	fs.BoolVar(&dev, "dev", false, "")
	fs.BoolVar(&devNoPlugin, "dev-no-plugin", false, "")
	fs.StringVar(&dataDir, "data-dir", "", "")
	fs.StringVar(&bind, "bind", "", "")
	fs.StringVar(&logLevel, "log-level", "", "")
	if err := parseArgs(fs, args); err != nil {
		c.ui.Error("Error parsing flags: %v\nRun 'berth agent -help' for usage.", err)
		return 1
	}
	if fs.NArg() > 0 {
		c.ui.Error("Unexpected arguments %q: berth agent takes only flags.", fs.Args())
		return 1
	}
	if devNoPlugin && !dev {
		c.ui.Error("-dev-no-plugin needs -dev: only a dev agent runs the hostpath plugin.")
		return 1
	}

	cfg := agent.DefaultConfig()
	if dev {
		cfg = agent.DevConfig()
	}
	for _, path := range configs {
		fc, err := agent.ParseConfigFile(path)
		if err != nil {
			c.ui.Error("Error loading config %s:\n%v", path, err)
			return 1
		}
		cfg = cfg.Merge(fc)
	}
	cfg = cfg.Merge(&agent.Config{DataDir: dataDir, BindAddr: bind, LogLevel: logLevel})
	if dev && !devNoPlugin {
		dp, err := c.devPluginConfig()
		if err != nil {
			c.ui.Error("Error: %v\nRun with -dev-no-plugin to start without the hostpath CSI plugin.", err)
			return 1
		}
		cfg.DevPlugin = dp
	}

	// Before the server starts: restoring a snapshot is its biggest burst.
	gc := agent.ApplyGCPolicy(cfg)
	a, err := agent.NewAgent(cfg, c.ui.Err)
	if err != nil {
		c.ui.Error("Error starting agent: %v", err)
		return 1
	}
	mode := []string{}
	if cfg.ServerEnabled() {
		mode = append(mode, "server")
	}
	if cfg.ClientEnabled() {
		mode = append(mode, "client")
	}
	c.ui.Output("==> Berth agent started (%s)%s", strings.Join(mode, " + "), devNote(cfg.DevMode))
	c.ui.Output("    Bind:     %s%s", cfg.BindAddr, bindNote(cfg.BindAddr))
	c.ui.Output("    HTTP API: %s", a.HTTPURL())
	if srv := a.Server(); srv != nil {
		c.ui.Output("    RPC:      %s", srv.RPCAddr())
		c.ui.Output("    Data dir: %s", orNone(cfg.DataDir, "<in memory>"))
		c.ui.Output("    GC:       %s", gc)
	}
	if root := a.DevPluginRoot(); root != "" {
		c.ui.Output("    CSI:      plugin %q (monolith) as job %q; volumes under %s",
			agent.DevPluginID, agent.DevPluginJobID, filepath.Join(root, "volumes"))
		if err := a.DevPluginMountError(); err != nil {
			c.ui.Output("    Warning:  volumes cannot be mounted (berth plugin status %s says so too): %v", agent.DevPluginID, err)
		}
	}
	if c.ready != nil {
		c.ready <- a
	}

	sigCh := make(chan os.Signal, 2)
	signal.Notify(sigCh, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigCh)
	// SIGHUP reloads the TLS certificates; the agent keeps running.
	hupCh := make(chan os.Signal, 1)
	signal.Notify(hupCh, syscall.SIGHUP)
	defer signal.Stop(hupCh)
	halted, _ := a.Halted()
	exit := 0
wait:
	for {
		select {
		case <-hupCh:
			if err := a.ReloadTLS(); err != nil {
				c.ui.Error("==> Caught SIGHUP: %v", err)
			} else {
				c.ui.Output("==> Caught SIGHUP: TLS certificates reloaded")
			}
		case sig := <-sigCh:
			c.ui.Output("==> Caught signal %v: shutting down (again to force)", sig)
			break wait
		case <-c.stop:
			c.ui.Output("==> Shutting down")
			break wait
		case <-halted:
			_, err := a.Halted()
			c.ui.Error("==> Server stopped applying the raft log; shutting down:\n    %v", err)
			exit = 1
			break wait
		}
	}
	done := make(chan error, 1)
	go func() { done <- a.Shutdown() }()
	select {
	case err := <-done:
		if err != nil {
			c.ui.Error("Error during shutdown: %v", err)
			return 1
		}
	case <-sigCh:
		c.ui.Error("Second signal: exiting without waiting for shutdown")
		return 1
	case <-time.After(30 * time.Second):
		c.ui.Error("Shutdown did not finish in 30s; exiting")
		return 1
	}
	c.ui.Output("==> Agent stopped")
	return exit
}

// devPluginConfig is the dev plugin of `agent -dev`: it runs this very
// executable (c.executable in tests), so the plugin matches the agent.
func (c *AgentCommand) devPluginConfig() (*agent.DevPluginConfig, error) {
	exe := c.executable
	if exe == "" {
		p, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding this executable for the hostpath plugin: %w", err)
		}
		exe = p
	}
	return &agent.DevPluginConfig{Executable: exe}, nil
}

func devNote(dev bool) string {
	if dev {
		return " in -dev mode: state is in memory and lost on exit"
	}
	return ""
}

func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

// bindNote says how to reach a loopback-only agent from elsewhere.
func bindNote(addr string) string {
	if ip := net.ParseIP(addr); ip != nil && ip.IsLoopback() {
		return " (loopback only; set bind_addr to serve other hosts)"
	}
	return ""
}
