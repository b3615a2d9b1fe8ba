package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/berth-io/berth/api"
)

// The failover and client-restart rows run their own agents in
// subdirectories of the temp dir, apart from the one agent of the other
// rows: a server-only cluster of three, and a server with a client-only
// agent. Each run starts them fresh and stops them after.

// serverConfig is a server-only agent of a cluster of len(join) servers.
const serverConfig = `# Written by berth-bench.
name      = %q
data_dir  = %q
bind_addr = "127.0.0.1"
log_level = "INFO"

ports {
  http = %d
  rpc  = %d
}

server {
  enabled          = true
  bootstrap_expect = %d
  server_join      = [%s]
}
`

// clientConfig is a client-only agent of one server, with raw_exec on
// (the plugin job runs on it).
const clientConfig = `# Written by berth-bench.
name      = %q
data_dir  = %q
bind_addr = "127.0.0.1"
log_level = "INFO"

ports {
  http = %d
  rpc  = %d
}

client {
  enabled = true
  servers = [%q]
}

plugin "raw_exec" {
  config {
    enabled = true
  }
}
`

// Deadlines of the cluster rows.
const (
	clusterReadyTimeout = time.Minute
	failoverTimeout     = 30 * time.Second
	restartTimeout      = time.Minute
	// probeTimeout bounds one write while a new leader is being elected:
	// the request waits for a leader (up to the servers' RPC hold time)
	// or fails, and the next one goes out at once.
	probeTimeout = 10 * time.Second
)

// startServers starts n server-only agents under dir and waits until they
// agree on a leader that takes writes. Agents started are returned even on
// error, for the caller to stop.
func startServers(ctx context.Context, bin, dir string, n int) ([]*agent, error) {
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	join := make([]string, n)
	for i := range n {
		join[i] = fmt.Sprintf("%q", fmt.Sprintf("127.0.0.1:%d", ports[2*i+1]))
	}
	var servers []*agent
	for i := range n {
		name := fmt.Sprintf("server-%d", i+1)
		sdir := filepath.Join(dir, name)
		if err := os.MkdirAll(sdir, 0o700); err != nil {
			return servers, err
		}
		dataDir := filepath.Join(sdir, "data")
		cfg := fmt.Sprintf(serverConfig, name, dataDir, ports[2*i], ports[2*i+1], n, strings.Join(join, ", "))
		a, err := spawnAgent(bin, sdir, cfg, ports[2*i])
		if err != nil {
			return servers, err
		}
		a.dataDir, a.rpcAddr = dataDir, fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])
		servers = append(servers, a)
	}
	wctx, cancel := context.WithTimeout(ctx, clusterReadyTimeout)
	defer cancel()
	for _, s := range servers {
		if err := probeWrite(wctx, s); err != nil {
			return servers, fmt.Errorf("waiting for a leader through %s (log %s):\n%s\n%w", s.rpcAddr, s.logPath, s.logTail(10), err)
		}
	}
	return servers, nil
}

