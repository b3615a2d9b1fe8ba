package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/client"
	"github.com/berth-io/berth/client/allocrunner"
	"github.com/berth-io/berth/client/dynamicplugins"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi/fake"
	"github.com/berth-io/berth/testutil"
)

// TestMinimalRunner_ClaimsAndFreesAVolume runs a real client whose alloc
// runners are allocrunner.NewMinimal (no tasks, no driver calls) against
// an in-process server and a fake node plugin: the alloc's volume is
// claimed and published before the alloc reports running, and stopping
// the job unpublishes it, frees the claim and completes the alloc.
func TestMinimalRunner_ClaimsAndFreesAVolume(t *testing.T) {
	s := NewServer(t, nil)
	// Not t.TempDir(): the plugin socket must fit in 107 bytes.
	dir, err := os.MkdirTemp("", "minimal")
	must.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "csi.sock")
	plugin := fake.Start(t, sock)

	c := NewClient(t, s, "minimal", func(cfg *client.Config) {
		cfg.DataDir = filepath.Join(dir, "data")
		cfg.AllocRunnerFactory = allocrunner.NewMinimal
		cfg.CSI.Plugins = []*dynamicplugins.PluginInfo{{
			Name: "fake", Type: dynamicplugins.PluginTypeCSINode, SocketPath: sock, AllocID: "nodesim",
		}}
		cfg.CSI.IsMountpoint = func(string) (bool, error) { return false, nil }
	})
	WaitForNodeReady(t, s, c)
	testutil.WaitForResult(t, func() (bool, error) {
		p, err := s.State().CSIPluginByID(nil, "fake")
		if err != nil || p == nil || p.NodesHealthy != 1 {
			return false, fmt.Errorf("plugin not healthy on the node yet: %v %v", p, err)
		}
		return true, nil
	})
	must.NoError(t, s.RPC("CSIVolume.Register", &structs.CSIVolumeRegisterRequest{Volumes: []*structs.CSIVolume{{
		ID: "v", Name: "v", ExternalID: "ext-v", Namespace: structs.DefaultNamespace, PluginID: "fake",
		RequestedCapabilities: []*structs.CSIVolumeCapability{{
			AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
		}},
	}}}, &structs.CSIVolumeRegisterResponse{}))

	job := mockJob("minimal", structs.JobTypeService, 1, nil)
	job.TaskGroups[0].Volumes = map[string]*structs.VolumeRequest{"data": {
		Name: "data", Type: structs.VolumeTypeCSI, Source: "v",
		AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
	}}
	registerJob(t, s, job)
	running := waitForAllocs(t, s, job.ID, 1, structs.AllocClientStatusRunning)
	vol, err := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "v")
	must.NoError(t, err)
	must.MapContainsKey(t, vol.Claims, running[0].ID, must.Sprint("a running minimal alloc holds its claim"))
	must.Eq(t, 1, plugin.Calls("NodePublishVolume"))
	a, err := c.Alloc(running[0].ID)
	must.NoError(t, err)
	must.MapEmpty(t, a.TaskStates, must.Sprint("a minimal runner runs no tasks"))

	must.NoError(t, s.RPC("Job.Deregister", &structs.JobDeregisterRequest{JobID: job.ID, WriteRequest: structs.WriteRequest{Namespace: structs.DefaultNamespace}}, &structs.JobDeregisterResponse{}))
	testutil.WaitForResult(t, func() (bool, error) {
		vol, err := s.State().CSIVolumeByID(nil, structs.DefaultNamespace, "v")
		if err != nil {
			return false, err
		}
		a, err := s.State().AllocByID(nil, running[0].ID)
		if err != nil {
			return false, err
		}
		return len(vol.Claims) == 0 && a.ClientStatus == structs.AllocClientStatusComplete,
			fmt.Errorf("claims %v, alloc %s", vol.Claims, a.ClientStatus)
	})
	must.Eq(t, 1, plugin.Calls("NodeUnpublishVolume"))
}
