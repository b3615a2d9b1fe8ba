package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/berth-io/berth/nomad/stream"
	"github.com/berth-io/berth/nomad/structs"
)

// eventHeartbeat is how often an idle event stream writes "{}", so
// proxies and clients know the connection is alive.
var eventHeartbeat = 10 * time.Second

// eventStreamRequest serves GET /v1/event/stream: newline-delimited JSON,
// one {"Index":N,"Events":[...]} line per Raft index with wanted events,
// "{}" heartbeats, until the client goes away. Query: topic=Topic[:Key]
// (repeatable, "*" for any; none means every topic), index=N (resume
// after N), namespace= ("*" for all; default "default").
//
// Every server publishes the same events (nomad/stream), so the agent
// serves the stream from its own server; a client-only agent cannot.
func (s *HTTPServer) eventStreamRequest(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	srv := s.agent.Server()
	if srv == nil {
		return nil, CodedError(http.StatusBadRequest,
			"the event stream is served by servers: point BERTH_ADDR at a server agent")
	}
	q := r.URL.Query()
	req := stream.Request{Namespace: q.Get("namespace"), Topics: map[string][]string{}}
	if req.Namespace == "" {
		req.Namespace = structs.DefaultNamespace
	}
	if idx := q.Get("index"); idx != "" {
		n, err := strconv.ParseUint(idx, 10, 64)
		if err != nil {
			return nil, CodedError(http.StatusBadRequest, fmt.Sprintf("invalid index %q: want an integer", idx))
		}
		req.Index = n
	}
	for _, t := range q["topic"] {
		topic, key, _ := strings.Cut(t, ":")
		if key == "" {
			key = "*"
		}
		req.Topics[topic] = append(req.Topics[topic], key)
	}
	if len(req.Topics) == 0 {
		req.Topics[stream.TopicAll] = []string{"*"}
	}
	if err := stream.ValidateTopics(req.Topics); err != nil {
		return nil, CodedError(http.StatusBadRequest, err.Error())
	}
	if err := s.authorizeTopics(r, req); err != nil {
		return nil, err
	}

	sub := srv.Events().Subscribe(req)
	defer sub.Close()

	// A stream outlives the server's write timeout.
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()

	enc := json.NewEncoder(w)
	region := s.agent.config.Region
	for {
		ctx, cancel := context.WithTimeout(r.Context(), eventHeartbeat)
		b, err := sub.Next(ctx)
		cancel()
		switch {
		case err == nil:
			if werr := enc.Encode(eventsToAPI(b, region)); werr != nil {
				return nil, nil // the client went away
			}
		case errors.Is(err, stream.ErrDropped):
			// The final line says why the stream ends and how to go on.
			_ = enc.Encode(droppedEvent(err))
			_ = rc.Flush()
			return nil, nil
		case r.Context().Err() != nil:
			return nil, nil
		case errors.Is(err, context.DeadlineExceeded):
			if _, werr := w.Write([]byte("{}\n")); werr != nil {
				return nil, nil
			}
		default:
			return nil, nil
		}
		if rc.Flush() != nil {
			return nil, nil
		}
	}
}

// authorizeTopics checks the token against every topic family asked for.
func (s *HTTPServer) authorizeTopics(r *http.Request, req stream.Request) error {
	endpoints := map[string]string{
		stream.TopicJob: structs.HTTPEventStream, stream.TopicAllocation: structs.HTTPEventStream,
		stream.TopicEvaluation: structs.HTTPEventStream, stream.TopicDeployment: structs.HTTPEventStream,
		stream.TopicNode: structs.HTTPEventStreamNode, stream.TopicCSIVolume: structs.HTTPEventStreamVolume,
		stream.TopicClaim: structs.HTTPEventStreamVolume, stream.TopicCSIPlugin: structs.HTTPEventStreamPlugin,
	}
	need := map[string]bool{}
	for t := range req.Topics {
		if t == stream.TopicAll {
			for _, e := range endpoints {
				need[e] = true
			}
			continue
		}
		need[endpoints[t]] = true
	}
	// The stream is not filtered event by event against the token's
	// policies: every namespace at once needs a management token, any
	// other token subscribes per namespace.
	if req.Namespace == structs.AllNamespaces {
		if err := s.authorizeHTTP(r, structs.HTTPEventStreamAllNamespaces, ""); err != nil {
			return err
		}
	}
	for _, e := range []string{structs.HTTPEventStream, structs.HTTPEventStreamNode,
		structs.HTTPEventStreamVolume, structs.HTTPEventStreamPlugin} {
		if need[e] {
			if err := s.authorizeHTTP(r, e, req.Namespace); err != nil {
				return err
			}
		}
	}
	return nil
}

// apiEvent is an event on the wire (Nomad's shape).
type apiEvent struct {
	Topic      string
	Type       string
	Key        string
	Namespace  string
	FilterKeys []string
	Index      uint64
	Payload    map[string]any
}

type apiEvents struct {
	Index  uint64
	Events []apiEvent
}

// eventsToAPI converts a batch, its payloads into the API's types:
// secrets are stripped as on every read.
func eventsToAPI(b stream.Batch, region string) apiEvents {
	out := apiEvents{Index: b.Index, Events: make([]apiEvent, 0, len(b.Events))}
	for _, e := range b.Events {
		out.Events = append(out.Events, apiEvent{Topic: e.Topic, Type: e.Type, Key: e.Key, Namespace: e.Namespace,
			FilterKeys: e.FilterKeys, Index: e.Index, Payload: payloadToAPI(e.Payload, region)})
	}
	return out
}

func payloadToAPI(p any, region string) map[string]any {
	switch v := p.(type) {
	case *structs.Job:
		return map[string]any{"Job": jobToAPI(v, region)}
	case *structs.Allocation:
		return map[string]any{"Allocation": allocToAPI(v, region)}
	case *structs.Evaluation:
		return map[string]any{"Evaluation": evalToAPI(v)}
	case *structs.Node:
		return map[string]any{"Node": nodeToAPI(v)}
	case *structs.CSIVolume:
		return map[string]any{"CSIVolume": volumeToAPI(v, pluginHealth{}, nil)}
	case *structs.CSIPlugin:
		return map[string]any{"CSIPlugin": pluginToAPI(v, nil)}
	case *stream.Claim:
		return map[string]any{"Claim": v}
	}
	return nil
}

// droppedEvent is the last line of a stream whose reader fell behind.
func droppedEvent(err error) apiEvents {
	return apiEvents{Events: []apiEvent{{Topic: "Berth", Type: "SubscriptionDropped", Payload: map[string]any{
		"Error": err.Error() + ": the reader fell further behind than the server's event buffer; resubscribe with ?index= the last index seen",
	}}}}
}
