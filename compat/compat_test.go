package compat

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"testing"
	"time"

	nomad "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/command/agent"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil"
)

// testAgent starts a -dev Berth agent on free ports and returns it with an
// upstream Nomad client pointed at it.
func testAgent(t *testing.T) (*agent.Agent, *nomad.Client) {
	t.Helper()
	cfg := agent.DevConfig()
	zero := 0
	cfg.Ports = &agent.Ports{HTTP: &zero, RPC: &zero}
	cfg.LogLevel = "OFF"
	a, err := agent.NewAgent(cfg, io.Discard)
	must.NoError(t, err)
	t.Cleanup(func() { a.Shutdown() })
	testutil.WaitForResult(t, func() (bool, error) {
		if a.Server().Leader() == "" {
			return false, errors.New("no leader yet")
		}
		return true, nil
	})
	client, err := nomad.NewClient(&nomad.Config{Address: "http://" + a.HTTPAddr()})
	must.NoError(t, err)
	return a, client
}

// registerPluginNode makes plugin exist the way it does in a cluster: a
// node reports a healthy instance of it. Nomad's API has no call for that,
// so this goes through the server's Node.Register RPC.
func registerPluginNode(t *testing.T, a *agent.Agent, plugin string) *structs.Node {
	t.Helper()
	n := &structs.Node{
		ID: "6e0c8a5e-0d53-4b0e-9d8b-1c2f3a4b5c6d", SecretID: "node-secret", Name: "compat-node",
		Datacenter: "dc1", Status: structs.NodeStatusReady,
		Attributes:    map[string]string{"unique.network.ip-address": "127.0.0.1", "kernel.name": "linux"},
		Drivers:       map[string]*structs.DriverInfo{"raw_exec": {Detected: true, Healthy: true}},
		NodeResources: &structs.NodeResources{CPU: 4000, MemoryMB: 8192},
		CSINodePlugins: map[string]*structs.CSIInfo{plugin: {
			PluginID: plugin, AllocID: "3f1a8d0e-7b2c-4e5f-9a6b-0c1d2e3f4a5b", Healthy: true, HealthDescription: "healthy",
			Provider: "berth.hostpath", ProviderVersion: "0.1.0",
			NodeInfo: &structs.CSINodeInfo{ID: "compat-node", MaxVolumes: 10},
		}},
	}
	must.NoError(t, a.Server().RPC("Node.Register", &structs.NodeRegisterRequest{Node: n}, &structs.NodeUpdateResponse{}))
	return n
}

func testVolume(id string) *nomad.CSIVolume {
	return &nomad.CSIVolume{
		ID: id, Name: id, PluginID: "hostpath",
		RequestedCapabilities: []*nomad.CSIVolumeCapability{{
			AccessMode:     nomad.CSIVolumeAccessModeSingleNodeWriter,
			AttachmentMode: nomad.CSIVolumeAttachmentModeFilesystem,
		}},
		MountOptions: &nomad.CSIMountOptions{FSType: "ext4", MountFlags: []string{"noatime"}},
		Secrets:      nomad.CSISecrets{"password": "do-not-leak"},
		Parameters:   map[string]string{"dir": "/srv/" + id},
	}
}

