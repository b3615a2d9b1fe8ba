package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/structs"
)

// heartbeatInterval is how long to wait before the next heartbeat: half
// the TTL, less up to a tenth of it (r in [0,1) picks how much), so
// clients spread out and a heartbeat survives one slow round trip.
func heartbeatInterval(ttl time.Duration, r float64) time.Duration {
	return ttl/2 - time.Duration(r*float64(ttl/10))
}

// heartbeatRetry is the wait before retrying a failed heartbeat: the
// backoff, but never so long that the TTL runs out unretried.
func heartbeatRetry(backoff time.Duration, ttl time.Duration) time.Duration {
	return min(backoff, ttl/4)
}

// heartbeatLoop registers the node, then heartbeats until ctx ends. It
// registers again when the servers do not know the node and when driver
// fingerprints change.
func (c *Client) heartbeatLoop(ctx context.Context) {
	ttl, ok := c.registerUntilDone(ctx)
	if !ok {
		return
	}
	close(c.registered)
	lastFingerprint := time.Now()
	failures := 0
	// The first heartbeat goes at once: it is what starts the servers'
	// heartbeat deadline for the node.
	wait := time.Duration(0)
	for {
		if !helper.SleepCtx(ctx, wait) {
			return
		}

		if time.Since(lastFingerprint) >= c.cfg.FingerprintInterval {
			lastFingerprint = time.Now()
			if c.refreshDrivers(ctx) {
				c.logger.Info("driver fingerprints changed; registering again")
				if ttl, ok = c.registerUntilDone(ctx); !ok {
					return
				}
				wait = 0
				continue
			}
		}

		newTTL, err := c.heartbeat(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, structs.ErrNotFound):
			c.logger.Warn("servers do not know this node; registering again")
			if ttl, ok = c.registerUntilDone(ctx); !ok {
				return
			}
			failures = 0
			wait = 0
		case err != nil:
			wait = heartbeatRetry(c.cfg.RetryBackoff.Delay(failures), ttl)
			failures++
			c.logger.Warn("heartbeat failed; retrying", "error", err, "retry_in", wait, "failures", failures)
		default:
			if failures > 0 {
				c.logger.Info("heartbeat succeeded again", "after_failures", failures)
			}
			failures = 0
			if newTTL > 0 {
				ttl = newTTL
			}
			wait = heartbeatInterval(ttl, rand.Float64())
		}
	}
}

// registerUntilDone registers the node, retrying with backoff, and
// returns the heartbeat TTL; false once ctx ended.
func (c *Client) registerUntilDone(ctx context.Context) (time.Duration, bool) {
	for attempt := 0; ; attempt++ {
		ttl, err := c.register(ctx)
		if err == nil {
			return ttl, true
		}
		if ctx.Err() != nil {
			return 0, false
		}
		d := c.cfg.RetryBackoff.Delay(attempt)
		c.logger.Warn("registering node failed; retrying", "error", err, "retry_in", d)
		if !helper.SleepCtx(ctx, d) {
			return 0, false
		}
	}
}

// register sends the node to the servers. Success is contact with them
// (see disconnect.go), counted from when the call was sent.
func (c *Client) register(ctx context.Context) (time.Duration, error) {
	c.registerLock.Lock()
	defer c.registerLock.Unlock()
	req := &structs.NodeRegisterRequest{Node: c.Node()}
	var resp structs.NodeUpdateResponse
	sent := time.Now()
	if err := c.rpc(ctx, "Node.Register", req, &resp); err != nil {
		return 0, err
	}
	c.noteContact(sent)
	c.logger.Debug("node registered", "heartbeat_ttl", resp.HeartbeatTTL)
	if resp.HeartbeatTTL > 0 {
		return resp.HeartbeatTTL, nil
	}
	return c.cfg.HeartbeatTTL, nil
}

// heartbeat tells the servers the node is alive and returns the TTL.
// Success is contact with them, counted from when the call was sent.
func (c *Client) heartbeat(ctx context.Context) (time.Duration, error) {
	req := &structs.NodeUpdateStatusRequest{NodeID: c.NodeID(), Status: structs.NodeStatusReady}
	var resp structs.NodeUpdateResponse
	sent := time.Now()
	if err := c.rpc(ctx, "Node.UpdateStatus", req, &resp); err != nil {
		return 0, err
	}
	c.noteContact(sent)
	return resp.HeartbeatTTL, nil
}

// refreshDrivers fingerprints the drivers again and reports whether
// anything changed.
func (c *Client) refreshDrivers(ctx context.Context) bool {
	drv := fingerprintDrivers(ctx, c.cfg.Drivers)
	c.nodeLock.Lock()
	defer c.nodeLock.Unlock()
	if driversEqual(drv, c.node.Drivers) {
		return false
	}
	n := c.node.Copy()
	for name := range c.node.Drivers {
		delete(n.Attributes, "driver."+name)
	}
	for name, d := range drv {
		if d.Detected && d.Healthy {
			n.Attributes["driver."+name] = "1"
		}
	}
	n.Drivers = drv
	c.node = n
	return true
}
