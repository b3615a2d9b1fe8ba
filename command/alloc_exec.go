package command

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/sys/unix"

	"github.com/berth-io/berth/api"
)

func init() {
	register("alloc exec", func(ui *UI) Command { return &AllocExecCommand{Meta: Meta{ui: ui}} })
}

// AllocExecCommand runs a command inside a running task.
type AllocExecCommand struct {
	Meta
	// stdin is the command's input; nil is os.Stdin.
	stdin io.Reader
}

func (c *AllocExecCommand) Synopsis() string { return "Run a command in a running task" }

func (c *AllocExecCommand) Help() string {
	return `Usage: berth alloc exec [options] <allocation> <command> [<args>...]

  Runs a command inside a running task of an allocation, in the task's own
  environment: for an exec task inside its namespaces and root, with its
  volumes mounted where the task sees them, as the task's user; for a
  raw_exec task in the task directory. The command's output and exit code
  are this command's. Options go before the allocation: everything after
  the command is passed to it.

Exec Options:

  -task=<name>
    The task to run in; needed when the allocation runs several tasks.

  -job
    Take the first argument as a job ID and use an allocation of that job
    (a running one when there is one).

  -i
    Pass standard input to the command (default true).

  -t
    Run the command on a terminal (default: when standard input is one).
` + sharedHelp(false)
}

