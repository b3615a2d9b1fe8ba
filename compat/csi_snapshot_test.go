package compat

import (
	"fmt"
	"io"
	"os"
	"testing"

	nomad "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/command/agent"
	"github.com/berth-io/berth/testutil"
)

// controllerAgent starts a -dev agent that runs the hostpath plugin as a
// monolith (controller and node, from the real berth binary, as `agent
// -dev` does) and waits until the servers see both healthy.
func controllerAgent(t *testing.T) *nomad.Client {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the hostpath plugin's node service reports unhealthy without CAP_SYS_ADMIN")
	}
	cfg := agent.DevConfig()
	zero := 0
	cfg.Ports = &agent.Ports{HTTP: &zero, RPC: &zero}
	cfg.LogLevel = "OFF"
	cfg.DevPlugin = &agent.DevPluginConfig{Executable: testutil.BuildBerth(t)}
	a, err := agent.NewAgent(cfg, io.Discard)
	must.NoError(t, err)
	t.Cleanup(func() { a.Shutdown() })
	client, err := nomad.NewClient(&nomad.Config{Address: "http://" + a.HTTPAddr()})
	must.NoError(t, err)
	testutil.WaitForResult(t, func() (bool, error) {
		p, _, err := client.CSIPlugins().Info(agent.DevPluginID, nil)
		if err != nil {
			return false, err
		}
		if p.ControllersHealthy != 1 || p.NodesHealthy != 1 {
			return false, fmt.Errorf("plugin %q: controllers %d, nodes %d healthy", p.ID, p.ControllersHealthy, p.NodesHealthy)
		}
		return true, nil
	})
	return client
}

// The upstream client's snapshot calls against an agent with a controller
// plugin: CreateSnapshot of a volume Berth created, ListSnapshotsOpts
// (with Nomad's shapes, and pagination), DeleteSnapshot.
func TestCompat_CSISnapshots(t *testing.T) {
	client := controllerAgent(t)
	vols := client.CSIVolumes()
	vol := &nomad.CSIVolume{ID: "snapsrc", Name: "snapsrc", PluginID: agent.DevPluginID,
		RequestedCapabilities: []*nomad.CSIVolumeCapability{{
			AccessMode: nomad.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: nomad.CSIVolumeAttachmentModeFilesystem,
		}}}
	created, _, err := vols.Create(vol, nil)
	must.NoError(t, err)
	must.SliceLen(t, 1, created)

	var snaps []*nomad.CSISnapshot
	for _, name := range []string{"nightly", "weekly"} {
		resp, _, err := vols.CreateSnapshot(&nomad.CSISnapshot{SourceVolumeID: "snapsrc", PluginID: agent.DevPluginID, Name: name}, nil)
		must.NoError(t, err)
		must.SliceLen(t, 1, resp.Snapshots)
		s := resp.Snapshots[0]
		must.NotEq(t, "", s.ID)
		must.Eq(t, "snapsrc", s.SourceVolumeID)
		must.Eq(t, agent.DevPluginID, s.PluginID)
		snaps = append(snaps, s)
	}

	// Page by page, as `nomad volume snapshot list -per-page 1` does.
	var seen []string
	token := ""
	for range 3 {
		page, _, err := vols.ListSnapshotsOpts(&nomad.CSISnapshotListRequest{PluginID: agent.DevPluginID,
			QueryOptions: nomad.QueryOptions{PerPage: 1, NextToken: token}})
		must.NoError(t, err)
		for _, s := range page.Snapshots {
			must.Eq(t, "snapsrc", s.SourceVolumeID)
			seen = append(seen, s.ID)
		}
		if token = page.NextToken; token == "" {
			break
		}
	}
	must.SliceContainsAll(t, []string{snaps[0].ID, snaps[1].ID}, seen)

	for _, s := range snaps {
		must.NoError(t, vols.DeleteSnapshot(&nomad.CSISnapshot{ID: s.ID, PluginID: agent.DevPluginID}, nil))
	}
	page, _, err := vols.ListSnapshotsOpts(&nomad.CSISnapshotListRequest{PluginID: agent.DevPluginID})
	must.NoError(t, err)
	must.SliceEmpty(t, page.Snapshots)

	// An unknown plugin is a clear error, not an empty list.
	_, _, err = vols.ListSnapshotsOpts(&nomad.CSISnapshotListRequest{PluginID: "nope"})
	must.Error(t, err)
	must.StrContains(t, err.Error(), `"nope"`)
}
