package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

// Cluster is N servers (bootstrap_expect = N, each joining all) and M
// clients (client.servers = every server), each its own process with its
// own data dir: servers s1..sN, clients c1..cM.
type Cluster struct {
	h       *Harness
	Servers []*Agent
	Clients []*Agent
}

// Timeouts of cluster waits.
const (
	leaderTimeout = 60 * time.Second
	nodeTimeout   = 60 * time.Second
	allocTimeout  = 60 * time.Second
	claimTimeout  = 60 * time.Second
	pluginTimeout = 60 * time.Second
)

// NewCluster starts a cluster and waits until it has a leader and every
// client's node is ready.
func (h *Harness) NewCluster(t testing.TB, servers, clients int) *Cluster {
	t.Helper()
	addrs := freeAddrs(t, servers)
	c := &Cluster{h: h}
	for i, addr := range addrs {
		c.Servers = append(c.Servers, h.NewServer(t, fmt.Sprintf("s%d", i+1), addr, addrs))
	}
	for i := range clients {
		c.Clients = append(c.Clients, h.NewClient(t, fmt.Sprintf("c%d", i+1), addrs))
	}
	for _, s := range c.Servers {
		s.Start(t)
	}
	c.WaitForLeader(t)
	for _, cl := range c.Clients {
		cl.Start(t)
	}
	c.WaitForNodesReady(t)
	return c
}

// freeAddrs picks n free loopback TCP ports: it listens on all of them at
// once (so they differ), then closes them for the agents to take.
func freeAddrs(t testing.TB, n int) []string {
	t.Helper()
	var addrs []string
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		must.NoError(t, err)
		ls = append(ls, l)
		addrs = append(addrs, l.Addr().String())
	}
	for _, l := range ls {
		l.Close()
	}
	return addrs
}

// RunningServers are the servers whose processes run.
func (c *Cluster) RunningServers() []*Agent {
	var out []*Agent
	for _, s := range c.Servers {
		if s.Running() {
			out = append(out, s)
		}
	}
	return out
}

// WaitForLeader waits until every running server names the same leader,
// a running server that says it is healthy, and returns it.
func (c *Cluster) WaitForLeader(t testing.TB) *Agent {
	t.Helper()
	var leader *Agent
	waitFor(t, leaderTimeout, "the running servers to agree on a live leader", func() (bool, error) {
		running := c.RunningServers()
		if len(running) == 0 {
			t.Fatalf("no server runs")
		}
		seen := map[string][]string{}
		for _, s := range running {
			l, err := s.API(t).Status().Leader()
			if err != nil {
				return false, fmt.Errorf("server %s: %w", s.Name, err)
			}
			seen[l] = append(seen[l], s.Name)
		}
		if len(seen) != 1 {
			return false, fmt.Errorf("servers disagree on the leader: %v", seen)
		}
		for addr := range seen {
			if addr == "" {
				return false, errors.New("no server knows a leader")
			}
			for _, s := range running {
				if s.RPCAddr == addr {
					if _, err := s.API(t).Agent().Health(); err != nil {
						return false, fmt.Errorf("leader %s is not healthy yet: %w", s.Name, err)
					}
					leader = s
					return true, nil
				}
			}
			return false, fmt.Errorf("the leader %s is not a running server", addr)
		}
		return false, nil
	})
	return leader
}

// Follower returns a running server that is not the leader.
func (c *Cluster) Follower(t testing.TB) *Agent {
	t.Helper()
	leader := c.WaitForLeader(t)
	for _, s := range c.RunningServers() {
		if s != leader {
			return s
		}
	}
	t.Fatalf("no running follower")
	return nil
}

// Server returns a running server (the first).
func (c *Cluster) Server(t testing.TB) *Agent {
	t.Helper()
	running := c.RunningServers()
	if len(running) == 0 {
		t.Fatalf("no server runs")
	}
	return running[0]
}

// API returns an API client for a running server.
func (c *Cluster) API(t testing.TB) *api.Client {
	t.Helper()
	return c.Server(t).API(t)
}

