package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

// Agent is one `berth agent` process: its config file, data dir and log
// file are under the harness's Root and survive restarts, so a restarted
// agent is the same server (Raft on disk) or the same client node (client
// state, node ID).
//
// A server listens on a fixed RPC port picked before it first starts
// (peers and clients know it by that address, and Raft remembers it); every
// agent's HTTP port is 0 in its config and is read from what the agent
// prints when it is up ("HTTP API: http://..."), again after each restart.
type Agent struct {
	h       *Harness
	Name    string
	DataDir string
	// ConfigPath is the agent's HCL config; LogPath gets its stdout and
	// stderr, appended across restarts.
	ConfigPath, LogPath string
	// RPCAddr is a server's RPC address ("" for a client-only agent).
	RPCAddr  string
	IsServer bool
	IsClient bool

	// lock guards the fields below.
	lock sync.Mutex
	cmd  *exec.Cmd
	// exited is closed once the current process has exited and been
	// collected; exitErr is what Wait said.
	exited   chan struct{}
	exitErr  error
	httpAddr string
	// logOffset is the size of LogPath when the current process started:
	// its own output is what follows.
	logOffset int64
}

// ServerConfig returns the HCL config of a server with a fixed RPC port
// and bootstrap_expect/server_join for a cluster of len(join) servers.
func ServerConfig(name, dataDir string, rpcPort int, join []string) string {
	return fmt.Sprintf(`name      = %s
data_dir  = %s
bind_addr = "127.0.0.1"
log_level = "DEBUG"

ports {
  http = 0
  rpc  = %d
}

server {
  enabled          = true
  bootstrap_expect = %d
  server_join      = %s
}
`, hclString(name), hclString(dataDir), rpcPort, len(join), hclList(join))
}

// ClientConfig returns the HCL config of a client of the given servers
// (RPC addresses) with raw_exec enabled (the plugin jobs use it; exec is
// always on).
func ClientConfig(name, dataDir string, servers []string) string {
	return fmt.Sprintf(`name      = %s
data_dir  = %s
bind_addr = "127.0.0.1"
log_level = "DEBUG"

ports {
  http = 0
  rpc  = 0
}

client {
  enabled            = true
  servers            = %s
  csi_stats_interval = "1s"
}

plugin "raw_exec" {}
`, hclString(name), hclString(dataDir), hclList(servers))
}

// NewServer makes (does not start) a server agent named name that is one
// of the servers whose RPC addresses are join; rpcAddr, its own address,
// is one of them.
func (h *Harness) NewServer(t testing.TB, name, rpcAddr string, join []string) *Agent {
	t.Helper()
	_, port, err := net.SplitHostPort(rpcAddr)
	must.NoError(t, err)
	p, err := strconv.Atoi(port)
	must.NoError(t, err)
	a := h.newAgent(t, name, func(dataDir string) string { return ServerConfig(name, dataDir, p, join) })
	a.RPCAddr, a.IsServer = rpcAddr, true
	return a
}

// NewClient makes (does not start) a client agent of the given servers.
func (h *Harness) NewClient(t testing.TB, name string, servers []string) *Agent {
	t.Helper()
	a := h.newAgent(t, name, func(dataDir string) string { return ClientConfig(name, dataDir, servers) })
	a.IsClient = true
	return a
}

func (h *Harness) newAgent(t testing.TB, name string, config func(dataDir string) string) *Agent {
	t.Helper()
	dir := h.Path(name)
	must.NoError(t, os.MkdirAll(dir, 0o700))
	a := &Agent{
		h: h, Name: name, DataDir: dir,
		ConfigPath: h.Path("files", name+".hcl"),
		LogPath:    h.Path("logs", name+".log"),
	}
	must.NoError(t, os.MkdirAll(filepath.Dir(a.ConfigPath), 0o755))
	must.NoError(t, os.MkdirAll(filepath.Dir(a.LogPath), 0o755))
	must.NoError(t, os.WriteFile(a.ConfigPath, []byte(config(dir)), 0o644))
	h.addAgent(a)
	return a
}

