package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/berth-io/berth/api"
)

func init() {
	register("event stream", func(ui *UI) Command { return &EventStreamCommand{Meta: Meta{ui: ui}} })
}

// EventStreamCommand prints the servers' event stream until interrupted.
type EventStreamCommand struct {
	Meta
	ctx context.Context // tests end the stream through it; nil: until SIGINT
}

func (c *EventStreamCommand) Synopsis() string { return "Follow the cluster's event stream" }

func (c *EventStreamCommand) Help() string {
	return `Usage: berth event stream [options]

  Prints changes as the servers commit them, one line per event, until
  interrupted. Topics: Job, Allocation, Evaluation, Node, Deployment,
  CSIVolume, CSIPlugin, and Claim (every step of every volume claim, with
  its error and attempts).

Event Stream Options:

  -topic <Topic[:Key]>
    Only this topic, or this object of it (a job ID, a volume ID, an alloc
    or node ID for Claim). Repeatable. Default: every topic.

  -index <n>
    Resume after this Raft index (the Index of the last line you saw).

  -json
    Print each batch as the API sends it, one JSON object per line.
` + sharedHelp(false)
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func (c *EventStreamCommand) Run(args []string) int {
	fs := c.flagSet("event stream", false)
	var topics multiFlag
	var index uint64
	var asJSON bool
	fs.Var(&topics, "topic", "")
	fs.Uint64Var(&index, "index", 0, "")
	fs.BoolVar(&asJSON, "json", false, "")
	client, code := c.startNoArgs(fs, args, c.Help())
	if client == nil {
		return code
	}
	ctx := c.ctx
	if ctx == nil {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
	}
	err := client.EventStream(ctx, topics, index, nil, func(b api.Events) error {
		if asJSON {
			line, err := json.Marshal(b)
			if err != nil {
				return err
			}
			c.ui.Output("%s", line)
			return nil
		}
		for _, e := range b.Events {
			c.ui.Output("%s", eventLine(e))
		}
		return nil
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		c.ui.Error("%s", c.apiErr("following the event stream", err))
		return 1
	}
	return 0
}

// eventLine is one event in words: index, topic, type, key, and for a
// claim its transition.
func eventLine(e api.Event) string {
	ns := ""
	if e.Namespace != "" && e.Namespace != "default" {
		ns = " (namespace " + e.Namespace + ")"
	}
	head := fmt.Sprintf("%d %s %s %s%s", e.Index, e.Topic, e.Type, e.Key, ns)
	if raw, ok := e.Payload["Claim"]; ok {
		var c api.EventClaim
		if json.Unmarshal(raw, &c) == nil {
			return head + ": " + claimEventText(c)
		}
	}
	if raw, ok := e.Payload["Error"]; ok {
		var msg string
		_ = json.Unmarshal(raw, &msg)
		return head + ": " + msg
	}
	return head
}

func claimEventText(c api.EventClaim) string {
	step := string(c.To)
	switch {
	case c.From == "":
		step = "new claim " + step
	case c.From == c.To:
		step = string(c.To) + " again"
	default:
		step = string(c.From) + " -> " + string(c.To)
	}
	s := fmt.Sprintf("alloc %s on node %s: %s", shortID(c.AllocID, false), shortID(c.NodeID, false), step)
	if c.Error != "" {
		s += fmt.Sprintf(" (attempt %d: %s)", c.Attempts, oneLine(c.Error))
	}
	if c.Reason != "" {
		s += " [" + c.Reason + "]"
	}
	return s
}
