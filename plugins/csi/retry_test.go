package csi

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil"
)

func publishReq() *NodePublishVolumeRequest {
	return &NodePublishVolumeRequest{
		ExternalID: "vol-1",
		TargetPath: "/csi/per-alloc/a1/vol-1/rw-file-system-single-node-writer",
		VolumeCapability: &VolumeCapability{
			AccessMode:     structs.CSIVolumeAccessModeSingleNodeWriter,
			AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
		},
	}
}

func TestRetry_UnavailableTwiceThenOK(t *testing.T) {
	h := newHarness(t, WithBackoff(func(n int) time.Duration { return time.Duration(n) * time.Second }))
	h.plugin.NextErr("NodePublishVolume", codes.Unavailable, codes.Unavailable)

	err := h.client.NodePublishVolume(testCtx(t), publishReq())
	must.NoError(t, err)
	must.EqOp(t, 3, h.plugin.Calls("NodePublishVolume"))
	must.EqOp(t, uint64(2), h.client.Retries())
	// The backoff was asked for, and waited on, before each retry.
	must.Eq(t, []time.Duration{time.Second, 2 * time.Second}, h.clock.Waits())
	must.EqOp(t, float32(2), h.metrics.get("csi.rpc.retry;method=NodePublishVolume;code=Unavailable"))
}

func TestRetry_FinalErrorIsNotRetried(t *testing.T) {
	h := newHarness(t)
	h.plugin.NextErr("NodePublishVolume", codes.InvalidArgument)

	err := h.client.NodePublishVolume(testCtx(t), publishReq())
	must.ErrorIs(t, err, ErrFinal)
	must.False(t, errors.Is(err, ErrRetryable))
	must.EqOp(t, codes.InvalidArgument, status.Code(err))
	must.StrContains(t, err.Error(), `csi NodePublishVolume for volume "vol-1"`)
	must.EqOp(t, 1, h.plugin.Calls("NodePublishVolume"))
	must.EqOp(t, uint64(0), h.client.Retries())
	must.SliceEmpty(t, h.clock.Waits())
}

func TestRetry_GivesUpAfterMaxAttempts(t *testing.T) {
	h := newHarness(t, WithMaxAttempts(4))
	h.plugin.NextErr("NodeStageVolume", codes.Aborted, codes.Aborted, codes.Aborted, codes.Aborted, codes.Aborted)

	err := h.client.NodeStageVolume(testCtx(t), &NodeStageVolumeRequest{
		ExternalID:        "vol-1",
		StagingTargetPath: "/csi/staging/default/vol-1/rw",
		VolumeCapability:  publishReq().VolumeCapability,
	})
	must.ErrorIs(t, err, ErrRetryable)
	must.EqOp(t, codes.Aborted, status.Code(err))
	must.StrContains(t, err.Error(), "(4 attempts)")
	var cerr *Error
	must.True(t, errors.As(err, &cerr))
	must.EqOp(t, 4, cerr.Attempts)
	must.EqOp(t, 4, h.plugin.Calls("NodeStageVolume"))
	must.EqOp(t, uint64(3), h.client.Retries())
}

// A single-node-writer conflict is retried, but never reported as success.
func TestRetry_PublishConflictIsNeverSuccess(t *testing.T) {
	h := newHarness(t, WithMaxAttempts(3))
	h.plugin.NextErr("ControllerPublishVolume",
		codes.FailedPrecondition, codes.FailedPrecondition, codes.FailedPrecondition)

	resp, err := h.client.ControllerPublishVolume(testCtx(t), &ControllerPublishVolumeRequest{
		ExternalID:       "vol-1",
		NodeID:           "node-2",
		VolumeCapability: publishReq().VolumeCapability,
	})
	must.Nil(t, resp)
	must.ErrorIs(t, err, ErrRetryable)
	must.EqOp(t, codes.FailedPrecondition, status.Code(err))
	must.EqOp(t, 3, h.plugin.Calls("ControllerPublishVolume"))
}

func TestRetry_CancelDuringBackoff(t *testing.T) {
	clock := &stuckClock{waiting: make(chan time.Duration, 1)}
	h := newHarness(t, WithClock(clock), WithBackoff(func(int) time.Duration { return time.Hour }))
	h.plugin.NextErr("NodePublishVolume", codes.Unavailable)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errCh := make(chan error, 1)
	go func() { errCh <- h.client.NodePublishVolume(ctx, publishReq()) }()

	// Cancel once the client is waiting out its hour-long backoff.
	select {
	case d := <-clock.waiting:
		must.EqOp(t, time.Hour, d)
	case <-time.After(10 * time.Second):
		t.Fatal("client never started a backoff wait")
	}
	cancel()

	select {
	case err := <-errCh:
		must.ErrorIs(t, err, context.Canceled)
		must.False(t, errors.Is(err, ErrRetryable))
		must.False(t, errors.Is(err, ErrFinal))
	case <-time.After(10 * time.Second):
		t.Fatal("call did not return after cancel")
	}
	must.EqOp(t, 1, h.plugin.Calls("NodePublishVolume"))
	must.EqOp(t, uint64(0), h.client.Retries())
}

// A plugin that never answers costs each attempt its own timeout, and the
// timeouts are retried.
func TestRetry_PerAttemptTimeout(t *testing.T) {
	h := newHarness(t, WithMaxAttempts(2), WithTimeouts(Timeouts{Call: 50 * time.Millisecond}))
	h.plugin.SetHang("NodeUnpublishVolume", true)

	err := h.client.NodeUnpublishVolume(testCtx(t), &NodeUnpublishVolumeRequest{
		ExternalID: "vol-1", TargetPath: "/csi/per-alloc/a1/vol-1/rw",
	})
	must.ErrorIs(t, err, ErrRetryable)
	must.EqOp(t, codes.DeadlineExceeded, status.Code(err))
	must.EqOp(t, 2, h.plugin.Calls("NodeUnpublishVolume"))
}

