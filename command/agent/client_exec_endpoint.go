package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/berth-io/berth/client"
	"github.com/berth-io/berth/nomad/structs"
)

// alloc exec, as Nomad's:
//
//	GET /v1/client/allocation/:id/exec?task=<name>&command=<JSON array>&tty=true|false
//
// The request is upgraded to a websocket that carries JSON frames both
// ways (the shapes of the upstream api client's ExecStreamingInput and
// ExecStreamingOutput):
//
//	in:  {"stdin":{"data":<base64>}}  {"stdin":{"close":true}}
//	     {"tty_size":{"height":H,"width":W}}  {} (heartbeat)
//	out: {"stdout":{"data":<base64>}}  {"stderr":{"data":<base64>}}
//	     {"exited":true,"result":{"exit_code":N}}, then a close frame
//
// Served by the agent whose client runs the alloc (the upstream client
// dials the node's own address first, as Nomad's does); another agent
// answers 400 naming that node's address. The command runs in the task's
// environment: see client.Exec. Authorization: alloc-exec in the alloc's
// namespace, alloc-node-exec for a raw_exec task (which runs on the host
// as the agent's user).

// execFrameIn is one frame from the caller.
type execFrameIn struct {
	Stdin *struct {
		Data  []byte `json:"data,omitempty"`
		Close bool   `json:"close,omitempty"`
	} `json:"stdin,omitempty"`
	TTYSize *struct {
		Height int `json:"height,omitempty"`
		Width  int `json:"width,omitempty"`
	} `json:"tty_size,omitempty"`
}

// execIO is one frame of output.
type execIO struct {
	Data  []byte `json:"data,omitempty"`
	Close bool   `json:"close,omitempty"`
}

type execExit struct {
	ExitCode int `json:"exit_code"`
}

type execFrameOut struct {
	Stdout *execIO   `json:"stdout,omitempty"`
	Stderr *execIO   `json:"stderr,omitempty"`
	Exited bool      `json:"exited,omitempty"`
	Result *execExit `json:"result,omitempty"`
}

// execWriteTimeout bounds writing one frame to the caller.
const execWriteTimeout = 30 * time.Second

var execUpgrader = websocket.Upgrader{
	ReadBufferSize:  4096,
	WriteBufferSize: 4096,
	// Browsers send Origin; the API is token-authenticated, not cookie,
	// so a foreign origin gains nothing it could not do with the token.
	CheckOrigin: func(*http.Request) bool { return true },
}

func (s *HTTPServer) clientAllocExec(w http.ResponseWriter, r *http.Request, id string) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	q := r.URL.Query()
	var argv []string
	if err := json.Unmarshal([]byte(q.Get("command")), &argv); err != nil || len(argv) == 0 || argv[0] == "" {
		return nil, CodedError(http.StatusBadRequest, `missing or invalid command: pass command=<JSON array>, e.g. command=["/bin/sh"]`)
	}
	tty := false
	if v := q.Get("tty"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, CodedError(http.StatusBadRequest, fmt.Sprintf("invalid tty %q: want true or false", v))
		}
		tty = b
	}
	c := s.agent.client
	if c == nil {
		return nil, CodedError(http.StatusBadRequest, fmt.Sprintf("this agent runs no client; %s", s.whereIsAlloc(r, id)))
	}
	allocID := resolveLocalAlloc(c.AllocIDs(), id)
	task := q.Get("task")
	endpoint := structs.HTTPClientAllocExec
	if c.TaskDriver(allocID, task) == "raw_exec" {
		endpoint = structs.HTTPClientAllocNodeExec
	}
	args := structs.ACLAuthorizeRequest{Endpoint: endpoint, AllocID: allocID, QueryOptions: structs.QueryOptions{AuthToken: authToken(r)}}
	var reply structs.ACLAuthorizeResponse
	if err := s.agent.authRPC(structs.MethodACLAuthorize, &args, &reply); err != nil {
		return nil, err
	}
	sess, err := c.Exec(client.ExecRequest{AllocID: allocID, Task: task, Argv: argv, TTY: tty})
	if err != nil {
		return nil, execError(err, id, c.NodeID(), s.whereIsAlloc(r, id))
	}
	conn, err := execUpgrader.Upgrade(w, r, nil)
	if err != nil {
		// Upgrade has answered the caller.
		sess.Kill()
		sess.Wait()
		return nil, nil
	}
	// The server's write timeout is for replies, not for a session.
	conn.UnderlyingConn().SetDeadline(time.Time{})
	s.logger.Info("alloc exec", "alloc_id", allocID, "task", sess.Task, "accessor_id", reply.AccessorID, "command", argv[0])
	s.runExec(conn, sess)
	return nil, nil
}

