package csi

import (
	"context"
	"math/rand/v2"
	"time"

	metrics "github.com/hashicorp/go-metrics"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// Backoff returns how long to wait before retry n; n is 1 for the first
// retry (the second attempt).
type Backoff func(n int) time.Duration

// ExponentialBackoff is capped exponential backoff with full jitter: retry n
// waits a uniformly random time in [0, min(max, base·2^(n-1))]. jitter picks
// the random time in [0, d]; nil means math/rand/v2.
func ExponentialBackoff(base, max time.Duration, jitter func(d time.Duration) time.Duration) Backoff {
	if jitter == nil {
		jitter = func(d time.Duration) time.Duration { return rand.N(d + 1) }
	}
	return func(n int) time.Duration {
		ceiling := base
		for i := 1; i < n && ceiling < max; i++ {
			ceiling *= 2
		}
		ceiling = min(ceiling, max)
		if ceiling <= 0 {
			return 0
		}
		return jitter(ceiling)
	}
}

// Clock is what backoff waits on.
type Clock interface {
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// shouldRetry is the retry decision after attempt number attempt (1-based)
// of rpc failed with err.
func shouldRetry(rpc string, err error, attempt, maxAttempts int) bool {
	return attempt < maxAttempts && Classify(rpc, err) == Retryable
}

// retriesUntilKey carries WithRetriesUntil's channel in a context.
type retriesUntilKey struct{}

// WithRetriesUntil returns ctx with a bound on retries, not on the call: once
// stop is closed no new attempt starts (the call answers the last attempt's
// error), while the attempt under way runs on to the plugin's answer or its
// own timeout. It is for a call that must not be cut short at the plugin (its
// caller holds the volume until the plugin is done; see csimanager's fenced)
// but whose caller has gone: retrying for it would only hold the volume
// longer, up to every attempt's timeout.
func WithRetriesUntil(ctx context.Context, stop <-chan struct{}) context.Context {
	return context.WithValue(ctx, retriesUntilKey{}, stop)
}

// retriesStopped reports whether ctx's WithRetriesUntil channel is closed.
func retriesStopped(ctx context.Context) <-chan struct{} {
	stop, _ := ctx.Value(retriesUntilKey{}).(<-chan struct{})
	return stop // nil (never ready) without one
}

// intercept is the unary client interceptor installed on the connection:
// per-attempt timeouts, classification and retries for every RPC.
func (c *client) intercept(ctx context.Context, method string, req, reply any,
	cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {

	if c.closed.Load() {
		return ErrClosed
	}
	rpc := rpcName(method)
	timeout := c.cfg.timeouts.forRPC(rpc)
	stop := retriesStopped(ctx)
	for attempt := 1; ; attempt++ {
		err := c.attempt(ctx, timeout, method, req, reply, cc, invoker, opts)
		if err == nil {
			return nil
		}
		if err := ctxDone(ctx); err != nil {
			return err
		}
		if !shouldRetry(rpc, err, attempt, c.cfg.maxAttempts) || isClosed(stop) {
			return afterAttempts(attempt, err)
		}

		wait := c.cfg.backoff(attempt)
		code := status.Code(err).String()
		c.logger.Debug("retrying csi rpc", "rpc", rpc, "code", code,
			"attempt", attempt, "wait", wait, "error", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return afterAttempts(attempt, err)
		case <-c.cfg.clock.After(wait):
		}
		c.retries.Add(1)
		c.incrCounter([]string{"csi", "rpc", "retry"}, 1, []metrics.Label{
			{Name: "method", Value: rpc},
			{Name: "code", Value: code},
		})
	}
}

// afterAttempts is the error of a call whose last attempt (number attempt)
// failed with err: it says how many were made when there were several.
func afterAttempts(attempt int, err error) error {
	if attempt > 1 {
		return &attemptsError{attempts: attempt, err: err}
	}
	return err
}

// isClosed reports whether ch is closed; a nil ch never is.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// ctxDone returns ctx's error once ctx is over. A passed deadline counts
// even before ctx's timer has fired: gRPC fails a call at once when its
// deadline has passed, which must not read as a per-attempt timeout.
func ctxDone(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// attempt makes one try of an RPC under its own timeout.
func (c *client) attempt(ctx context.Context, timeout time.Duration, method string, req, reply any,
	cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts []grpc.CallOption) error {

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	// One sample per attempt, in seconds: the agent serves it as the
	// histogram berth_csi_rpc_latency_seconds{method,plugin}.
	c.addSample([]string{"csi", "rpc", "latency_seconds"}, float32(time.Since(start).Seconds()), []metrics.Label{
		{Name: "method", Value: rpcName(method)}, {Name: "plugin", Value: c.cfg.pluginID}})
	return err
}