func (c *AllocExecCommand) Run(args []string) int {
	fs := c.flagSet("alloc exec", false)
	var task string
	var byJob bool
	var stdinOn, ttyOn bool
	fs.StringVar(&task, "task", "", "")
	fs.BoolVar(&byJob, "job", false, "")
	fs.BoolVar(&stdinOn, "i", true, "")
	fs.BoolVar(&ttyOn, "t", false, "")
	// Not parseArgs: flags after the allocation belong to the command
	// (berth alloc exec <alloc> ls -l).
	if err := fs.Parse(args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	args = fs.Args()
	if len(args) < 2 {
		return flagErr(c.ui, c.Help(), "This command takes an allocation ID (or with -job a job ID) and the command to run.")
	}
	in := c.stdin
	if in == nil {
		in = os.Stdin
	}
	tty := ttyOn
	ttySet := false
	fs.Visit(func(f *flag.Flag) { ttySet = ttySet || f.Name == "t" })
	if !ttySet {
		f, ok := in.(*os.File)
		tty = ok && stdinOn && isTerminal(f)
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	lc := &AllocLogsCommand{Meta: c.Meta}
	var alloc *api.Allocation
	if byJob {
		alloc, err = lc.jobAlloc(client, args[0])
	} else {
		alloc, err = lc.resolveAlloc(client, args[0])
	}
	if err != nil {
		c.ui.Error("%v", err)
		return 1
	}
	if task, err = pickTask(alloc, task, c.verbose, "berth alloc exec -task <task> %s <command>"); err != nil {
		c.ui.Error("%v", err)
		return 1
	}
	addrs, err := c.logAddrs(client, alloc)
	if err != nil {
		c.ui.Error("%v", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	conn, err := c.dialExec(ctx, addrs, alloc.ID, task, args[1:], tty)
	if err != nil {
		c.ui.Error("Error running %q in task %q of allocation %s: %v", args[1], task, shortID(alloc.ID, c.verbose), err)
		return 1
	}
	defer conn.Close()
	if !stdinOn {
		in = nil
	}
	code, err := runExecSession(ctx, conn, in, c.ui.Out, c.ui.Err, tty)
	if err != nil {
		c.ui.Error("Error running %q in task %q of allocation %s: %v", args[1], task, shortID(alloc.ID, c.verbose), err)
		return 1
	}
	return code
}

// dialExec opens the exec websocket on the first agent that answers:
// the node's own agent, then the configured one.
func (c *AllocExecCommand) dialExec(ctx context.Context, addrs []string, allocID, task string, argv []string, tty bool) (*websocket.Conn, error) {
	cfg := c.apiConfig()
	cmdJSON, err := json.Marshal(argv)
	if err != nil {
		return nil, err
	}
	params := url.Values{"task": {task}, "command": {string(cmdJSON)}, "tty": {fmt.Sprint(tty)}}
	if cfg.Namespace != "" {
		params.Set("namespace", cfg.Namespace)
	}
	hdr := http.Header{}
	if cfg.Token != "" {
		hdr.Set("X-Nomad-Token", cfg.Token)
	}
	var lastErr error
	for _, addr := range addrs {
		u, dial, tc, err := agentTarget(cfg, addr)
		if err != nil {
			return nil, err
		}
		d := websocket.Dialer{HandshakeTimeout: 30 * time.Second, NetDialContext: dial, TLSClientConfig: tc}
		if u.Scheme == "https" {
			u.Scheme = "wss"
		} else {
			u.Scheme = "ws"
		}
		u.Path = "/v1/client/allocation/" + allocID + "/exec"
		u.RawQuery = params.Encode()
		conn, resp, err := d.DialContext(ctx, u.String(), hdr)
		if err == nil {
			return conn, nil
		}
		if resp != nil {
			// The agent answered: its answer stands.
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			return nil, &api.StatusError{Code: resp.StatusCode, Body: string(b)}
		}
		lastErr = err
	}
	return nil, fmt.Errorf("%w\nalloc exec runs on the agent of the node that runs the allocation; check that it is up and reachable from here", lastErr)
}

// execIn and execOut are the websocket frames (see the agent's
// client_exec_endpoint.go).
type execIn struct {
	Stdin *struct {
		Data  []byte `json:"data,omitempty"`
		Close bool   `json:"close,omitempty"`
	} `json:"stdin,omitempty"`
	TTYSize *struct {
		Height int `json:"height"`
		Width  int `json:"width"`
	} `json:"tty_size,omitempty"`
}

type execOut struct {
	Stdout *struct {
		Data []byte `json:"data"`
	} `json:"stdout"`
	Stderr *struct {
		Data []byte `json:"data"`
	} `json:"stderr"`
	Exited bool `json:"exited"`
	Result *struct {
		ExitCode int `json:"exit_code"`
	} `json:"result"`
}

// runExecSession sends in (nil: nothing, then EOF) and prints the output
// until the exit frame, whose code it returns.
func runExecSession(ctx context.Context, conn *websocket.Conn, in io.Reader, out, errOut io.Writer, tty bool) (int, error) {
	var wlock sync.Mutex
	send := func(f *execIn) {
		wlock.Lock()
		defer wlock.Unlock()
		conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
		conn.WriteJSON(f) // a failed send shows as a failed read below
	}
	if tty {
		if f, ok := in.(*os.File); ok && isTerminal(f) {
			restore, err := makeRaw(f)
			if err != nil {
				return 1, fmt.Errorf("setting the terminal to raw mode: %w", err)
			}
			defer restore()
			sendSize := func() {
				if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil {
					fr := &execIn{}
					fr.TTYSize = &struct {
						Height int `json:"height"`
						Width  int `json:"width"`
					}{int(ws.Row), int(ws.Col)}
					send(fr)
				}
			}
			sendSize()
			winch := make(chan os.Signal, 1)
			signal.Notify(winch, syscall.SIGWINCH)
			defer signal.Stop(winch)
			go func() {
				for {
					select {
					case <-ctx.Done():
						return
					case _, ok := <-winch:
						if !ok {
							return
						}
						sendSize()
					}
				}
			}()
		}
	}
	// stdin: this goroutine may stay blocked in Read when the command
	// ends first; the process exits right after.
	go func() {
		if in != nil {
			buf := make([]byte, 4096)
			for {
				n, err := in.Read(buf)
				if n > 0 {
					fr := &execIn{}
					fr.Stdin = &struct {
						Data  []byte `json:"data,omitempty"`
						Close bool   `json:"close,omitempty"`
					}{Data: append([]byte(nil), buf[:n]...)}
					send(fr)
				}
				if err != nil {
					break
				}
			}
		}
		fr := &execIn{}
		fr.Stdin = &struct {
			Data  []byte `json:"data,omitempty"`
			Close bool   `json:"close,omitempty"`
		}{Close: true}
		send(fr)
	}()
	stopClose := context.AfterFunc(ctx, func() { conn.Close() })
	defer stopClose()
	for {
		var f execOut
		if err := conn.ReadJSON(&f); err != nil {
			if ctx.Err() != nil {
				return 1, ctx.Err()
			}
			return 1, fmt.Errorf("the session ended before the command's exit code came: %w", err)
		}
		switch {
		case f.Stdout != nil:
			out.Write(f.Stdout.Data)
		case f.Stderr != nil:
			errOut.Write(f.Stderr.Data)
		case f.Exited && f.Result != nil:
			return f.Result.ExitCode, nil
		}
	}
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// makeRaw puts terminal f in raw mode (as cfmakeraw) and returns the
// function that restores it.
func makeRaw(f *os.File) (func(), error) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	raw := *old
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN] = 1
	raw.Cc[unix.VTIME] = 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return nil, err
	}
	return func() { unix.IoctlSetTermios(fd, unix.TCSETS, old) }, nil
}