// probeWrite retries a small write through a until it succeeds: a batch
// job register, which the leader commits through Raft (no client is
// needed; its eval stays blocked).
func probeWrite(ctx context.Context, a *agent) error {
	job := &api.Job{
		ID: ptr("bench-probe"), Type: ptr(api.JobTypeBatch),
		TaskGroups: []*api.TaskGroup{{Name: ptr("g"), Tasks: []*api.Task{{
			Name: "t", Driver: "raw_exec", Config: map[string]any{"command": "/bin/true"},
		}}}},
	}
	var last error
	for {
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		_, _, err := a.api.Jobs().Register(job, writeOpts(pctx))
		cancel()
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-a.done:
			return fmt.Errorf("the agent exited (last: %v)", last)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// leaderOf returns the server whose RPC address the cluster names as
// leader.
func leaderOf(servers []*agent) (*agent, error) {
	addr, err := servers[0].api.Status().Leader()
	if err != nil {
		return nil, fmt.Errorf("asking for the leader: %w", err)
	}
	for _, s := range servers {
		if s.rpcAddr == addr {
			return s, nil
		}
	}
	return nil, fmt.Errorf("the leader %q is none of the servers", addr)
}

// stopAll stops the agents (SIGINT, then SIGKILL) and returns the first
// problem.
func stopAll(agents []*agent) error {
	var errs []error
	for _, a := range agents {
		if a != nil {
			errs = append(errs, a.stop())
		}
	}
	return errors.Join(errs...)
}

// failoverRows runs cfg.failovers runs of: three servers, SIGKILL the
// leader, time until a surviving server answers a write through a new
// leader.
func (b *bench) failoverRows(ctx context.Context) []row {
	if b.cfg.failovers == 0 {
		return nil
	}
	b.progress("3-server leader failover, %d times: kill -9 the leader → a write is answered...", b.cfg.failovers)
	var samples []time.Duration
	var err error
	for i := range b.cfg.failovers {
		var d time.Duration
		d, err = b.failoverRun(ctx, filepath.Join(b.dir, fmt.Sprintf("failover-%d", i+1)))
		if err != nil {
			err = fmt.Errorf("run %d: %w", i+1, err)
			break
		}
		samples = append(samples, d)
	}
	return []row{samplesRow(rowFailover, "3-server leader failover (kill -9 → write answered)", kindLatency, 3, samples, 0, err)}
}

func (b *bench) failoverRun(ctx context.Context, dir string) (d time.Duration, err error) {
	servers, err := startServers(ctx, b.cfg.berth, dir, 3)
	defer func() {
		if serr := stopAll(servers); serr != nil && err == nil {
			err = serr
		}
	}()
	if err != nil {
		return 0, err
	}
	leader, err := leaderOf(servers)
	if err != nil {
		return 0, err
	}
	var survivor *agent
	for _, s := range servers {
		if s != leader {
			survivor = s
			break
		}
	}
	leader.kill()
	killed := time.Now()
	wctx, cancel := context.WithTimeout(ctx, failoverTimeout)
	defer cancel()
	if err := probeWrite(wctx, survivor); err != nil {
		return 0, fmt.Errorf("waiting for a write through %s after the leader was killed (log %s):\n%s\n%w",
			survivor.rpcAddr, survivor.logPath, survivor.logTail(10), err)
	}
	return time.Since(killed), nil
}

// restartRows runs a server and a client-only agent that runs the
// hostpath plugin and one exec task with a volume mounted, then
// cfg.restarts times: SIGKILL the client agent, start it again with the
// same data dir, time until it is ready again.
func (b *bench) restartRows(ctx context.Context) []row {
	if b.cfg.restarts == 0 {
		return nil
	}
	b.progress("client kill -9 → restarted client ready (plugin and one task with a volume), %d times...", b.cfg.restarts)
	samples, err := b.measureRestarts(ctx, filepath.Join(b.dir, "restart"))
	return []row{samplesRow(rowClientRestart, "client kill -9 → restarted client ready", kindLatency, 1, samples, 0, err)}
}

// Names of the restart rows' job and volume.
const (
	restartJobID  = "bench-restart"
	restartVolume = "bench-restart"
)

func (b *bench) measureRestarts(ctx context.Context, dir string) (samples []time.Duration, err error) {
	servers, err := startServers(ctx, b.cfg.berth, dir, 1)
	agents := servers
	var c *api.Client
	defer func() {
		// The tasks outlive their agent: stop the jobs first.
		if c != nil {
			stopJobsOf(ctx, c, b.progress)
		}
		if serr := stopAll(agents); serr != nil && err == nil {
			err = serr
		}
	}()
	if err != nil {
		return nil, err
	}
	srv := servers[0]
	cdir := filepath.Join(dir, "client")
	if err := os.MkdirAll(cdir, 0o700); err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(clientConfig, "bench-client", filepath.Join(cdir, "data"), ports[0], ports[1], srv.rpcAddr)
	var client *agent
	start := func() error {
		client, err = spawnAgent(b.cfg.berth, cdir, cfg, ports[0])
		if client != nil {
			agents = append(agents, client)
		}
		return err
	}
	if err := start(); err != nil {
		return nil, err
	}
	node, err := waitNodeReady(ctx, srv, 0, time.Time{})
	if err != nil {
		return nil, err
	}
	c = srv.api
	root := filepath.Join(dir, "hostpath")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	if _, _, err := c.Jobs().Register(pluginJob(b.cfg.berth, root, node.ID), writeOpts(ctx)); err != nil {
		return nil, fmt.Errorf("registering the plugin job: %w", err)
	}
	if _, err := waitNodeReady(ctx, srv, 0, time.Unix(0, 1)); err != nil {
		return nil, err
	}
	if _, err := c.CSIVolumes().Register(benchVolume(restartVolume), writeOpts(ctx)); err != nil {
		return nil, fmt.Errorf("registering volume %s: %w", restartVolume, err)
	}
	if _, _, err := c.Jobs().Register(workJob(restartJobID, restartVolume, 1, false), writeOpts(ctx)); err != nil {
		return nil, fmt.Errorf("registering job %s: %w", restartJobID, err)
	}
	if err := waitTasks(ctx, c, restartJobID, 1, api.TaskStateRunning, oneAllocTimeout); err != nil {
		return nil, err
	}
	for i := range b.cfg.restarts {
		// The node is written a few times after it starts (fingerprints,
		// plugins): wait for the last of that, so that only the
		// restarted client's registration counts.
		before, err := waitNodeSettled(ctx, srv)
		if err != nil {
			return nil, err
		}
		client.kill()
		killed := time.Now()
		if err := start(); err != nil {
			return nil, err
		}
		if _, err = waitNodeReady(ctx, srv, before.ModifyIndex, killed); err != nil {
			return nil, fmt.Errorf("run %d (client log %s):\n%s\n%w", i+1, client.logPath, client.logTail(10), err)
		}
		samples = append(samples, time.Since(killed))
		// The task ran on through the restart: the restored alloc found
		// it again rather than starting another.
		allocs, _, err := c.Jobs().Allocations(restartJobID, false, queryOpts(ctx))
		if err != nil {
			return nil, fmt.Errorf("listing the allocs of job %s: %w", restartJobID, err)
		}
		if len(allocs) != 1 || allocs[0].ClientStatus != api.AllocClientStatusRunning {
			return nil, fmt.Errorf("run %d: job %s has %d allocs after the restart, want its one alloc running", i+1, restartJobID, len(allocs))
		}
	}
	return samples, nil
}

// stopJobsOf stops every job of the agent of c and waits until their
// allocs are no longer running, the workloads (and their claims) first,
// then the plugin; problems go to progress.
func stopJobsOf(ctx context.Context, c *api.Client, progress func(string, ...any)) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), jobsStopTimeout)
	defer cancel()
	for _, id := range []string{restartJobID, pluginJobID} {
		if _, _, err := c.Jobs().Deregister(id, false, writeOpts(ctx)); err != nil {
			progress("cleanup: stopping job %s: %v", id, err)
			continue
		}
		err := poll(ctx, nil, func() (bool, error) {
			allocs, _, err := c.Jobs().Allocations(id, false, queryOpts(ctx))
			if err != nil {
				return false, err
			}
			for _, a := range allocs {
				if a.ClientStatus == api.AllocClientStatusRunning || a.ClientStatus == api.AllocClientStatusPending {
					return false, fmt.Errorf("alloc %s is %s", a.ID, a.ClientStatus)
				}
			}
			return true, nil
		})
		if err != nil {
			progress("cleanup: waiting for job %s to stop: %v", id, err)
		}
	}
}