func TestCompat_CSIVolumes(t *testing.T) {
	a, client := testAgent(t)
	registerPluginNode(t, a, "hostpath")
	vols := client.CSIVolumes()

	wm, err := vols.Register(testVolume("vol-1"), nil)
	must.NoError(t, err)
	must.Positive(t, wm.LastIndex)
	resp, _, err := vols.RegisterOpts(&nomad.CSIVolumeRegisterRequest{Volumes: []*nomad.CSIVolume{testVolume("vol-2")}}, nil)
	must.NoError(t, err)
	must.Eq(t, "", resp.Warnings)

	list, qm, err := vols.List(nil)
	must.NoError(t, err)
	must.Positive(t, qm.LastIndex)
	must.True(t, qm.KnownLeader)
	must.SliceLen(t, 2, list)
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	must.Eq(t, "vol-1", list[0].ID)
	must.Eq(t, "hostpath", list[0].PluginID)
	must.Eq(t, "berth.hostpath", list[0].Provider)
	must.True(t, list[0].Schedulable)
	must.Eq(t, 1, list[0].NodesHealthy)

	vol, _, err := vols.Info("vol-1", nil)
	must.NoError(t, err)
	must.Eq(t, "vol-1", vol.ID)
	must.Eq(t, "default", vol.Namespace)
	must.Eq(t, "0.1.0", vol.ProviderVersion)
	must.True(t, vol.Schedulable)
	must.MapEmpty(t, vol.Secrets)
	must.NotNil(t, vol.ReadAllocs)
	must.NotNil(t, vol.WriteAllocs)
	must.Eq(t, "/srv/vol-1", vol.Parameters["dir"])
	must.SliceLen(t, 1, vol.RequestedCapabilities)
	must.Positive(t, vol.CreateTime)

	// Page through with the upstream client's own paging fields.
	page, qm, err := vols.List(&nomad.QueryOptions{PerPage: 1})
	must.NoError(t, err)
	must.SliceLen(t, 1, page)
	must.Eq(t, "default.vol-2", qm.NextToken)
	page, _, err = vols.List(&nomad.QueryOptions{Filter: `ID == "vol-2"`})
	must.NoError(t, err)
	must.SliceLen(t, 1, page)

	_, _, err = vols.Info("nope", nil)
	must.ErrorContains(t, err, "Unexpected response code: 404 (volume not found)")

	must.NoError(t, vols.Deregister("vol-2", false, nil))
	_, _, err = vols.Info("vol-2", nil)
	must.ErrorContains(t, err, "404")
	err = vols.Deregister("vol-2", true, nil)
	must.ErrorContains(t, err, "404")

	// Reads are exact, as Nomad's: once "compat-vol" is gone, reading it is
	// a 404, never "compat-vol-2".
	for _, id := range []string{"compat-vol", "compat-vol-2"} {
		_, err := vols.Register(testVolume(id), nil)
		must.NoError(t, err)
	}
	must.NoError(t, vols.Deregister("compat-vol", false, nil))
	_, _, err = vols.Info("compat-vol", nil)
	must.ErrorContains(t, err, "Unexpected response code: 404 (volume not found)")
	_, _, err = vols.Info("compat-v", nil)
	must.ErrorContains(t, err, "404")
	_, _, err = client.Jobs().Info("comp", nil)
	must.ErrorContains(t, err, "404")
	_, _, err = client.CSIPlugins().Info("host", nil)
	must.ErrorContains(t, err, "404")
}

func TestCompat_CSIPlugins(t *testing.T) {
	a, client := testAgent(t)
	node := registerPluginNode(t, a, "hostpath")

	plugins, _, err := client.CSIPlugins().List(nil)
	must.NoError(t, err)
	must.SliceLen(t, 1, plugins)
	must.Eq(t, "hostpath", plugins[0].ID)
	must.Eq(t, "berth.hostpath", plugins[0].Provider)
	must.Eq(t, 1, plugins[0].NodesHealthy)
	must.Eq(t, 1, plugins[0].NodesExpected)

	plug, _, err := client.CSIPlugins().Info("hostpath", nil)
	must.NoError(t, err)
	must.Eq(t, "0.1.0", plug.Version)
	must.MapContainsKey(t, plug.Nodes, node.ID)
	must.True(t, plug.Nodes[node.ID].Healthy)
	must.Eq(t, int64(10), plug.Nodes[node.ID].NodeInfo.MaxVolumes)

	_, _, err = client.CSIPlugins().Info("nope", nil)
	must.ErrorContains(t, err, "404")
}