// Start starts the agent process and waits until its HTTP API is up (a
// server may not know a leader yet: see Cluster.WaitForLeader). It fails
// the test, quoting the log, when the agent exits or does not come up.
func (a *Agent) Start(t testing.TB) {
	t.Helper()
	a.lock.Lock()
	if a.cmd != nil {
		a.lock.Unlock()
		t.Fatalf("agent %s: Start while it runs (pid %d)", a.Name, a.cmd.Process.Pid)
	}
	f, err := os.OpenFile(a.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		a.lock.Unlock()
		t.Fatalf("agent %s: %v", a.Name, err)
	}
	fmt.Fprintf(f, "==== e2e: %s starting agent %s ====\n", time.Now().Format(time.RFC3339Nano), a.Name)
	fi, _ := f.Stat()
	cmd := exec.Command(a.h.Berth, "agent", "-config", a.ConfigPath)
	cmd.Dir = a.DataDir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), markerEnv+"="+a.h.Root)
	// Its own process group: a ^C at the terminal is the test's to handle.
	// Pdeathsig: an agent never outlives a test process that died without
	// running its cleanups (a timeout, a crash).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	f.Close()
	if err != nil {
		a.lock.Unlock()
		t.Fatalf("agent %s: starting %s: %v", a.Name, a.h.Berth, err)
	}
	exited := make(chan struct{})
	a.cmd, a.exited, a.exitErr, a.httpAddr, a.logOffset = cmd, exited, nil, "", fi.Size()
	// This goroutine only collects the process; whoever stops the agent
	// waits for it through exited.
	go func() {
		err := cmd.Wait()
		a.lock.Lock()
		a.exitErr = err
		a.lock.Unlock()
		close(exited)
	}()
	a.lock.Unlock()

	waitFor(t, agentStartTimeout, fmt.Sprintf("agent %s to print its HTTP address", a.Name), func() (bool, error) {
		select {
		case <-exited:
			a.lock.Lock()
			err := a.exitErr
			a.lock.Unlock()
			t.Fatalf("agent %s exited while starting: %v\n%s", a.Name, err, a.LogSinceStart())
		default:
		}
		addr := a.findHTTPAddr()
		if addr == "" {
			return false, errors.New("no \"HTTP API:\" line in its output yet")
		}
		a.lock.Lock()
		a.httpAddr = addr
		a.lock.Unlock()
		return true, nil
	})
	t.Logf("agent %s started: pid %d, http %s, rpc %s", a.Name, cmd.Process.Pid, a.HTTPAddr(), a.RPCAddr)
}

// findHTTPAddr reads "    HTTP API: http(s)://<addr>" from the current
// process's output.
func (a *Agent) findHTTPAddr() string {
	sc := bufio.NewScanner(strings.NewReader(a.LogSinceStart()))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "HTTP API: "); ok {
			return strings.TrimPrefix(strings.TrimPrefix(rest, "http://"), "https://")
		}
	}
	return ""
}

// LogSinceStart is the current (or last) process's output.
func (a *Agent) LogSinceStart() string {
	a.lock.Lock()
	off := a.logOffset
	a.lock.Unlock()
	b, err := os.ReadFile(a.LogPath)
	if err != nil || int64(len(b)) < off {
		return ""
	}
	return string(b[off:])
}

// Running reports whether the agent's process runs.
func (a *Agent) Running() bool {
	a.lock.Lock()
	defer a.lock.Unlock()
	if a.cmd == nil {
		return false
	}
	select {
	case <-a.exited:
		return false
	default:
		return true
	}
}

// PID is the current process's pid (0 when not started).
func (a *Agent) PID() int {
	a.lock.Lock()
	defer a.lock.Unlock()
	if a.cmd == nil {
		return 0
	}
	return a.cmd.Process.Pid
}

