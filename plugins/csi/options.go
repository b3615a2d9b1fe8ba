package csi

import (
	"context"
	"net"
	"time"
)

// Defaults for a Client. Fingerprints run on a timer and must not pile up;
// mount operations may legitimately take minutes (formatting a disk).
const (
	DefaultProbeTimeout       = 5 * time.Second
	DefaultFingerprintTimeout = 30 * time.Second
	DefaultCallTimeout        = 2 * time.Minute
	DefaultMaxAttempts        = 5
	DefaultBackoffBase        = 200 * time.Millisecond
	DefaultBackoffMax         = 5 * time.Second
)

// Timeouts bound each attempt of an RPC; the caller's ctx bounds the whole
// call. A zero field keeps its default.
type Timeouts struct {
	Probe       time.Duration // Probe
	Fingerprint time.Duration // plugin info, capabilities, NodeGetInfo
	Call        time.Duration // everything else: volume, mount and snapshot RPCs
}

// fingerprintRPCs are the RPCs that use Timeouts.Fingerprint.
var fingerprintRPCs = map[string]bool{
	"GetPluginInfo":             true,
	"GetPluginCapabilities":     true,
	"ControllerGetCapabilities": true,
	"NodeGetCapabilities":       true,
	"NodeGetInfo":               true,
}

// forRPC returns the per-attempt timeout of the RPC with wire name rpc.
func (t Timeouts) forRPC(rpc string) time.Duration {
	switch {
	case rpc == "Probe":
		return t.Probe
	case fingerprintRPCs[rpc]:
		return t.Fingerprint
	default:
		return t.Call
	}
}

// Option configures a Client.
type Option func(*config)

type config struct {
	timeouts    Timeouts
	maxAttempts int
	backoff     Backoff
	clock       Clock
	pluginID    string
	dialer      func(context.Context) (net.Conn, error)
}

func defaultConfig() config {
	return config{
		timeouts: Timeouts{
			Probe:       DefaultProbeTimeout,
			Fingerprint: DefaultFingerprintTimeout,
			Call:        DefaultCallTimeout,
		},
		maxAttempts: DefaultMaxAttempts,
		backoff:     ExponentialBackoff(DefaultBackoffBase, DefaultBackoffMax, nil),
		clock:       realClock{},
	}
}

// WithTimeouts sets per-attempt timeouts; zero fields keep their defaults.
func WithTimeouts(t Timeouts) Option {
	return func(c *config) {
		if t.Probe > 0 {
			c.timeouts.Probe = t.Probe
		}
		if t.Fingerprint > 0 {
			c.timeouts.Fingerprint = t.Fingerprint
		}
		if t.Call > 0 {
			c.timeouts.Call = t.Call
		}
	}
}

// WithPluginID names the plugin in the client's metrics (the plugin
// label of csi.rpc.latency).
func WithPluginID(id string) Option {
	return func(c *config) { c.pluginID = id }
}

// WithDialer makes the client reach its plugin through dial instead of
// the unix socket, which then only names it: for plugins served in the
// same process (berth-nodesim runs thousands, and a socket costs two file
// descriptors a plugin). Calls still go through gRPC as over a socket.
func WithDialer(dial func(context.Context) (net.Conn, error)) Option {
	return func(c *config) { c.dialer = dial }
}

// WithMaxAttempts sets how many times a retryable RPC is tried in one call,
// the first attempt included. Values below 1 mean 1 (no retries).
func WithMaxAttempts(n int) Option {
	return func(c *config) { c.maxAttempts = max(n, 1) }
}

// WithBackoff sets the wait between attempts. nil keeps the default.
func WithBackoff(b Backoff) Option {
	return func(c *config) {
		if b != nil {
			c.backoff = b
		}
	}
}

// WithClock sets the clock backoff waits on, so tests need not wait for
// real time. nil keeps the real clock.
func WithClock(clk Clock) Option {
	return func(c *config) {
		if clk != nil {
			c.clock = clk
		}
	}
}
