package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/client/csiendpoint"
	"github.com/berth-io/berth/client/internal/testlog"
	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi/fake"
	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/plugins/drivers/mock"
	"github.com/berth-io/berth/testutil"
)

// TestCSINodeDetach: the servers' request to unpublish a volume for an
// alloc is refused while this client runs the alloc's tasks, and for an
// alloc the client no longer knows it unpublishes, leaving the staging to
// the alloc that still uses the volume here.
func TestCSINodeDetach(t *testing.T) {
	srv := newCSIFakeServer(&structs.CSIVolume{ID: "vol1", Namespace: "default", PluginID: "fakeplug"})
	cfg := &Config{
		DataDir: t.TempDir(), Node: &structs.Node{Name: "n"}, RPC: srv, Logger: testlog.Logger(t),
		Drivers:           map[string]drivers.Driver{mock.Name: mock.New(hclog.NewNullLogger(), mock.Config{MountConfig: structs.MountConfigSupportAll})},
		UpdateBatchWindow: 5 * time.Millisecond, CSI: fastCSIConfig(),
		RetryBackoff: helper.Backoff{Base: 50 * time.Millisecond, Max: 200 * time.Millisecond},
	}
	c := newTestClient(t, cfg)
	defer c.Shutdown()
	sock := shortSocket(t)
	p := fake.Start(t, sock)
	registerNodePlugin(t, c, "fakeplug", sock)
	testutil.WaitForResult(t, func() (bool, error) { return srv.lastRegistered() != nil, nil })
	a := csiTestAlloc(c.NodeID(), mock.Name, "vol1", &structs.Task{Name: "db"})
	srv.placeAlloc(a)
	waitStatus(t, srv.fakeServer, a.ID, structs.AllocClientStatusRunning)

	ep := csiendpoint.NewNode(context.Background(), c.csiEndpointConfig())
	req := func(allocID string) *structs.ClientCSINodeDetachRequest {
		return &structs.ClientCSINodeDetachRequest{PluginID: "fakeplug", Namespace: "default", VolumeID: "vol1", AllocID: allocID,
			AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}
	}
	err := structs.DecodeWireError(ep.Detach(req(a.ID), &structs.ClientCSIControllerResponse{}))
	must.True(t, errors.Is(err, structs.ErrNotReady), must.Sprintf("got %v", err))
	must.StrContains(t, err.Error(), "alloc "+a.ID+" still runs on node "+c.NodeID())
	must.Eq(t, 0, p.Calls("NodeUnpublishVolume"))

	// An alloc this client forgot: unpublished; the running alloc still
	// uses the staging, so it stays.
	must.NoError(t, structs.DecodeWireError(ep.Detach(req(helper.UUID()), &structs.ClientCSIControllerResponse{})))
	must.Eq(t, 1, p.Calls("NodeUnpublishVolume"))
	must.Eq(t, 0, p.Calls("NodeUnstageVolume"))
	got, err := c.Alloc(a.ID)
	must.NoError(t, err)
	must.Eq(t, structs.AllocClientStatusRunning, got.ClientStatus)

	// A plugin this node does not run: retryable, naming it.
	r := req(helper.UUID())
	r.PluginID = "other"
	err = structs.DecodeWireError(ep.Detach(r, &structs.ClientCSIControllerResponse{}))
	must.True(t, errors.Is(err, structs.ErrRetryable), must.Sprintf("got %v", err))
	must.StrContains(t, err.Error(), `CSI node plugin "other"`)
}