// HTTPAddr is the current process's HTTP address (host:port).
func (a *Agent) HTTPAddr() string {
	a.lock.Lock()
	defer a.lock.Unlock()
	return a.httpAddr
}

// API returns an API client for the agent's HTTP address.
func (a *Agent) API(t testing.TB) *api.Client {
	t.Helper()
	addr := a.HTTPAddr()
	if addr == "" {
		t.Fatalf("agent %s has no HTTP address: not started", a.Name)
	}
	// BERTH_TOKEN (set by ACL scenarios) rides along, as it does for the CLI.
	c, err := api.NewClient(&api.Config{Address: "http://" + addr, Token: os.Getenv("BERTH_TOKEN")})
	must.NoError(t, err)
	return c
}

// Kill SIGKILLs the agent and waits until it is gone. Its tasks keep
// running: their executors are detached.
func (a *Agent) Kill(t testing.TB) {
	t.Helper()
	if !a.signal(syscall.SIGKILL) {
		t.Fatalf("agent %s: Kill while it does not run", a.Name)
	}
	if !a.waitExit(agentStopTimeout) {
		t.Fatalf("agent %s survived SIGKILL for %v", a.Name, agentStopTimeout)
	}
	t.Logf("agent %s killed", a.Name)
}

// Stop interrupts the agent (SIGINT, a graceful shutdown) and waits until
// it has exited. An agent that takes too long is killed and fails the
// test; one that exits with an error fails it too: shutting down must
// work.
func (a *Agent) Stop(t testing.TB) {
	t.Helper()
	if !a.signal(syscall.SIGINT) {
		t.Fatalf("agent %s: Stop while it does not run", a.Name)
	}
	start := time.Now()
	if !a.waitExit(agentStopTimeout) {
		a.kill()
		t.Fatalf("agent %s did not stop within %v of SIGINT; killed it\n%s", a.Name, agentStopTimeout, tailString(a.LogSinceStart(), 8<<10))
	}
	a.lock.Lock()
	err := a.exitErr
	a.lock.Unlock()
	if err != nil {
		t.Errorf("agent %s exited with %v after SIGINT\n%s", a.Name, err, tailString(a.LogSinceStart(), 8<<10))
	}
	t.Logf("agent %s stopped in %v", a.Name, time.Since(start).Round(time.Millisecond))
}

// Restart stops a running agent (SIGINT) and starts it again with the same
// config and data dir; an agent already killed or stopped is just started.
func (a *Agent) Restart(t testing.TB) {
	t.Helper()
	if a.Running() {
		a.Stop(t)
	}
	a.reset()
	a.Start(t)
}

// reset forgets the exited process so the agent can start again.
func (a *Agent) reset() {
	a.lock.Lock()
	defer a.lock.Unlock()
	if a.cmd != nil {
		select {
		case <-a.exited:
			a.cmd = nil
		default:
		}
	}
}

// signal sends sig to the running process; false when none runs.
func (a *Agent) signal(sig syscall.Signal) bool {
	a.lock.Lock()
	defer a.lock.Unlock()
	if a.cmd == nil {
		return false
	}
	select {
	case <-a.exited:
		return false
	default:
	}
	return a.cmd.Process.Signal(sig) == nil
}

func (a *Agent) waitExit(timeout time.Duration) bool {
	a.lock.Lock()
	exited := a.exited
	a.lock.Unlock()
	if exited == nil {
		return true
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-exited:
		return true
	case <-timer.C:
		return false
	}
}

// kill is Kill for cleanup: no test to fail.
func (a *Agent) kill() {
	if a.signal(syscall.SIGKILL) {
		a.waitExit(agentStopTimeout)
	}
}

// LogLines returns the lines of the current process's output that contain
// s (log lines, e.g. `re-using the volume's mount`).
func (a *Agent) LogLines(s string) []string {
	var out []string
	for _, l := range strings.Split(a.LogSinceStart(), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

func tailString(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return "[...]" + s[len(s)-max:]
}