// waitNodeReady waits, with blocking queries on the server, until the one
// client node was written after index, is ready, has a healthy exec
// driver and, unless probed is zero, a healthy hostpath plugin that the
// client probed after probed (a restarted client reached its plugin
// again).
func waitNodeReady(ctx context.Context, srv *agent, after uint64, probed time.Time) (*api.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, restartTimeout)
	defer cancel()
	var index uint64
	for {
		q := &api.QueryOptions{WaitIndex: index, WaitTime: blockingWait}
		nodes, qm, err := srv.api.Nodes().List(q.WithContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("waiting for the client's node to be registered again and ready: %w", ctx.Err())
			}
			return nil, fmt.Errorf("listing nodes: %w", err)
		}
		index = qm.LastIndex
		for _, n := range nodes {
			if d := n.Drivers["exec"]; n.ModifyIndex <= after || n.Status != api.NodeStatusReady || d == nil || !d.Healthy {
				continue
			}
			node, _, err := srv.api.Nodes().Info(n.ID, queryOpts(ctx))
			if err != nil {
				return nil, fmt.Errorf("reading node %s: %w", n.ID, err)
			}
			if probed.IsZero() {
				return node, nil
			}
			if p := node.CSINodePlugins[pluginID]; p != nil && p.Healthy && p.UpdateTime.After(probed) {
				return node, nil
			}
		}
	}
}

// settleTime is how long the node must go unwritten to count as settled.
const settleTime = time.Second

// waitNodeSettled waits until the one client node has gone settleTime
// without a write, and returns it.
func waitNodeSettled(ctx context.Context, srv *agent) (*api.NodeListStub, error) {
	ctx, cancel := context.WithTimeout(ctx, restartTimeout)
	defer cancel()
	for {
		nodes, qm, err := srv.api.Nodes().List(queryOpts(ctx))
		if err != nil {
			return nil, fmt.Errorf("listing nodes: %w", err)
		}
		if len(nodes) != 1 {
			return nil, fmt.Errorf("the server has %d nodes, want the one client", len(nodes))
		}
		q := &api.QueryOptions{WaitIndex: nodes[0].ModifyIndex, WaitTime: settleTime}
		_, qm2, err := srv.api.Nodes().List(q.WithContext(ctx))
		if err != nil {
			return nil, fmt.Errorf("listing nodes: %w", err)
		}
		if qm2.LastIndex == qm.LastIndex {
			return nodes[0], nil
		}
	}
}
