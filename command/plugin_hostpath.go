package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/plugins/csi/hostpath"
)

func init() {
	register("plugin hostpath", func(ui *UI) Command { return &pluginHostpathCommand{ui: ui} })
}

// pluginHostpathCommand runs Berth's built-in hostpath CSI plugin.
type pluginHostpathCommand struct {
	ui *UI
}

func (c *pluginHostpathCommand) Synopsis() string {
	return "Run the built-in hostpath CSI plugin"
}

func (c *pluginHostpathCommand) Help() string {
	return `
Usage: berth plugin hostpath [options]

  Serves Berth's hostpath CSI plugin on a unix socket until SIGINT or SIGTERM.
  Volumes are directories under -root; publishing (and, with -stage, staging)
  is a bind mount, so the plugin must run as root. Plugins that share a -root share their state:
  run one per Berth client node on a machine, each with its own -node-id.

Options:

  -endpoint=<unix:///path/csi.sock>
    Where to listen. Defaults to $CSI_ENDPOINT.

  -node-id=<id>
    Node ID reported to the CO. Defaults to the hostname.

  -root=<dir>
    Directory holding the state, volumes and snapshots. Required.

  -mode=<monolith|node|controller>
    CSI services to serve. Defaults to monolith (all).

  -capacity=<bytes>
    Total capacity volumes may reserve. 0 (the default) means unlimited.

  -max-volumes=<n>
    Maximum volumes per node, reported by NodeGetInfo and enforced by
    ControllerPublishVolume. 0 (the default) means no limit.

  -static-volumes
    Let the controller (monolith and controller modes) publish volumes it
    did not create, such as a volume registered with 'berth volume
    register': each is created as an empty directory on first use, as node
    mode always does. Without it, such volumes are not found.

  -stage
    Advertise STAGE_UNSTAGE_VOLUME: NodeStageVolume bind-mounts the volume
    on the staging path and NodePublishVolume binds that on the target.
    Without it (the default) NodePublishVolume binds the volume directly,
    which saves the CO a plugin call per volume and node; a directory gains
    nothing from being staged first.

  -topology
    Advertise accessibility constraints with the segment
    ` + hostpath.TopologyKey + `=<node-id>.

  -log-level=<level>
    trace, debug, info, warn or error. Defaults to info.
`
}

func (c *pluginHostpathCommand) Run(args []string) int {
	cfg, level, err := c.parse(args)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			c.ui.Error("Error: %v", err)
			c.ui.Error("Run 'berth plugin hostpath -help' for the options.")
		}
		return 1
	}
	cfg.Logger = hclog.New(&hclog.LoggerOptions{
		Name:   "plugin.hostpath",
		Level:  level,
		Output: c.ui.Err,
	})

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := hostpath.Run(ctx, cfg); err != nil {
		c.ui.Error("Error: hostpath plugin: %v", err)
		return 1
	}
	return 0
}

// parse reads the flags into a plugin config. Errors name the flag.
func (c *pluginHostpathCommand) parse(args []string) (hostpath.Config, hclog.Level, error) {
	var cfg hostpath.Config
	var mode, logLevel string
	fs := flag.NewFlagSet("plugin hostpath", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.Endpoint, "endpoint", os.Getenv("CSI_ENDPOINT"), "")
	fs.StringVar(&cfg.NodeID, "node-id", "", "")
	fs.StringVar(&cfg.Root, "root", "", "")
	fs.StringVar(&mode, "mode", string(hostpath.ModeMonolith), "")
	fs.Int64Var(&cfg.CapacityBytes, "capacity", 0, "")
	fs.Int64Var(&cfg.MaxVolumesPerNode, "max-volumes", 0, "")
	fs.BoolVar(&cfg.Topology, "topology", false, "")
	fs.BoolVar(&cfg.StaticVolumes, "static-volumes", false, "")
	fs.BoolVar(&cfg.Stage, "stage", false, "")
	fs.StringVar(&logLevel, "log-level", "info", "")
	if err := parseArgs(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.ui.Output("%s", strings.TrimSpace(c.Help()))
		}
		return cfg, 0, err
	}
	if fs.NArg() > 0 {
		return cfg, 0, fmt.Errorf("unexpected arguments %q: this command takes only flags", fs.Args())
	}
	if cfg.Endpoint == "" {
		return cfg, 0, fmt.Errorf("-endpoint is required (or set CSI_ENDPOINT)")
	}
	if _, err := hostpath.SocketPath(cfg.Endpoint); err != nil {
		return cfg, 0, fmt.Errorf("-endpoint: %w", err)
	}
	if cfg.Root == "" {
		return cfg, 0, fmt.Errorf("-root is required")
	}
	m, err := hostpath.ParseMode(mode)
	if err != nil {
		return cfg, 0, fmt.Errorf("-mode: %w", err)
	}
	cfg.Mode = m
	if cfg.CapacityBytes < 0 {
		return cfg, 0, fmt.Errorf("-capacity must not be negative, got %d", cfg.CapacityBytes)
	}
	if cfg.MaxVolumesPerNode < 0 {
		return cfg, 0, fmt.Errorf("-max-volumes must not be negative, got %d", cfg.MaxVolumesPerNode)
	}
	level := hclog.LevelFromString(logLevel)
	if level == hclog.NoLevel {
		return cfg, 0, fmt.Errorf("-log-level: unknown level %q: use trace, debug, info, warn or error", logLevel)
	}
	if cfg.NodeID == "" {
		host, err := os.Hostname()
		if err != nil {
			return cfg, 0, fmt.Errorf("-node-id: not set, and the hostname is unknown: %w", err)
		}
		cfg.NodeID = host
	}
	return cfg, level, nil
}
