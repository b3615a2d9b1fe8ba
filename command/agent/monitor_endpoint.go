package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/nomad/structs"
)

// GET /v1/agent/monitor?log_level=<trace|debug|info|warn|error>&log_json=true&plain=true
//
// Streams this agent's own log from the moment of the request until the
// caller goes away. The agent's logger is an hclog InterceptLogger: each
// request registers a sink at its own level (so a debug monitor works on
// an agent that logs at info) and removes it at the end. Without plain,
// the body is a sequence of JSON frames {"Data": <base64>} as Nomad's
// StreamFrame; the upstream client's Agent().Monitor decodes them.
// node_id and server_id (Nomad forwards to that agent) are refused unless
// they name this agent. Authorization: agent read.
//
// A slow reader never slows the agent: lines wait in a bounded buffer,
// and when it is full they are dropped and the stream says how many.

// monitorBuffer is how many log lines a monitor holds for a slow reader.
const monitorBuffer = 512

// monitorFlushEvery bounds how long a line waits before it is sent.
const monitorFlushEvery = 200 * time.Millisecond

// monitorSink receives log lines from the logger without ever blocking it.
type monitorSink struct {
	ch chan []byte
	// lock guards dropped.
	lock    sync.Mutex
	dropped int
}

func (m *monitorSink) Write(p []byte) (int, error) {
	line := append([]byte(nil), p...)
	select {
	case m.ch <- line:
	default:
		m.lock.Lock()
		m.dropped++
		m.lock.Unlock()
	}
	return len(p), nil
}

func (m *monitorSink) takeDropped() int {
	m.lock.Lock()
	defer m.lock.Unlock()
	n := m.dropped
	m.dropped = 0
	return n
}

type monitorFrame struct {
	Data []byte `json:",omitempty"`
}

func (s *HTTPServer) agentMonitor(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	if err := s.authorizeHTTP(r, structs.HTTPAgentMonitor, ""); err != nil {
		return nil, err
	}
	q := r.URL.Query()
	level := hclog.Info
	if v := q.Get("log_level"); v != "" {
		level = hclog.LevelFromString(v)
		if level == hclog.NoLevel {
			return nil, CodedError(http.StatusBadRequest, fmt.Sprintf("invalid log_level %q: want trace, debug, info, warn or error", v))
		}
	}
	if id := q.Get("node_id"); id != "" && (s.agent.client == nil || id != s.agent.client.NodeID()) {
		return nil, CodedError(http.StatusBadRequest, fmt.Sprintf("node %s is not this agent's node: run the monitor against that node's agent (its HTTPAddr in node status)", id))
	}
	if id := q.Get("server_id"); id != "" && id != s.agent.config.Name {
		return nil, CodedError(http.StatusBadRequest, fmt.Sprintf("server %q is not this agent (%q): run the monitor against that server's agent (server members lists them)", id, s.agent.config.Name))
	}
	jsonLog, _ := strconv.ParseBool(q.Get("log_json"))
	plain, _ := strconv.ParseBool(q.Get("plain"))
	il := s.agent.intercept
	if il == nil {
		return nil, CodedError(http.StatusNotImplemented, "this agent's logger cannot be monitored")
	}

	sink := &monitorSink{ch: make(chan []byte, monitorBuffer)}
	adapter := hclog.NewSinkAdapter(&hclog.LoggerOptions{Level: level, Output: sink, JSONFormat: jsonLog})
	il.RegisterSink(adapter)
	defer il.DeregisterSink(adapter)

	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a stream, not a reply
	if plain {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	enc := json.NewEncoder(w)
	var buf bytes.Buffer
	send := func() error {
		if n := sink.takeDropped(); n > 0 {
			fmt.Fprintf(&buf, "[monitor: %d log lines dropped: the reader fell behind]\n", n)
		}
		if buf.Len() == 0 {
			return nil
		}
		var err error
		if plain {
			_, err = w.Write(buf.Bytes())
		} else {
			err = enc.Encode(monitorFrame{Data: buf.Bytes()})
		}
		buf.Reset()
		if err == nil {
			err = rc.Flush()
		}
		return err
	}
	t := time.NewTicker(monitorFlushEvery)
	defer t.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil, nil
		case line := <-sink.ch:
			buf.Write(line)
			if buf.Len() < 32<<10 {
				continue
			}
		case <-t.C:
		}
		if err := send(); err != nil {
			return nil, nil // the caller went away
		}
	}
}
