package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/berth-io/berth/client"
	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/plugins/drivers/mock"
	"github.com/berth-io/berth/testutil"
)

// NewClient starts an in-process client that reaches the cluster through
// srv (followers forward to the leader) and runs tasks with the mock
// driver. cb may adjust the config. The client is shut down at cleanup;
// a test may shut it down earlier (Shutdown is idempotent).
func NewClient(t testing.TB, srv *Server, name string, cb func(c *client.Config)) *client.Client {
	t.Helper()
	logger := testLogger(t, name)
	cfg := &client.Config{
		DataDir: t.TempDir(),
		Node: &structs.Node{
			Name:       name,
			Datacenter: "dc1",
			NodeResources: &structs.NodeResources{
				CPU:      4000,
				MemoryMB: 8192,
			},
		},
		RPC:               srv.Server,
		Drivers:           map[string]drivers.Driver{"mock": mock.New(logger.Named("mock"), mock.Config{})},
		Logger:            logger,
		DevMode:           true,
		UpdateBatchWindow: 10 * time.Millisecond,
		ShutdownTimeout:   5 * time.Second,
		AllocWatchWait:    5 * time.Second,
	}
	if cb != nil {
		cb(cfg)
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatalf("starting client %s: %v", name, err)
	}
	t.Cleanup(func() { c.Shutdown() })
	return c
}

// FastHeartbeats makes servers mark a silent node down quickly, for tests
// of node failure.
func FastHeartbeats(c *nomad.Config) {
	c.HeartbeatTTL = 200 * time.Millisecond
	c.HeartbeatGrace = 300 * time.Millisecond
}

// WaitForNodeReady waits until the client's node is ready on the servers.
func WaitForNodeReady(t testing.TB, srv *Server, c *client.Client) {
	t.Helper()
	testutil.WaitForResult(t, func() (bool, error) {
		n, err := srv.State().NodeByID(nil, c.NodeID())
		if err != nil {
			return false, err
		}
		if n == nil || n.Status != structs.NodeStatusReady {
			return false, fmt.Errorf("node %s is not ready yet", c.NodeID())
		}
		return true, nil
	})
}