// The caller's deadline bounds the call even when attempts may take longer.
func TestRetry_CallerDeadline(t *testing.T) {
	h := newHarness(t)
	h.plugin.SetHang("Probe", true)

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	// The plugin hangs for good: only the caller's deadline ends the call.
	var ready bool
	var err error
	testutil.Returns(t, "a Probe past its caller's deadline", func() { ready, err = h.client.Probe(ctx) })
	must.False(t, ready)
	must.ErrorIs(t, err, context.DeadlineExceeded)
	// One attempt at most: on a loaded machine the deadline may pass
	// before the first attempt reaches the plugin, but none follows it.
	must.LessEq(t, 1, h.plugin.Calls("Probe"))
}

func TestShouldRetry(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "down")
	cases := []struct {
		name    string
		rpc     string
		err     error
		attempt int
		max     int
		want    bool
	}{
		{"retryable with attempts left", "NodePublishVolume", unavailable, 1, 3, true},
		{"retryable on last attempt", "NodePublishVolume", unavailable, 3, 3, false},
		{"single attempt allowed", "NodePublishVolume", unavailable, 1, 1, false},
		{"final", "NodePublishVolume", status.Error(codes.InvalidArgument, "bad"), 1, 3, false},
		{"already done", "NodeUnpublishVolume", status.Error(codes.NotFound, "gone"), 1, 3, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.EqOp(t, tc.want, shouldRetry(tc.rpc, tc.err, tc.attempt, tc.max))
		})
	}
}

func TestExponentialBackoff(t *testing.T) {
	// Jitter that returns its ceiling shows the cap sequence.
	ceiling := ExponentialBackoff(100*time.Millisecond, time.Second, func(d time.Duration) time.Duration { return d })
	half := ExponentialBackoff(100*time.Millisecond, time.Second, func(d time.Duration) time.Duration { return d / 2 })

	cases := []struct {
		name string
		b    Backoff
		n    int
		want time.Duration
	}{
		{"first retry", ceiling, 1, 100 * time.Millisecond},
		{"second retry doubles", ceiling, 2, 200 * time.Millisecond},
		{"fourth retry", ceiling, 4, 800 * time.Millisecond},
		{"capped", ceiling, 5, time.Second},
		{"huge n does not overflow", ceiling, 1000, time.Second},
		{"jitter applies to the ceiling", half, 3, 200 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.EqOp(t, tc.want, tc.b(tc.n))
		})
	}

	t.Run("default jitter stays within the ceiling", func(t *testing.T) {
		b := ExponentialBackoff(100*time.Millisecond, time.Second, nil)
		for n := 1; n <= 10; n++ {
			for range 50 {
				must.Between(t, 0, b(n), time.Second)
			}
		}
	})
}

// A call whose WithRetriesUntil channel closes makes no new attempt: the
// attempt under way is answered, then the call ends with its error, both
// when the channel closed during the attempt and during the backoff.
func TestRetry_NoNewAttemptOnceRetriesAreStopped(t *testing.T) {
	t.Run("closed before the attempt failed", func(t *testing.T) {
		h := newHarness(t, WithMaxAttempts(5))
		h.plugin.NextErr("NodeStageVolume", codes.Unavailable, codes.Unavailable, codes.Unavailable, codes.Unavailable, codes.Unavailable)
		stop := make(chan struct{})
		close(stop)
		err := h.client.NodeStageVolume(WithRetriesUntil(testCtx(t), stop), &NodeStageVolumeRequest{
			ExternalID: "vol-1", StagingTargetPath: "/csi/staging/default/vol-1/rw", VolumeCapability: publishReq().VolumeCapability,
		})
		must.EqOp(t, codes.Unavailable, status.Code(err))
		must.EqOp(t, 1, h.plugin.Calls("NodeStageVolume"), must.Sprint("the attempt under way is made; no other"))
		must.EqOp(t, uint64(0), h.client.Retries())
	})
	t.Run("closed during the backoff", func(t *testing.T) {
		clock := &stuckClock{waiting: make(chan time.Duration, 1)}
		h := newHarness(t, WithClock(clock), WithMaxAttempts(5), WithBackoff(func(int) time.Duration { return time.Hour }))
		h.plugin.NextErr("NodePublishVolume", codes.Unavailable, codes.Unavailable)
		stop := make(chan struct{})
		errCh := make(chan error, 1)
		go func() { errCh <- h.client.NodePublishVolume(WithRetriesUntil(testCtx(t), stop), publishReq()) }()
		select {
		case <-clock.waiting:
		case <-time.After(testutil.WaitTimeout):
			t.Fatal("client never started a backoff wait")
		}
		close(stop)
		select {
		case err := <-errCh:
			must.EqOp(t, codes.Unavailable, status.Code(err))
		case <-time.After(testutil.WaitTimeout):
			t.Fatal("the call went on waiting out its backoff after retries were stopped")
		}
		must.EqOp(t, 1, h.plugin.Calls("NodePublishVolume"))
	})
	t.Run("never closed: retries as before", func(t *testing.T) {
		h := newHarness(t, WithMaxAttempts(5))
		h.plugin.NextErr("NodePublishVolume", codes.Unavailable, codes.Unavailable)
		err := h.client.NodePublishVolume(WithRetriesUntil(testCtx(t), make(chan struct{})), publishReq())
		must.NoError(t, err)
		must.EqOp(t, 3, h.plugin.Calls("NodePublishVolume"))
	})
}