// Berth runs the berth CLI against a running server (BERTH_ADDR) and
// returns its output; a non-zero exit fails the test with the output.
func (c *Cluster) Berth(t testing.TB, args ...string) string {
	t.Helper()
	out, err := c.BerthOn(c.Server(t), args...)
	if err != nil {
		t.Fatalf("berth %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// BerthOn runs the berth CLI against one agent and returns its combined
// output and how it exited.
func (c *Cluster) BerthOn(a *Agent, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.h.Berth, args...)
	cmd.Env = append(os.Environ(), "BERTH_ADDR=http://"+a.HTTPAddr())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// BerthJSON runs a read command with -json against a running server and
// decodes its output into out.
func (c *Cluster) BerthJSON(t testing.TB, out any, args ...string) {
	t.Helper()
	s := c.Berth(t, args...)
	if err := json.Unmarshal([]byte(s), out); err != nil {
		t.Fatalf("berth %s: decoding its output: %v\n%s", strings.Join(args, " "), err, s)
	}
}

// RunJob writes a jobspec and registers it with `berth job run -detach`.
func (c *Cluster) RunJob(t testing.TB, jobID, hcl string) {
	t.Helper()
	path := c.h.WriteFile(t, jobID+".job.hcl", hcl)
	c.Berth(t, "job", "run", "-detach", path)
}

// RegisterVolume writes a volume spec and registers it with `berth volume
// register`.
func (c *Cluster) RegisterVolume(t testing.TB, v *Volume) {
	t.Helper()
	path := c.h.WriteFile(t, v.ID+".volume.hcl", v.HCL())
	c.Berth(t, "volume", "register", path)
}

// RunPlugin runs a plugin job and waits until its instances are healthy:
// a node (or monolith) instance on every client, and for controller and
// monolith plugins a controller on every client.
func (c *Cluster) RunPlugin(t testing.TB, p *PluginJob) {
	t.Helper()
	c.RunJob(t, p.ID(), p.HCL())
	var controllers, nodes int
	switch p.Type {
	case "node":
		nodes = len(c.Clients)
	case "controller":
		controllers = len(c.Clients)
	default:
		controllers, nodes = len(c.Clients), len(c.Clients)
	}
	c.WaitForPlugin(t, p.PluginID, controllers, nodes)
}

// WaitForPlugin waits until a plugin has at least the given healthy
// controller and node instances.
func (c *Cluster) WaitForPlugin(t testing.TB, id string, controllers, nodes int) *api.CSIPlugin {
	t.Helper()
	var p *api.CSIPlugin
	waitFor(t, pluginTimeout, fmt.Sprintf("plugin %s: %d healthy controllers, %d healthy nodes", id, controllers, nodes), func() (bool, error) {
		var err error
		p, _, err = c.API(t).CSIPlugins().Info(id, nil)
		if err != nil {
			return false, err
		}
		return p.ControllersHealthy >= controllers && p.NodesHealthy >= nodes,
			fmt.Errorf("%d/%d controllers, %d/%d nodes healthy", p.ControllersHealthy, p.ControllersExpected, p.NodesHealthy, p.NodesExpected)
	})
	return p
}

// WaitForNodesReady waits until every client's node is registered and
// ready.
func (c *Cluster) WaitForNodesReady(t testing.TB) {
	t.Helper()
	waitFor(t, nodeTimeout, "every client's node to be ready", func() (bool, error) {
		nodes, _, err := c.API(t).Nodes().List(nil)
		if err != nil {
			return false, err
		}
		for _, cl := range c.Clients {
			i := slices.IndexFunc(nodes, func(n *api.NodeListStub) bool { return n.Name == cl.Name })
			if i < 0 {
				return false, fmt.Errorf("client %s has not registered", cl.Name)
			}
			if nodes[i].Status != "ready" {
				return false, fmt.Errorf("client %s's node is %s", cl.Name, nodes[i].Status)
			}
		}
		return true, nil
	})
}

// NodeID returns the node ID of a client (its node's name is the agent's).
func (c *Cluster) NodeID(t testing.TB, client *Agent) string {
	t.Helper()
	nodes, _, err := c.API(t).Nodes().List(nil)
	must.NoError(t, err)
	for _, n := range nodes {
		if n.Name == client.Name {
			return n.ID
		}
	}
	t.Fatalf("client %s has no node", client.Name)
	return ""
}

// ClientOf returns the client agent that runs an alloc.
func (c *Cluster) ClientOf(t testing.TB, alloc *api.AllocationListStub) *Agent {
	t.Helper()
	for _, cl := range c.Clients {
		if cl.Name == alloc.NodeName {
			return cl
		}
	}
	t.Fatalf("alloc %s runs on node %q, which is none of the clients", alloc.ID, alloc.NodeName)
	return nil
}

// WaitForAllocs waits until a job has n allocs with the client status
// status (running, complete, ...) and returns them. An alloc that failed
// while waiting for another status fails the test at once, with its task
// events.
func (c *Cluster) WaitForAllocs(t testing.TB, jobID string, n int, status string) []*api.AllocationListStub {
	t.Helper()
	var out []*api.AllocationListStub
	waitFor(t, allocTimeout, fmt.Sprintf("%d %s allocs of job %s", n, status, jobID), func() (bool, error) {
		allocs, _, err := c.API(t).Jobs().Allocations(jobID, false, nil)
		if err != nil {
			return false, err
		}
		out = out[:0]
		var desc []string
		for _, a := range allocs {
			if a.ClientStatus == status {
				out = append(out, a)
			}
			if a.ClientStatus == api.AllocClientStatusFailed && status != api.AllocClientStatusFailed {
				t.Fatalf("alloc of job %s failed: %s", jobID, describeAlloc(a))
			}
			desc = append(desc, describeAlloc(a))
		}
		return len(out) == n, fmt.Errorf("allocs: %s", strings.Join(desc, "; "))
	})
	return out
}

// describeAlloc says where an alloc is, with its tasks' recent events.
func describeAlloc(a *api.AllocationListStub) string {
	s := fmt.Sprintf("%s on %s: desired %s, client %s %q", a.ID, a.NodeName, a.DesiredStatus, a.ClientStatus, a.ClientDescription)
	for name, ts := range a.TaskStates {
		var evs []string
		for _, e := range ts.Events {
			msg := e.DisplayMessage
			if msg == "" {
				msg = e.Message
			}
			evs = append(evs, fmt.Sprintf("%s: %s", e.Type, msg))
		}
		if len(evs) > 4 {
			evs = evs[len(evs)-4:]
		}
		s += fmt.Sprintf(" [task %s %s failed=%t: %s]", name, ts.State, ts.Failed, strings.Join(evs, " | "))
	}
	return s
}

// Volume reads a volume through the API.
func (c *Cluster) Volume(t testing.TB, id string) *api.CSIVolume {
	t.Helper()
	var v *api.CSIVolume
	waitFor(t, claimTimeout, "reading volume "+id, func() (bool, error) {
		var err error
		v, _, err = c.API(t).CSIVolumes().Info(id, nil)
		return err == nil, err
	})
	return v
}

// WaitForClaimFreed waits until an alloc's claim on a volume is freed:
// no live claim of the alloc, and a past claim of it at step freed.
func (c *Cluster) WaitForClaimFreed(t testing.TB, volID, allocID string) *api.CSIVolume {
	t.Helper()
	var v *api.CSIVolume
	waitFor(t, claimTimeout, fmt.Sprintf("alloc %s's claim on volume %s to be freed", allocID, volID), func() (bool, error) {
		var err error
		v, _, err = c.API(t).CSIVolumes().Info(volID, nil)
		if err != nil {
			return false, err
		}
		if cl := findClaim(v.Claims, allocID); cl != nil {
			return false, fmt.Errorf("live claim at step %s (attempts %d, last error %q)", cl.Step, cl.Attempts, cl.LastError)
		}
		past := findClaim(v.PastClaims, allocID)
		if past == nil {
			return false, errors.New("no past claim of the alloc")
		}
		return past.Step == api.CSIClaimFreed, fmt.Errorf("past claim at step %s", past.Step)
	})
	return v
}

// findClaim returns the claim of an alloc, or nil.
func findClaim(claims []*api.CSIVolumeClaim, allocID string) *api.CSIVolumeClaim {
	for _, cl := range claims {
		if cl != nil && cl.AllocID == allocID {
			return cl
		}
	}
	return nil
}

// AllocLogs returns a task's stdout through `berth alloc logs`.
func (c *Cluster) AllocLogs(t testing.TB, allocID, task string) string {
	t.Helper()
	return c.Berth(t, "alloc", "logs", allocID, task)
}