func TestCompat_JobWithVolume(t *testing.T) {
	a, client := testAgent(t)
	registerPluginNode(t, a, "hostpath")
	_, err := client.CSIVolumes().Register(testVolume("data"), nil)
	must.NoError(t, err)

	job := nomad.NewServiceJob("db", "db", "global", 50)
	job.Datacenters = []string{"dc1"}
	tg := nomad.NewTaskGroup("db", 1)
	tg.Volumes = map[string]*nomad.VolumeRequest{"data": {
		Name: "data", Type: "csi", Source: "data",
		AccessMode: "single-node-writer", AttachmentMode: "file-system",
	}}
	task := nomad.NewTask("db", "raw_exec").SetConfig("command", "/bin/sh").SetConfig("args", []string{"-c", "sleep 60"})
	task.VolumeMounts = []*nomad.VolumeMount{{Volume: pointerOf("data"), Destination: pointerOf("/data")}}
	tg.AddTask(task)
	job.AddTaskGroup(tg)

	plan, _, err := client.Jobs().Plan(job, true, nil)
	must.NoError(t, err)
	must.Eq(t, uint64(1), plan.Annotations.DesiredTGUpdates["db"].Place)
	must.MapEmpty(t, plan.FailedTGAllocs)

	resp, wm, err := client.Jobs().Register(job, nil)
	must.NoError(t, err)
	must.NotEq(t, "", resp.EvalID)
	must.Positive(t, resp.EvalCreateIndex)
	must.Positive(t, wm.LastIndex)
	must.Eq(t, "", resp.Warnings)

	got, _, err := client.Jobs().Info("db", nil)
	must.NoError(t, err)
	must.Eq(t, "db", *got.ID)
	must.Eq(t, "service", *got.Type)
	must.SliceLen(t, 1, got.TaskGroups)
	must.Eq(t, "data", got.TaskGroups[0].Volumes["data"].Source)
	must.Eq(t, "/data", *got.TaskGroups[0].Tasks[0].VolumeMounts[0].Destination)
	must.Eq(t, "/bin/sh", got.TaskGroups[0].Tasks[0].Config["command"])

	jobs, _, err := client.Jobs().List(nil)
	must.NoError(t, err)
	must.SliceLen(t, 1, jobs)

	// The placement's claim holds the volume from the moment it is
	// reserved: Nomad-API tools that read CurrentWriters see it taken.
	testutil.WaitForResult(t, func() (bool, error) {
		stubs, _, err := client.CSIVolumes().List(nil)
		if err != nil || len(stubs) != 1 {
			return false, fmt.Errorf("volumes: %d, %v", len(stubs), err)
		}
		return stubs[0].CurrentWriters == 1 && stubs[0].CurrentReaders == 0,
			fmt.Errorf("CurrentWriters %d, CurrentReaders %d", stubs[0].CurrentWriters, stubs[0].CurrentReaders)
	})
	vol, _, err := client.CSIVolumes().Info("data", nil)
	must.NoError(t, err)
	must.MapLen(t, 1, vol.WriteAllocs)
	must.MapEmpty(t, vol.ReadAllocs)

	// Without a scheduler and a client there may be no allocs yet: the
	// call must work and decode.
	allocs, qm, err := client.Jobs().Allocations("db", false, nil)
	must.NoError(t, err)
	must.NotNil(t, allocs)
	must.Positive(t, qm.LastIndex)
	evals, _, err := client.Jobs().Evaluations("db", nil)
	must.NoError(t, err)
	var ids []string
	for _, e := range evals {
		ids = append(ids, e.ID)
	}
	must.SliceContains(t, ids, resp.EvalID)

	_, _, err = client.Jobs().Deregister("db", true, nil)
	must.NoError(t, err)
	_, _, err = client.Jobs().Info("db", nil)
	must.ErrorContains(t, err, "404")
}

func TestCompat_Nodes(t *testing.T) {
	a, client := testAgent(t)
	node := registerPluginNode(t, a, "hostpath")
	// The -dev agent's own client registers a node of its own too.
	nodes, _, err := client.Nodes().List(nil)
	must.NoError(t, err)
	var stub *nomad.NodeListStub
	for _, n := range nodes {
		if n.ID == node.ID {
			stub = n
		}
	}
	must.NotNil(t, stub, must.Sprintf("node %s not among %d listed", node.ID, len(nodes)))
	must.Eq(t, "ready", stub.Status)
	must.Eq(t, "127.0.0.1", stub.Address)
	must.Eq(t, "dc1", stub.Datacenter)
	must.MapContainsKey(t, stub.Drivers, "raw_exec")
	prefixed, _, err := client.Nodes().PrefixList(node.ID[:8])
	must.NoError(t, err)
	must.SliceLen(t, 1, prefixed)

	info, _, err := client.Nodes().Info(node.ID, nil)
	must.NoError(t, err)
	must.Eq(t, "compat-node", info.Name)
	must.MapContainsKey(t, info.CSINodePlugins, "hostpath")
	allocs, _, err := client.Nodes().Allocations(node.ID, nil)
	must.NoError(t, err)
	must.SliceEmpty(t, allocs)
}

func TestCompat_BlockingVolumeList(t *testing.T) {
	a, client := testAgent(t)
	registerPluginNode(t, a, "hostpath")
	wm, err := client.CSIVolumes().Register(testVolume("v1"), nil)
	must.NoError(t, err)

	type result struct {
		vols []*nomad.CSIVolumeListStub
		qm   *nomad.QueryMeta
		err  error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.vols, r.qm, r.err = client.CSIVolumes().List(&nomad.QueryOptions{WaitIndex: wm.LastIndex, WaitTime: 20 * time.Second})
		done <- r
	}()
	wm2, err := client.CSIVolumes().Register(testVolume("v2"), nil)
	must.NoError(t, err)
	select {
	case r := <-done:
		must.NoError(t, r.err)
		must.Eq(t, wm2.LastIndex, r.qm.LastIndex)
		must.Greater(t, wm.LastIndex, r.qm.LastIndex)
		must.SliceLen(t, 2, r.vols)
	case <-time.After(15 * time.Second):
		t.Fatal(fmt.Sprintf("blocking List(WaitIndex=%d) did not return after a write", wm.LastIndex))
	}
}

func pointerOf[T any](v T) *T { return &v }