// execError maps a client.Exec failure to an HTTP error.
func execError(err error, id, nodeID, where string) error {
	switch {
	case errors.Is(err, client.ErrUnknownAlloc):
		return CodedError(http.StatusBadRequest, fmt.Sprintf("alloc %s is not on this client (node %s); %s", id, nodeID, where))
	case errors.Is(err, client.ErrUnknownTask), errors.Is(err, client.ErrTaskRequired),
		errors.Is(err, client.ErrNoCommand):
		return CodedError(http.StatusBadRequest, err.Error())
	case errors.Is(err, client.ErrTaskNotRunning):
		return CodedError(http.StatusConflict, err.Error()+": exec needs a running task (berth alloc status shows its state)")
	}
	return err
}

// runExec pumps frames until the command exits or the caller goes away.
func (s *HTTPServer) runExec(conn *websocket.Conn, sess *client.ExecSession) {
	defer conn.Close()
	var wlock sync.Mutex
	send := func(f *execFrameOut) error {
		wlock.Lock()
		defer wlock.Unlock()
		conn.SetWriteDeadline(time.Now().Add(execWriteTimeout))
		return conn.WriteJSON(f)
	}
	// Output: one goroutine per stream, each ends at EOF.
	var outs sync.WaitGroup
	pump := func(rd io.Reader, frame func([]byte) *execFrameOut) {
		defer outs.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := rd.Read(buf)
			if n > 0 {
				if send(frame(append([]byte(nil), buf[:n]...))) != nil {
					sess.Kill() // the caller is gone
				}
			}
			if err != nil {
				return
			}
		}
	}
	outs.Add(1)
	go pump(sess.Stdout, func(b []byte) *execFrameOut { return &execFrameOut{Stdout: &execIO{Data: b}} })
	if sess.Stderr != nil {
		outs.Add(1)
		go pump(sess.Stderr, func(b []byte) *execFrameOut { return &execFrameOut{Stderr: &execIO{Data: b}} })
	}
	// Input: until the caller closes or the command ends (conn.Close
	// below ends ReadJSON).
	inDone := make(chan struct{})
	go func() {
		defer close(inDone)
		for {
			var f execFrameIn
			if err := conn.ReadJSON(&f); err != nil {
				sess.Kill()
				return
			}
			switch {
			case f.Stdin != nil:
				if len(f.Stdin.Data) > 0 {
					if _, err := sess.Stdin.Write(f.Stdin.Data); err != nil {
						continue // the command closed its stdin; output goes on
					}
				}
				if f.Stdin.Close && sess.Stderr != nil { // a terminal has no EOF to send
					sess.Stdin.Close()
				}
			case f.TTYSize != nil:
				if err := sess.Resize(f.TTYSize.Height, f.TTYSize.Width); err != nil {
					s.logger.Debug("alloc exec: resizing the terminal", "error", err)
				}
			}
		}
	}()
	outs.Wait()
	code, err := sess.Wait()
	if err != nil {
		s.logger.Warn("alloc exec: waiting for the command", "error", err)
	}
	if send(&execFrameOut{Exited: true, Result: &execExit{ExitCode: code}}) == nil {
		wlock.Lock()
		conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		wlock.Unlock()
	}
	conn.Close()
	<-inDone
}

// clientAllocRequest routes /v1/client/allocation/:id/<action>.
func (s *HTTPServer) clientAllocRequest(w http.ResponseWriter, r *http.Request) (any, error) {
	id, action, ok := strings.Cut(trimPath(r, "/v1/client/allocation/"), "/")
	if !ok || id == "" || strings.Contains(action, "/") {
		return nil, CodedError(http.StatusNotFound, "no such endpoint: "+r.URL.Path)
	}
	switch action {
	case "stats":
		return s.clientAllocStats(w, r, id)
	case "exec":
		return s.clientAllocExec(w, r, id)
	case "restart":
		return s.allocRestart(w, r, id)
	case "signal":
		return s.allocSignal(w, r, id)
	}
	return nil, CodedError(http.StatusNotFound, "no such endpoint: "+r.URL.Path)
}
