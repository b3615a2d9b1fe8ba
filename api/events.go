package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// Event is one change on the event stream (GET /v1/event/stream).
// Payload holds the changed object under its type's name ("Job",
// "Allocation", "Evaluation", "Node", "CSIVolume", "CSIPlugin", or Berth's
// "Claim"), left raw for the caller to decode.
type Event struct {
	Topic      string
	Type       string
	Key        string
	Namespace  string
	FilterKeys []string
	Index      uint64
	Payload    map[string]json.RawMessage
}

// Events is the events of one Raft index. A heartbeat has Index 0 and no
// events.
type Events struct {
	Index  uint64
	Events []Event
}

// EventClaim is the payload of a Claim event: one claim transition.
type EventClaim struct {
	VolumeID  string
	Namespace string
	PluginID  string
	AllocID   string
	NodeID    string
	JobID     string
	From, To  CSIClaimStep
	Error     string
	Attempts  int
	Reason    string
	Time      int64 // unix ns
}

// EventStream subscribes to the event stream and calls fn with each batch
// (heartbeats are skipped) until ctx ends, fn returns an error, or the
// server ends the stream. topics are "Topic" or "Topic:Key" (nil: all);
// index resumes after that Raft index (0: from now). The server ends a
// stream whose reader fell too far behind with a last event of topic
// "Berth", type "SubscriptionDropped".
func (c *Client) EventStream(ctx context.Context, topics []string, index uint64, q *QueryOptions, fn func(Events) error) error {
	params := c.queryParams(q)
	for _, t := range topics {
		params.Add("topic", t)
	}
	if index > 0 {
		params.Set("index", strconv.FormatUint(index, 10))
	}
	req, err := c.newRequest(ctx, http.MethodGet, "/v1/event/stream", params, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("GET /v1/event/stream: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return &StatusError{Code: resp.StatusCode, Body: string(b)}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var ev Events
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("decoding event stream line: %w", err)
		}
		if len(ev.Events) == 0 {
			continue
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading event stream: %w", err)
	}
	return nil
}
