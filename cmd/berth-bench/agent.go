package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/helper/steptrace"
)

// agentConfig is the agent's config file: server and client in one
// process, Raft on disk under data_dir, loopback only, raw_exec on.
const agentConfig = `# Written by berth-bench.
name      = "berth-bench"
data_dir  = %q
bind_addr = "127.0.0.1"
log_level = "INFO"

ports {
  http = %d
  rpc  = %d
}

server {
  enabled          = true
  bootstrap_expect = 1
}

client {
  enabled = true
}

plugin "raw_exec" {
  config {
    enabled = true
  }
}
`

// Deadlines of the agent's start and stop.
const (
	agentReadyTimeout = time.Minute
	agentStopTimeout  = 30 * time.Second
)

// agent is one `berth agent` child process.
type agent struct {
	dataDir string
	rpcAddr string // servers of the cluster rows only
	logPath string
	api     *api.Client
	nodeID  string
	// tracePath is the file of the client's step trace.
	tracePath string

	cmd *exec.Cmd
	// done is closed once the process has exited and waitErr is set.
	done    chan struct{}
	waitErr error
}

// startAgent writes the config into dir and starts the agent, its output
// going to dir/agent.log, then waits until it has a leader and its node is
// ready with exec and raw_exec healthy.
func startAgent(ctx context.Context, bin, dir string) (*agent, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	dataDir := filepath.Join(dir, "data")
	a, err := spawnAgent(bin, dir, fmt.Sprintf(agentConfig, dataDir, ports[0], ports[1]), ports[0])
	if err != nil {
		return nil, err
	}
	a.dataDir = dataDir
	if err := a.waitReady(ctx); err != nil {
		return a, fmt.Errorf("waiting for the agent (log %s):\n%s\n%w", a.logPath, a.logTail(20), err)
	}
	return a, nil
}

// spawnAgent writes config to dir/agent.hcl and starts `berth agent` with
// it, its output going to dir/agent.log, and an api client for httpPort.
// It does not wait for anything.
func spawnAgent(bin, dir, config string, httpPort int) (*agent, error) {
	a := &agent{
		logPath: filepath.Join(dir, "agent.log"),
		done:    make(chan struct{}),
	}
	cfgPath := filepath.Join(dir, "agent.hcl")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		return nil, fmt.Errorf("writing the agent config: %w", err)
	}
	logFile, err := os.OpenFile(a.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating the agent log: %w", err)
	}
	defer logFile.Close() // the child has its own descriptor
	a.cmd = exec.Command(bin, "agent", "-config", cfgPath)
	// The client's step trace (steps.go); a binary without it ignores it.
	a.tracePath = filepath.Join(dir, "steps.trace")
	a.cmd.Env = append(os.Environ(), steptrace.EnvFile+"="+a.tracePath)
	a.cmd.Stdout, a.cmd.Stderr = logFile, logFile
	// Its own process group, so a Ctrl-C at the terminal reaches only the
	// bench, which stops the jobs before the agent. Should the bench die
	// without cleaning up, the agent gets SIGINT and shuts down.
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGINT}
	if err := a.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s agent: %w", bin, err)
	}
	go func() {
		a.waitErr = a.cmd.Wait()
		close(a.done)
	}()
	a.api, err = api.NewClient(&api.Config{Address: fmt.Sprintf("http://127.0.0.1:%d", httpPort)})
	if err != nil {
		a.stop()
		return nil, err
	}
	return a, nil
}

// kill sends SIGKILL and waits until the process is gone.
func (a *agent) kill() {
	_ = a.cmd.Process.Kill()
	<-a.done
}

// freePorts returns n distinct free TCP ports on 127.0.0.1. Another
// process could take one before the agent binds it; the agent then fails
// to start and says so.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// waitReady polls until the agent has a leader and a ready node whose exec
// and raw_exec drivers are healthy.
func (a *agent) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, agentReadyTimeout)
	defer cancel()
	return poll(ctx, a.done, func() (bool, error) {
		if l, err := a.api.Status().Leader(); err != nil || l == "" {
			return false, fmt.Errorf("no leader yet (%v)", err)
		}
		nodes, _, err := a.api.Nodes().List(nil)
		if err != nil {
			return false, err
		}
		for _, n := range nodes {
			if n.Status != api.NodeStatusReady {
				return false, fmt.Errorf("node %s is %s", n.ID, n.Status)
			}
			for _, d := range []string{"exec", "raw_exec"} {
				if di := n.Drivers[d]; di == nil || !di.Healthy {
					return false, fmt.Errorf("driver %s of node %s is not healthy yet", d, n.ID)
				}
			}
			a.nodeID = n.ID
			return true, nil
		}
		return false, errors.New("no client node registered yet")
	})
}

// pollInterval paces poll: prompt, and cheap for the agent.
const pollInterval = 20 * time.Millisecond

// poll calls cond until it returns true, ctx ends or exited is closed (the
// agent died); the error then says what cond last saw.
func poll(ctx context.Context, exited <-chan struct{}, cond func() (bool, error)) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-exited:
			return fmt.Errorf("the agent exited (last: %v)", last)
		case <-t.C:
		}
	}
}

// stop sends SIGINT and waits for the agent to exit, then SIGKILL.
func (a *agent) stop() error {
	if a.cmd == nil || a.cmd.Process == nil {
		return nil
	}
	select {
	case <-a.done:
		return nil
	default:
	}
	if err := a.cmd.Process.Signal(os.Interrupt); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("interrupting the agent: %w", err)
	}
	t := time.NewTimer(agentStopTimeout)
	defer t.Stop()
	select {
	case <-a.done:
		return nil
	case <-t.C:
	}
	_ = a.cmd.Process.Kill()
	<-a.done
	return fmt.Errorf("the agent did not stop within %s of SIGINT; killed it", agentStopTimeout)
}

// logTail returns the last n lines of the agent's log, indented.
func (a *agent) logTail(n int) string {
	b, err := os.ReadFile(a.logPath)
	if err != nil {
		return "    (no log: " + err.Error() + ")"
	}
	lines := strings.Split(string(bytes.TrimRight(b, "\n")), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}
