package csiendpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
	"google.golang.org/grpc/codes"

	"github.com/berth-io/berth/client/pluginmanager/csimanager"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi"
	"github.com/berth-io/berth/plugins/csi/fake"
)

// plugins is a Plugins with one controller client and one node plugin.
type plugins struct {
	ctrl csi.Client
	node csimanager.VolumeManager
}

func (p *plugins) ControllerClient(id string) (csi.Client, error) {
	if p.ctrl == nil || id != "ctrl" {
		return nil, fmt.Errorf("CSI controller plugin %q is not running", id)
	}
	return p.ctrl, nil
}

func (p *plugins) NodePlugin(id string) (csimanager.VolumeManager, bool) {
	return p.node, p.node != nil && id == "nodeplug"
}

// volumes is a VolumeManager whose UnmountVolume returns nextErr and
// counts calls; its other methods are not used by the endpoints.
type volumes struct {
	csimanager.VolumeManager
	nextErr  error
	unmounts int
}

func (v *volumes) UnmountVolume(context.Context, csimanager.VolumeRef, string, *csimanager.UsageOptions) error {
	v.unmounts++
	return v.nextErr
}

// controllerPlugin starts a fake CSI plugin on a real unix socket and
// returns it with a client that tries each RPC once.
func controllerPlugin(t *testing.T) (*fake.Plugin, csi.Client) {
	dir, err := os.MkdirTemp("", "csie") // short: unix socket paths are limited
	must.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "csi.sock")
	p := fake.Start(t, sock)
	cl, err := csi.New(sock, hclog.NewNullLogger(), csi.WithMaxAttempts(1))
	must.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	return p, cl
}

func ctrlReq() structs.ClientCSIControllerRequest {
	return structs.ClientCSIControllerRequest{PluginID: "ctrl", VolumeID: "vol1", ExternalID: "ext-1"}
}

func TestController_PublishTranslatesTheRequest(t *testing.T) {
	p, cl := controllerPlugin(t)
	e := NewController(t.Context(), Config{NodeID: "node-a", Plugins: &plugins{ctrl: cl}})
	p.SetResponse("ControllerPublishVolume", &csipb.ControllerPublishVolumeResponse{PublishContext: map[string]string{"dev": "/dev/x"}})

	var reply structs.ClientCSIControllerPublishResponse
	must.NoError(t, structs.DecodeWireError(e.Publish(&structs.ClientCSIControllerPublishRequest{
		ClientCSIControllerRequest: ctrlReq(),
		ExternalNodeID:             "ext-node",
		AccessMode:                 structs.CSIVolumeAccessModeSingleNodeWriter,
		AttachmentMode:             structs.CSIVolumeAttachmentModeFilesystem,
		MountOptions:               &structs.CSIMountOptions{FSType: "xfs"},
		ReadOnly:                   true,
	}, &reply)))
	must.Eq(t, map[string]string{"dev": "/dev/x"}, reply.PublishContext)
	got := p.LastRequest("ControllerPublishVolume").(*csipb.ControllerPublishVolumeRequest)
	must.Eq(t, "ext-1", got.VolumeId)
	must.Eq(t, "ext-node", got.NodeId)
	must.True(t, got.Readonly)
	must.Eq(t, "xfs", got.VolumeCapability.GetMount().GetFsType())
}

// Plugin failures cross the session with csi.ServerCode's code and a
// message naming the volume, plugin and node.
func TestController_ErrorCodes(t *testing.T) {
	cases := []struct {
		name string
		code codes.Code
		want error
	}{
		{"final", codes.InvalidArgument, structs.ErrInvalid},
		{"retryable", codes.Unavailable, structs.ErrRetryable},
		{"publish race", codes.FailedPrecondition, structs.ErrRetryable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, cl := controllerPlugin(t)
			e := NewController(t.Context(), Config{NodeID: "node-a", Plugins: &plugins{ctrl: cl}})
			p.NextErr("ControllerPublishVolume", c.code)
			err := structs.DecodeWireError(e.Publish(&structs.ClientCSIControllerPublishRequest{
				ClientCSIControllerRequest: ctrlReq(), ExternalNodeID: "ext-node",
				AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
			}, &structs.ClientCSIControllerPublishResponse{}))
			must.True(t, errors.Is(err, c.want), must.Sprintf("got %v", err))
			must.StrContains(t, err.Error(), `volume "vol1" by plugin "ctrl" on node node-a`)
		})
	}
}

