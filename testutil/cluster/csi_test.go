package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/client"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers/builtin"
	"github.com/berth-io/berth/testutil"
)

// TestCSI_HostpathPluginTaskAndExecWorkload is the client-side CSI story
// with real processes: Berth's hostpath plugin runs as a raw_exec system
// job task with csi_plugin, a workload exec task writes to /data of its
// volume, the file lands in the volume's directory on the host, and once
// the job is done the claim is freed and no mount is left behind.
//
// It runs twice: with the plugin in node mode, and as a monolith, whose
// claims the servers ControllerPublish and ControllerUnpublish through the
// client's node session.
func TestCSI_HostpathPluginTaskAndExecWorkload(t *testing.T) {
	for _, mode := range []string{"node", "monolith"} {
		t.Run(mode, func(t *testing.T) { testHostpathPluginTask(t, mode) })
	}
}

func testHostpathPluginTask(t *testing.T, mode string) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the plugin makes bind mounts and exec builds a chroot")
	}
	berth := testutil.BuildBerth(t)
	root := t.TempDir()

	s := NewServer(t, nil)
	// Not t.TempDir(): its name grows with the subtest's, and the plugin
	// socket under it must fit in 107 bytes.
	dataDir, err := os.MkdirTemp("", "csi")
	must.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	c := NewClient(t, s, "csi-client", func(cfg *client.Config) {
		cfg.DataDir = dataDir
		cfg.Drivers = builtin.Drivers(cfg.Logger, filepath.Join(dataDir, "client", "drivers"))
	})
	WaitForNodeReady(t, s, c)

	plugin := mockJob("hostpath", structs.JobTypeSystem, 1, nil)
	plugin.TaskGroups[0].Tasks[0] = &structs.Task{
		Name: "plugin", Driver: "raw_exec",
		Config: map[string]any{
			"command": berth,
			"args": []any{"plugin", "hostpath", "-mode", mode, "-static-volumes=" + fmt.Sprint(mode != "node"),
				"-root", root, "-node-id", c.NodeID()},
		},
		CSIPluginConfig: &structs.TaskCSIPluginConfig{
			ID: "hostpath", Type: structs.CSIPluginType(mode), MountDir: "/csi",
			StagePublishBaseDir: "/local/csi", HealthTimeout: 30 * time.Second,
		},
		Resources:   &structs.Resources{CPU: 100, MemoryMB: 64},
		KillTimeout: 5 * time.Second,
	}
	registerJob(t, s, plugin)
	testutil.WaitForResult(t, func() (bool, error) {
		p, err := s.State().CSIPluginByID(nil, "hostpath")
		if err != nil || p == nil {
			return false, fmt.Errorf("plugin not fingerprinted yet (%v)", err)
		}
		wantControllers := 0
		if mode != "node" {
			wantControllers = 1
		}
		return p.NodesHealthy == 1 && p.ControllersHealthy == wantControllers && p.ControllerRequired == (mode != "node"),
			fmt.Errorf("plugin has %d healthy nodes, %d healthy controllers, controller required %t",
				p.NodesHealthy, p.ControllersHealthy, p.ControllerRequired)
	})

	vol := &structs.CSIVolume{
		ID: "data", Name: "data", Namespace: structs.DefaultNamespace, PluginID: "hostpath",
		RequestedCapabilities: []*structs.CSIVolumeCapability{{
			AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
		}},
	}
	must.NoError(t, s.RPC("CSIVolume.Register", &structs.CSIVolumeRegisterRequest{Volumes: []*structs.CSIVolume{vol}},
		&structs.CSIVolumeRegisterResponse{}))

	writer := mockJob("writer", structs.JobTypeBatch, 1, nil)
	tg := writer.TaskGroups[0]
	tg.Volumes = map[string]*structs.VolumeRequest{"data": {
		Name: "data", Type: structs.VolumeTypeCSI, Source: "data",
		AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
	}}
	tg.Tasks[0] = &structs.Task{
		Name: "write", Driver: "exec",
		Config: map[string]any{
			"command": "/bin/sh",
			"args":    []any{"-c", "echo hello from berth > /data/hello.txt"},
		},
		VolumeMounts: []*structs.VolumeMount{{Volume: "data", Destination: "/data"}},
		Resources:    &structs.Resources{CPU: 100, MemoryMB: 64},
		KillTimeout:  5 * time.Second,
	}
	registerJob(t, s, writer)
	waitForAllocs(t, s, "writer", 1, structs.AllocClientStatusComplete)

	b, err := os.ReadFile(filepath.Join(root, "volumes", "data", "hello.txt"))
	must.NoError(t, err, must.Sprint("the task's write did not land in the volume's directory"))
	must.Eq(t, "hello from berth\n", string(b))

	// The claim is freed once the task exited and the node unpublished.
	testutil.WaitForResult(t, func() (bool, error) {
		v, err := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "data")
		if err != nil {
			return false, err
		}
		if len(v.Claims) > 0 || len(v.PastClaims) != 1 {
			return false, fmt.Errorf("volume has %d live and %d past claims", len(v.Claims), len(v.PastClaims))
		}
		past := v.PastClaims[0]
		if past.Step != structs.CSIClaimFreed {
			return false, fmt.Errorf("past claim step %s", past.Step)
		}
		// A monolith's claim carries the publish context its controller
		// returned (hostpath names the node), so ControllerPublish ran.
		if mode != "node" && past.PublishContext["node_id"] != c.NodeID() {
			return false, fmt.Errorf("claim has publish context %v: no ControllerPublish through the client", past.PublishContext)
		}
		return true, nil
	})
	// No staging or publish mount of the client is left behind.
	testutil.WaitForResult(t, func() (bool, error) {
		mi, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return false, err
		}
		for _, line := range strings.Split(string(mi), "\n") {
			if strings.Contains(line, filepath.Join(dataDir, "client", "csi")) {
				return false, fmt.Errorf("mount left behind: %s", line)
			}
		}
		return true, nil
	})
}
