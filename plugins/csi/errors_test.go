package csi

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/shoenig/test/must"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/berth-io/berth/nomad/structs"
)

func TestClassify(t *testing.T) {
	st := func(c codes.Code) error { return status.Error(c, "plugin says no") }

	cases := []struct {
		name   string
		method string
		err    error
		want   Class
	}{
		{"nil", "NodePublishVolume", nil, Final},
		{"unavailable", "NodePublishVolume", st(codes.Unavailable), Retryable},
		{"deadline exceeded", "ControllerPublishVolume", st(codes.DeadlineExceeded), Retryable},
		{"aborted", "CreateVolume", st(codes.Aborted), Retryable},
		{"resource exhausted", "ControllerPublishVolume", st(codes.ResourceExhausted), Retryable},
		{"full method name", "/csi.v1.Node/NodeStageVolume", st(codes.Unavailable), Retryable},
		{"wrapped status", "Probe", fmt.Errorf("probing: %w", st(codes.Unavailable)), Retryable},
		{"attempt timeout as ctx error", "NodePublishVolume", context.DeadlineExceeded, Retryable},
		{"canceled ctx", "NodePublishVolume", context.Canceled, Final},
		{"canceled status", "NodePublishVolume", st(codes.Canceled), Final},

		// FAILED_PRECONDITION: publish races retry, everything else is final.
		{"precondition controller publish", "ControllerPublishVolume", st(codes.FailedPrecondition), Retryable},
		{"precondition node stage", "NodeStageVolume", st(codes.FailedPrecondition), Retryable},
		{"precondition node publish", "NodePublishVolume", st(codes.FailedPrecondition), Retryable},
		{"precondition delete volume in use", "DeleteVolume", st(codes.FailedPrecondition), Final},
		{"precondition delete snapshot in use", "DeleteSnapshot", st(codes.FailedPrecondition), Final},
		{"precondition controller expand in use", "ControllerExpandVolume", st(codes.FailedPrecondition), Final},
		{"precondition node expand", "NodeExpandVolume", st(codes.FailedPrecondition), Final},
		{"precondition probe unhealthy", "Probe", st(codes.FailedPrecondition), Final},

		// NOT_FOUND: teardown is done, anything else is final.
		{"not found controller unpublish", "ControllerUnpublishVolume", st(codes.NotFound), AlreadyDone},
		{"not found node unstage", "NodeUnstageVolume", st(codes.NotFound), AlreadyDone},
		{"not found node unpublish", "/csi.v1.Node/NodeUnpublishVolume", st(codes.NotFound), AlreadyDone},
		{"not found delete volume", "DeleteVolume", st(codes.NotFound), AlreadyDone},
		{"not found delete snapshot", "DeleteSnapshot", st(codes.NotFound), AlreadyDone},
		{"not found controller publish", "ControllerPublishVolume", st(codes.NotFound), Final},
		{"not found node publish", "NodePublishVolume", st(codes.NotFound), Final},
		{"not found node expand", "NodeExpandVolume", st(codes.NotFound), Final},

		{"invalid argument", "NodePublishVolume", st(codes.InvalidArgument), Final},
		{"already exists", "NodePublishVolume", st(codes.AlreadyExists), Final},
		{"unimplemented", "ControllerPublishVolume", st(codes.Unimplemented), Final},
		{"internal", "NodeStageVolume", st(codes.Internal), Final},
		{"unknown", "NodeStageVolume", st(codes.Unknown), Final},
		{"not a status", "NodeStageVolume", errors.New("boom"), Final},
		{"closed", "Probe", ErrClosed, Final},
		{"invalid request", "Probe", fmt.Errorf("%w: x", ErrInvalidRequest), Final},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, tc.want, Classify(tc.method, tc.err))
		})
	}
}

