package fake

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/shoenig/test/must"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
)

func dial(t *testing.T, sock string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	must.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestPlugin_Defaults(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "csi.sock")
	Start(t, sock)
	conn := dial(t, sock)

	info, err := csipb.NewIdentityClient(conn).GetPluginInfo(testCtx(t), &csipb.GetPluginInfoRequest{})
	must.NoError(t, err)
	must.EqOp(t, "fake.csi.berth.io", info.GetName())

	ni, err := csipb.NewNodeClient(conn).NodeGetInfo(testCtx(t), &csipb.NodeGetInfoRequest{})
	must.NoError(t, err)
	must.EqOp(t, "fake-node", ni.GetNodeId())

	vol, err := csipb.NewControllerClient(conn).CreateVolume(testCtx(t), &csipb.CreateVolumeRequest{
		Name: "db", CapacityRange: &csipb.CapacityRange{RequiredBytes: 5},
	})
	must.NoError(t, err)
	must.EqOp(t, "vol-db", vol.GetVolume().GetVolumeId())
	must.EqOp(t, int64(5), vol.GetVolume().GetCapacityBytes())
}

func TestPlugin_ScriptsAndRecords(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "csi.sock")
	p := Start(t, sock)
	node := csipb.NewNodeClient(dial(t, sock))
	req := &csipb.NodePublishVolumeRequest{VolumeId: "vol-1", TargetPath: "/t", Readonly: true}

	p.NextErr("NodePublishVolume", codes.Unavailable, codes.OK, codes.Aborted)
	var got []codes.Code
	for range 4 {
		_, err := node.NodePublishVolume(testCtx(t), req)
		got = append(got, status.Code(err))
	}
	must.Eq(t, []codes.Code{codes.Unavailable, codes.OK, codes.Aborted, codes.OK}, got)
	must.EqOp(t, 4, p.Calls("NodePublishVolume"))
	must.EqOp(t, 0, p.Calls("NodeStageVolume"))
	must.Eq(t, req, p.LastRequest("NodePublishVolume").(*csipb.NodePublishVolumeRequest), must.Cmp(protocmp.Transform()))
	must.Nil(t, p.LastRequest("NodeStageVolume"))

	t.Run("set response", func(t *testing.T) {
		p.SetResponse("NodeGetInfo", &csipb.NodeGetInfoResponse{NodeId: "scripted", MaxVolumesPerNode: 3})
		ni, err := node.NodeGetInfo(testCtx(t), &csipb.NodeGetInfoRequest{})
		must.NoError(t, err)
		must.EqOp(t, "scripted", ni.GetNodeId())
		must.EqOp(t, int64(3), ni.GetMaxVolumesPerNode())

		p.SetResponse("NodeGetInfo", nil)
		ni, err = node.NodeGetInfo(testCtx(t), &csipb.NodeGetInfoRequest{})
		must.NoError(t, err)
		must.EqOp(t, "fake-node", ni.GetNodeId())
	})

	t.Run("response of the wrong type", func(t *testing.T) {
		p.SetResponse("NodeStageVolume", &csipb.NodeGetInfoResponse{})
		_, err := node.NodeStageVolume(testCtx(t), &csipb.NodeStageVolumeRequest{})
		must.EqOp(t, codes.Internal, status.Code(err))
	})

	t.Run("unknown method panics", func(t *testing.T) {
		defer func() { must.NotNil(t, recover()) }()
		p.NextErr("NodePublish", codes.Unavailable)
	})
}

func TestPlugin_Hang(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "csi.sock")
	p := Start(t, sock)
	node := csipb.NewNodeClient(dial(t, sock))
	p.SetHang("NodeUnpublishVolume", true)

	t.Run("until the caller gives up", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		_, err := node.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: "v"})
		must.EqOp(t, codes.DeadlineExceeded, status.Code(err))
	})

	t.Run("until the plugin stops", func(t *testing.T) {
		errCh := make(chan error, 1)
		go func() {
			_, err := node.NodeUnpublishVolume(t.Context(), &csipb.NodeUnpublishVolumeRequest{VolumeId: "v"})
			errCh <- err
		}()
		must.NoError(t, p.WaitForCalls(testCtx(t), "NodeUnpublishVolume", 2))
		p.Stop() // must not wait for the hung call's caller
		select {
		case err := <-errCh:
			must.EqOp(t, codes.Unavailable, status.Code(err))
		case <-time.After(10 * time.Second):
			t.Fatal("hung call not released by Stop")
		}
	})
}