// Modify passes the mutable parameters through; the plugin's refusal
// crosses the session as CodeInvalid naming the volume and plugin.
func TestController_Modify(t *testing.T) {
	p, cl := controllerPlugin(t)
	e := NewController(t.Context(), Config{NodeID: "node-a", Plugins: &plugins{ctrl: cl}})
	req := &structs.ClientCSIControllerModifyRequest{ClientCSIControllerRequest: ctrlReq(), MutableParameters: map[string]string{"note": "x"}}
	must.NoError(t, structs.DecodeWireError(e.Modify(req, &structs.ClientCSIControllerResponse{})))
	got := p.LastRequest("ControllerModifyVolume").(*csipb.ControllerModifyVolumeRequest)
	must.Eq(t, "ext-1", got.VolumeId)
	must.Eq(t, map[string]string{"note": "x"}, got.MutableParameters)

	p.NextErr("ControllerModifyVolume", codes.InvalidArgument)
	err := structs.DecodeWireError(e.Modify(req, &structs.ClientCSIControllerResponse{}))
	must.True(t, errors.Is(err, structs.ErrInvalid), must.Sprintf("got %v", err))
	must.StrContains(t, err.Error(), `ControllerModifyVolume of volume "vol1" by plugin "ctrl" on node node-a`)
}

func TestController_PluginNotHereIsRetryable(t *testing.T) {
	e := NewController(t.Context(), Config{NodeID: "node-a", Plugins: &plugins{}})
	err := structs.DecodeWireError(e.Delete(&structs.ClientCSIControllerDeleteRequest{ClientCSIControllerRequest: ctrlReq()},
		&structs.ClientCSIControllerResponse{}))
	must.True(t, errors.Is(err, structs.ErrRetryable), must.Sprintf("got %v", err))
	must.StrContains(t, err.Error(), `node node-a: CSI controller plugin "ctrl"`)
}

func TestController_CreateWithoutAnIDIsInvalid(t *testing.T) {
	p, cl := controllerPlugin(t)
	e := NewController(t.Context(), Config{NodeID: "node-a", Plugins: &plugins{ctrl: cl}})
	p.SetResponse("CreateVolume", &csipb.CreateVolumeResponse{Volume: &csipb.Volume{}})
	err := structs.DecodeWireError(e.Create(&structs.ClientCSIControllerCreateRequest{
		ClientCSIControllerRequest: ctrlReq(), Name: "vol1",
		Capabilities: []*structs.CSIVolumeCapability{{AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeBlockDevice}},
	}, &structs.ClientCSIControllerCreateResponse{}))
	must.True(t, errors.Is(err, structs.ErrInvalid), must.Sprintf("got %v", err))
	must.StrContains(t, err.Error(), "returned no volume ID")
}

func TestNode_Detach(t *testing.T) {
	finalErr := &csi.Error{RPC: "NodeUnpublishVolume", Class: csi.Final, Err: errors.New("bad target path")}
	cases := []struct {
		name     string
		running  bool
		pluginID string
		unmount  error
		want     error // nil: success
		unmounts int
	}{
		{"unpublished", false, "nodeplug", nil, nil, 1},
		{"tasks still run", true, "nodeplug", nil, structs.ErrNotReady, 0},
		{"plugin not here", false, "other", nil, structs.ErrRetryable, 0},
		{"final plugin error", false, "nodeplug", fmt.Errorf("unpublishing: %w", finalErr), structs.ErrInvalid, 1},
		{"local failure retries", false, "nodeplug", errors.New("device or resource busy"), structs.ErrRetryable, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vm := &volumes{nextErr: c.unmount}
			e := NewNode(t.Context(), Config{
				NodeID: "node-a", Plugins: &plugins{node: vm}, Logger: hclog.NewNullLogger(),
				TasksRunning: func(id string) bool { return c.running && id == "alloc-1" },
			})
			err := structs.DecodeWireError(e.Detach(&structs.ClientCSINodeDetachRequest{
				PluginID: c.pluginID, VolumeID: "vol1", AllocID: "alloc-1", Namespace: "default",
			}, &structs.ClientCSIControllerResponse{}))
			if c.want == nil {
				must.NoError(t, err)
			} else {
				must.True(t, errors.Is(err, c.want), must.Sprintf("got %v", err))
				must.StrContains(t, err.Error(), "node node-a")
			}
			must.Eq(t, c.unmounts, vm.unmounts)
		})
	}
}

