package command

import (
	"context"
	"errors"
	"io"
	"net/url"
	"os"
	"os/signal"
	"syscall"
)

func init() {
	register("monitor", func(ui *UI) Command { return &MonitorCommand{Meta: Meta{ui: ui}} })
}

// MonitorCommand streams an agent's log.
type MonitorCommand struct{ Meta }

func (c *MonitorCommand) Synopsis() string { return "Stream the log of an agent" }

func (c *MonitorCommand) Help() string {
	return `Usage: berth monitor [options]

  Streams the log of the agent the CLI talks to (-address), from now until
  interrupted, at the level asked for, whatever level the agent itself
  logs at. Needs agent read.

Monitor Options:

  -log-level=<level>
    trace, debug, info (the default), warn or error.

  -log-json
    Print the log lines as JSON.

  -node-id=<id>, -server-id=<name>
    Accepted as Nomad's, but only for the agent the CLI talks to: point
    -address at the agent you want to monitor.
` + sharedHelp(false)
}

func (c *MonitorCommand) Run(args []string) int {
	fs := c.flagSet("monitor", false)
	var level, nodeID, serverID string
	var logJSON bool
	fs.StringVar(&level, "log-level", "info", "")
	fs.BoolVar(&logJSON, "log-json", false, "")
	fs.BoolVar(&logJSON, "json", false, "")
	fs.StringVar(&nodeID, "node-id", "", "")
	fs.StringVar(&serverID, "server-id", "", "")
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if fs.NArg() != 0 {
		return flagErr(c.ui, c.Help(), "This command takes no arguments.")
	}
	params := url.Values{"log_level": {level}, "plain": {"true"}}
	if logJSON {
		params.Set("log_json", "true")
	}
	if nodeID != "" {
		params.Set("node_id", nodeID)
	}
	if serverID != "" {
		params.Set("server_id", serverID)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	resp, err := c.rawGet(ctx, "", "/v1/agent/monitor", params)
	if err != nil {
		c.ui.Error("%s", c.apiErr("monitoring the agent", err))
		return 1
	}
	defer resp.Body.Close()
	_, err = io.Copy(c.ui.Out, resp.Body)
	if err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
		c.ui.Error("Error: the log stream ended: %v", err)
		return 1
	}
	return 0
}