// TestPlugin_Slow: a slow call's caller gives up first, and the plugin
// still finishes the call afterwards, as the observer sees.
func TestPlugin_Slow(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "csi.sock")
	p := Start(t, sock)
	done := make(chan Call, 1)
	p.SetObserver(func(c Call) {
		if c.Done && c.Method == "NodePublishVolume" {
			done <- c
		}
	})
	node := csipb.NewNodeClient(dial(t, sock))
	p.SetSlow("NodePublishVolume", 300*time.Millisecond)

	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		// Give up once the plugin has the call.
		_ = p.WaitForCalls(t.Context(), "NodePublishVolume", 1)
		cancel()
	}()
	_, err := node.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{VolumeId: "v"})
	must.EqOp(t, codes.Canceled, status.Code(err))
	select {
	case c := <-done:
		t.Fatalf("the slow call was over before its caller gave up: %+v", c)
	default:
	}
	select {
	case c := <-done:
		must.NoError(t, c.Err, must.Sprint("the call goes on to its normal end after its caller gave up"))
	case <-time.After(10 * time.Second):
		t.Fatal("the slow call never finished")
	}

	p.ClearFaults()
	_, err = node.NodePublishVolume(testCtx(t), &csipb.NodePublishVolumeRequest{VolumeId: "v"})
	must.NoError(t, err)
	must.NoError(t, (<-done).Err)
}

func TestPlugin_Restart(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "csi.sock")
	p := Start(t, sock)
	must.Error(t, p.Listen(sock))

	p.Stop()
	p.Stop() // idempotent
	_, err := os.Stat(sock)
	must.True(t, os.IsNotExist(err))

	// A stale socket file does not stop a new plugin.
	must.NoError(t, os.WriteFile(sock, nil, 0o600))
	must.NoError(t, p.Listen(sock))
	_, err = csipb.NewIdentityClient(dial(t, sock)).Probe(testCtx(t), &csipb.ProbeRequest{})
	must.NoError(t, err)
	must.EqOp(t, 1, p.Calls("Probe"))
}

func TestPlugin_WaitForCalls(t *testing.T) {
	p := New()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	must.ErrorIs(t, p.WaitForCalls(ctx, "Probe", 1), context.Canceled)
	must.NoError(t, p.WaitForCalls(t.Context(), "Probe", 0))
}

// TestPlugin_HonoursTheDeadlineWhereTheCallTakesEffect: a call whose
// context ended before it takes effect fails with the context's code and
// takes no effect (the observer sees it failed), as a plugin that honours
// gRPC deadlines does; the servers' PublishUntil and UnpublishUntil rest
// on it (seed 24875: a starved process applied a ControllerPublish long
// after its deadline). A slowed call is the plugin that does not.
func TestPlugin_HonoursTheDeadlineWhereTheCallTakesEffect(t *testing.T) {
	p := Start(t, filepath.Join(t.TempDir(), "csi.sock"))
	var done []Call
	p.SetObserver(func(c Call) {
		if c.Done {
			done = append(done, c)
		}
	})
	ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Millisecond))
	defer cancel()
	req := &csipb.ControllerPublishVolumeRequest{VolumeId: "v", NodeId: "n"}
	_, err := p.ControllerPublishVolume(ctx, req)
	must.EqOp(t, codes.DeadlineExceeded, status.Code(err))
	must.SliceLen(t, 1, done)
	must.EqOp(t, codes.DeadlineExceeded, status.Code(done[0].Err), must.Sprint("the observer must see it fail, not land"))

	_, err = p.ControllerPublishVolume(t.Context(), req)
	must.NoError(t, err)
	must.NoError(t, done[1].Err)

	p.SetSlow("ControllerPublishVolume", time.Millisecond)
	_, err = p.ControllerPublishVolume(ctx, req)
	must.NoError(t, err, must.Sprint("a slowed call goes on past its caller's deadline"))
}
