package csi

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/berth-io/berth/nomad/structs"
)

// The independent peer: csi-test's mock-driver v4.2.0, a separate process
// built from the tools module in tools/mock-driver by scripts/build-peers.sh.

const mockDriverName = "io.kubernetes.storage.mock"

// mockDriverBinary returns the mock-driver to run: $BERTH_MOCK_DRIVER, or
// <repo>/.bin/mock-driver, built on the spot if missing or stale.
func mockDriverBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("BERTH_MOCK_DRIVER"); bin != "" {
		_, err := os.Stat(bin)
		must.NoError(t, err, must.Sprint("BERTH_MOCK_DRIVER names a missing binary"))
		return bin
	}

	root := repoRoot(t)
	script := filepath.Join(root, "scripts", "build-peers.sh")
	cmd := exec.CommandContext(t.Context(), "bash", script)
	cmd.Env = append(os.Environ(), "BIN="+filepath.Join(root, ".bin"))
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr) && exitErr.ExitCode() == 3:
		t.Skipf("skipping: csi-test mock-driver is not built and its modules cannot be downloaded (no network?); "+
			"build it with scripts/build-peers.sh or set BERTH_MOCK_DRIVER:\n%s", out)
	default:
		t.Fatalf("building mock-driver with %s: %v\n%s", script, err, out)
	}
	return filepath.Join(root, ".bin", "mock-driver")
}

// repoRoot finds the repository from the package directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	must.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "scripts", "build-peers.sh")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("cannot find the repository root (scripts/build-peers.sh) above the test directory")
		}
		dir = parent
	}
}

// startMockDriver runs mock-driver on a socket in a temp dir until the test
// ends, and returns the socket path once the driver is listening.
func startMockDriver(t *testing.T, bin string) string {
	t.Helper()
	sock := socketPath(t)
	var output bytes.Buffer
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "CSI_ENDPOINT=unix://"+sock)
	cmd.Stdout, cmd.Stderr = &output, &output
	must.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("mock-driver output:\n%s", output.String())
		}
	})

	must.Wait(t, wait.InitialSuccess(
		wait.ErrorFunc(func() error {
			_, err := os.Stat(sock)
			return err
		}),
		wait.Timeout(30*time.Second),
		wait.Gap(10*time.Millisecond),
	), must.Sprint("mock-driver never created its socket"))
	return sock
}