// A publish ends at the servers' deadline, retries included, however long
// the plugin hangs: the servers wait that deadline out before they
// controller-unpublish, so nothing may land after it. A request that
// arrives after its deadline never reaches the plugin.
func TestController_PublishEndsAtTheServersDeadline(t *testing.T) {
	p, cl := controllerPlugin(t)
	e := NewController(t.Context(), Config{NodeID: "node-a", Plugins: &plugins{ctrl: cl}})
	req := func(deadline time.Time) *structs.ClientCSIControllerPublishRequest {
		return &structs.ClientCSIControllerPublishRequest{
			ClientCSIControllerRequest: ctrlReq(), ExternalNodeID: "ext-node",
			AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
			Deadline: deadline.UnixNano(),
		}
	}

	err := structs.DecodeWireError(e.Publish(req(time.Now().Add(-time.Second)), &structs.ClientCSIControllerPublishResponse{}))
	must.True(t, errors.Is(err, structs.ErrRetryable), must.Sprintf("got %v", err))
	must.StrContains(t, err.Error(), "deadline")
	must.Eq(t, 0, p.Calls("ControllerPublishVolume"))

	p.SetHang("ControllerPublishVolume", true)
	deadline := time.Now().Add(200 * time.Millisecond)
	start := time.Now()
	err = structs.DecodeWireError(e.Publish(req(deadline), &structs.ClientCSIControllerPublishResponse{}))
	must.Error(t, err)
	must.False(t, time.Now().Before(deadline))
	// Not CallTimeout (2 minutes): the bound is the deadline, not a speed.
	must.Less(t, CallTimeout/2, time.Since(start))
	must.Eq(t, 1, p.Calls("ControllerPublishVolume"))
}

// An unpublish ends at the servers' deadline, retries included, as a
// publish does: a server that stopped waiting holds the node's controller
// calls only until then, so an abandoned unpublish must not land after it,
// on top of a later publish to the node (seed 4060). A request that
// arrives after its deadline never reaches the plugin.
func TestController_UnpublishEndsAtTheServersDeadline(t *testing.T) {
	p, cl := controllerPlugin(t)
	e := NewController(t.Context(), Config{NodeID: "node-a", Plugins: &plugins{ctrl: cl}})
	req := func(deadline time.Time) *structs.ClientCSIControllerUnpublishRequest {
		return &structs.ClientCSIControllerUnpublishRequest{
			ClientCSIControllerRequest: ctrlReq(), ExternalNodeID: "ext-node", Deadline: deadline.UnixNano(),
		}
	}

	err := structs.DecodeWireError(e.Unpublish(req(time.Now().Add(-time.Second)), &structs.ClientCSIControllerResponse{}))
	must.True(t, errors.Is(err, structs.ErrRetryable), must.Sprintf("got %v", err))
	must.StrContains(t, err.Error(), "deadline")
	must.Eq(t, 0, p.Calls("ControllerUnpublishVolume"))

	p.SetHang("ControllerUnpublishVolume", true)
	deadline := time.Now().Add(200 * time.Millisecond)
	start := time.Now()
	err = structs.DecodeWireError(e.Unpublish(req(deadline), &structs.ClientCSIControllerResponse{}))
	must.Error(t, err)
	must.False(t, time.Now().Before(deadline))
	// Not CallTimeout (2 minutes): the bound is the deadline, not a speed.
	must.Less(t, CallTimeout/2, time.Since(start))
	must.Eq(t, 1, p.Calls("ControllerUnpublishVolume"))
}