func TestError(t *testing.T) {
	cause := status.Error(codes.Unavailable, "connection refused")
	cases := []struct {
		name     string
		err      *Error
		msg      string
		sentinel error
	}{
		{
			name:     "retryable with volume and attempts",
			err:      &Error{RPC: "NodePublishVolume", VolumeID: "vol-1", Class: Retryable, Attempts: 3, Err: cause},
			msg:      `csi NodePublishVolume for volume "vol-1" (3 attempts): rpc error: code = Unavailable desc = connection refused`,
			sentinel: ErrRetryable,
		},
		{
			name:     "final with snapshot",
			err:      &Error{RPC: "CreateSnapshot", VolumeID: "vol-1", SnapshotID: "snap-1", Class: Final, Attempts: 1, Err: cause},
			msg:      `csi CreateSnapshot for volume "vol-1" for snapshot "snap-1": rpc error: code = Unavailable desc = connection refused`,
			sentinel: ErrFinal,
		},
		{
			name:     "no subject",
			err:      &Error{RPC: "Probe", Class: Final, Err: cause},
			msg:      `csi Probe: rpc error: code = Unavailable desc = connection refused`,
			sentinel: ErrFinal,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.EqOp(t, tc.msg, tc.err.Error())
			must.ErrorIs(t, tc.err, tc.sentinel)
			must.ErrorIs(t, tc.err, cause)
			must.EqOp(t, codes.Unavailable, status.Code(tc.err))
		})
	}
}

// TestServerCode: each class of CSI failure crosses RPC with one code,
// whoever maps it (the controller endpoint and the node detach both use
// ServerCode).
func TestServerCode(t *testing.T) {
	st := func(c codes.Code) error { return status.Error(c, "plugin says no") }
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()

	cases := []struct {
		name string
		err  error
		want structs.ErrorCode
	}{
		{"nil", nil, ""},
		// Through result, as a Client method returns them.
		{"final class", result(live, "ControllerPublishVolume", volume("v"), st(codes.InvalidArgument)), structs.CodeInvalid},
		{"unimplemented", result(live, "ControllerUnpublishVolume", volume("v"), st(codes.Unimplemented)), structs.CodeUnsupported},
		{"wrapped unimplemented", fmt.Errorf("unstaging: %w", result(live, "NodeUnstageVolume", volume("v"), st(codes.Unimplemented))), structs.CodeUnsupported},
		{"final by default", result(live, "ControllerPublishVolume", volume("v"), st(codes.Unknown)), structs.CodeInvalid},
		{"retryable class", result(live, "ControllerPublishVolume", volume("v"), st(codes.Unavailable)), structs.CodeRetryable},
		{"publish race", result(live, "ControllerPublishVolume", volume("v"), st(codes.FailedPrecondition)), structs.CodeRetryable},
		{"caller ctx ended", result(ended, "CreateVolume", volume("v"), st(codes.Unavailable)), structs.CodeRetryable},
		{"invalid request", invalid("NodeStageVolume", volume("v"), errors.New("no staging path")), structs.CodeInvalid},
		{"already done class", &Error{RPC: "DeleteVolume", Class: AlreadyDone, Err: st(codes.NotFound)}, structs.CodeInvalid},
		{"closed client", &Error{RPC: "Probe", Class: Final, Err: ErrClosed}, structs.CodeInvalid},
		// Wrapped by the code around the RPCs (csimanager).
		{"wrapped final", fmt.Errorf("staging volume %q: %w", "v", result(live, "NodeStageVolume", volume("v"), st(codes.NotFound))), structs.CodeInvalid},
		{"wrapped retryable", fmt.Errorf("staging volume %q: %w", "v", result(live, "NodeStageVolume", volume("v"), st(codes.Aborted))), structs.CodeRetryable},
		{"deadline", fmt.Errorf("unpublishing: %w", context.DeadlineExceeded), structs.CodeRetryable},
		{"canceled", fmt.Errorf("unpublishing: %w", context.Canceled), structs.CodeRetryable},
		{"local failure", fmt.Errorf("removing publish dir: %w", errors.New("device or resource busy")), structs.CodeRetryable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			must.Eq(t, c.want, ServerCode(c.err))
		})
	}
}