func TestPeer_MockDriver(t *testing.T) {
	bin := mockDriverBinary(t)
	sock := startMockDriver(t, bin)

	c, err := New(sock, hclog.NewNullLogger())
	must.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	ctx := testCtx(t)

	t.Run("fingerprint", func(t *testing.T) {
		name, version, err := c.PluginInfo(ctx)
		must.NoError(t, err)
		must.EqOp(t, mockDriverName, name)
		must.NotEq(t, "", version)

		ready, err := c.Probe(ctx)
		must.NoError(t, err)
		must.True(t, ready)

		pcaps, err := c.PluginCapabilities(ctx)
		must.NoError(t, err)
		must.True(t, pcaps.ControllerService)
		must.True(t, pcaps.OnlineExpansion)
		info := structs.CSIInfo{}
		pcaps.Fill(&info)
		must.True(t, info.RequiresControllerPlugin)
		must.False(t, info.RequiresTopologies)

		ccaps, err := c.ControllerGetCapabilities(ctx)
		must.NoError(t, err)
		must.Eq(t, &structs.CSIControllerInfo{
			SupportsCreateDelete:             true,
			SupportsAttachDetach:             true,
			SupportsListVolumes:              true,
			SupportsGetCapacity:              true,
			SupportsCreateDeleteSnapshot:     true,
			SupportsListSnapshots:            true,
			SupportsClone:                    true,
			SupportsReadOnlyAttach:           true,
			SupportsExpand:                   true,
			SupportsListVolumesAttachedNodes: true,
			SupportsCondition:                true,
			SupportsGet:                      true,
		}, ccaps)

		// The mock lists an UNKNOWN (0) node capability; it is skipped.
		ncaps, err := c.NodeGetCapabilities(ctx)
		must.NoError(t, err)
		ni, err := c.NodeGetInfo(ctx)
		must.NoError(t, err)
		var ninfo structs.CSINodeInfo
		ncaps.Fill(&ninfo)
		ni.Fill(&ninfo)
		must.Eq(t, structs.CSINodeInfo{
			ID:                      mockDriverName,
			MaxVolumes:              2,
			RequiresNodeStageVolume: true,
			SupportsStats:           true,
			SupportsCondition:       true,
		}, ninfo)
	})

	t.Run("publish and unpublish", func(t *testing.T) {
		dir := t.TempDir()
		staging := filepath.Join(dir, "staging")
		target := filepath.Join(dir, "target")
		must.NoError(t, os.Mkdir(staging, 0o700))
		capability := &VolumeCapability{
			AccessMode:     structs.CSIVolumeAccessModeSingleNodeWriter,
			AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
			MountOptions:   &structs.CSIMountOptions{FSType: "ext4", MountFlags: []string{"noatime"}},
		}

		vol, err := c.ControllerCreateVolume(ctx, &ControllerCreateVolumeRequest{
			Name:          "berth-peer",
			CapacityRange: &CapacityRange{RequiredBytes: 1 << 20},
			Capabilities:  []*VolumeCapability{capability},
		})
		must.NoError(t, err)
		must.NotEq(t, "", vol.ExternalID)
		must.NoError(t, c.ControllerValidateCapabilities(ctx, &ControllerValidateVolumeRequest{
			ExternalID: vol.ExternalID, Capabilities: []*VolumeCapability{capability},
		}))

		pub, err := c.ControllerPublishVolume(ctx, &ControllerPublishVolumeRequest{
			ExternalID: vol.ExternalID, NodeID: mockDriverName, VolumeCapability: capability,
		})
		must.NoError(t, err)
		must.MapContainsKey(t, pub.PublishContext, "device")

		must.NoError(t, c.NodeStageVolume(ctx, &NodeStageVolumeRequest{
			ExternalID: vol.ExternalID, PublishContext: pub.PublishContext,
			StagingTargetPath: staging, VolumeCapability: capability,
		}))
		must.NoError(t, c.NodePublishVolume(ctx, &NodePublishVolumeRequest{
			ExternalID: vol.ExternalID, PublishContext: pub.PublishContext,
			StagingTargetPath: staging, TargetPath: target, VolumeCapability: capability,
		}))
		must.DirExists(t, target)

		must.NoError(t, c.NodeUnpublishVolume(ctx, &NodeUnpublishVolumeRequest{ExternalID: vol.ExternalID, TargetPath: target}))
		must.NoError(t, c.NodeUnstageVolume(ctx, &NodeUnstageVolumeRequest{ExternalID: vol.ExternalID, StagingTargetPath: staging}))
		must.NoError(t, c.ControllerUnpublishVolume(ctx, &ControllerUnpublishVolumeRequest{ExternalID: vol.ExternalID, NodeID: mockDriverName}))
		must.NoError(t, c.ControllerDeleteVolume(ctx, &ControllerDeleteVolumeRequest{ExternalID: vol.ExternalID}))

		// The volume is gone: the mock answers NotFound, and teardown is
		// still done.
		must.NoError(t, c.NodeUnpublishVolume(ctx, &NodeUnpublishVolumeRequest{ExternalID: vol.ExternalID, TargetPath: target}))
		must.NoError(t, c.NodeUnstageVolume(ctx, &NodeUnstageVolumeRequest{ExternalID: vol.ExternalID, StagingTargetPath: staging}))
		must.EqOp(t, uint64(0), c.Retries())
	})
}
