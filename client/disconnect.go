package client

// The disconnect deadline (DESIGN.md §4, guarantee 2).
//
// A client with Config.DisconnectDeadline D > 0 makes the servers a
// promise, carried by its node (Node.DisconnectDeadline): once it has not
// reached them for D, it runs no alloc that uses CSI volumes any more —
// every task of those has exited and every CSI volume is unpublished on
// the node. Allocs without CSI volumes keep running: the promise is only
// about claims, and a long server outage must not take stateless work down. The volumewatcher
// relies on it to free the claims of a down node's allocs D after it
// marked the node down, without fencing. disconnectLoop keeps the promise:
//
//	contact: Node.Register or Node.UpdateStatus succeeded
//	   │     (lastContact = when that call was sent; persisted)
//	   ▼
//	no contact for D − budget ──► StopFailed every live CSI alloc: each task
//	   │     records "Stopped: lost contact with the servers for …" and
//	   │     fails; postrun unpublishes the volumes on the node; the failed
//	   │     status waits in the syncer
//	   ▼
//	contact again ──► nothing restarts: a stopped alloc never runs again
//	         (no alloc runner restarts dead tasks, whatever desired status
//	         the servers send). The servers learn "failed" and reschedule
//	         it, or had already replaced it as lost when the node went down.
//
// The arithmetic. The servers count D from StatusUpdatedAt, when they
// marked the node down. They do that only once its heartbeat deadline
// (TTL + grace after the last heartbeat they received) has passed, so
// StatusUpdatedAt is after they received the client's last successful
// call, which is after the client sent it: after lastContact. A claim is
// thus freed no earlier than lastContact + D, and the client must have
// finished stopping by then (the TTL + grace the servers wait before they
// mark the node down is extra slack, which also absorbs clock skew
// between the servers). It starts stopping at lastContact + D −
// budget, where budget is the worst a stop takes (stopBudget):
//
//	longest kill_timeout of the live allocs' tasks (StopTask waits it out)
//	+ 3 × kill grace      a driver that fails to stop the task: see
//	                      taskrunner's stopTask
//	+ unpublishAllowance  postrun's NodeUnpublish/NodeUnstage afterwards
//	+ disconnectCheckInterval  the loop looks once a second
//
// capped at D/2, so that the client always waits at least D/2 without
// contact before it stops anything: a lost heartbeat or two must not take
// every alloc down. With kill timeouts too long for D the stop may then
// overrun D; the client says so in its log.
//
// Time since contact is measured on the monotonic clock within a process,
// so a stepped wall clock (NTP at boot) neither stops allocs early nor
// late. Across a client restart it can only be the wall clock: lastContact
// is persisted on every contact, and a client that restarts after D −
// budget without contact stops its restored allocs at once. What the
// client cannot keep is a promise while no client process runs: a clean
// Shutdown therefore takes it back (registers the node without it) before
// it leaves the tasks running; a client that dies without Shutdown leaves
// it standing until it is back.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/berth-io/berth/client/allocrunner"
	"github.com/berth-io/berth/client/allocrunner/taskrunner"
	"github.com/berth-io/berth/helper"
)

const (
	// disconnectCheckInterval is how often the loop looks at the clock
	// once a stop may be near (from D/2 without contact on).
	disconnectCheckInterval = time.Second
	// unpublishAllowance is what the stop budget leaves for postrun to
	// unpublish and unstage volumes on the node once the tasks exited.
	unpublishAllowance = 10 * time.Second
	// defaultKillGrace is taskrunner's kill grace when Config.KillGrace
	// is zero.
	defaultKillGrace = 5 * time.Second

	// bucketServerContact and keyLastContact hold lastContact (unix ns,
	// decimal) in the client state.
	bucketServerContact = "server_contact"
	keyLastContact      = "last"
)

// contactTracker remembers when the servers last answered.
type contactTracker struct {
	// lock guards last, persisted and stopped. Contacts are persisted
	// under it, so that an older one is never written over a newer one.
	lock sync.Mutex
	// last is the last contact, or the client's start when none is known.
	last time.Time
	// persisted is the last contact written to the client state.
	persisted time.Time
	// stopped is set while allocs stopped for the deadline wait for
	// contact to come back (only to say so when it does).
	stopped bool
}

// stopBudget is how long before the disconnect deadline the client starts
// stopping allocs whose longest kill timeout is longestKill (see the
// arithmetic above); capped reports that D/2 cut it short.
func stopBudget(deadline, longestKill, killGrace time.Duration) (budget time.Duration, capped bool) {
	need := longestKill + 3*killGrace + unpublishAllowance + disconnectCheckInterval
	if need > deadline/2 {
		return deadline / 2, true
	}
	return need, false
}

// disconnectDecision is what disconnectLoop does next.
type disconnectDecision struct {
	// stop: stop every live alloc now.
	stop bool
	// wait is how long to wait before deciding again when not stopping;
	// zero with stop false means never (no deadline).
	wait   time.Duration
	budget time.Duration
	capped bool
}

// decideDisconnect decides, elapsed after the last contact with the
// servers, given the disconnect deadline and the live allocs' longest kill
// timeout. It is pure. Before D/2 nothing can be due whatever allocs
// arrive (no budget exceeds D/2), so it waits until then; after, it looks
// again every disconnectCheckInterval, since a new alloc with a longer
// kill timeout may bring the stop forward.
func decideDisconnect(elapsed, deadline, longestKill, killGrace time.Duration) disconnectDecision {
	if deadline <= 0 {
		return disconnectDecision{}
	}
	elapsed = max(elapsed, 0)
	budget, capped := stopBudget(deadline, longestKill, killGrace)
	d := disconnectDecision{budget: budget, capped: capped}
	left := deadline - budget - elapsed
	switch {
	case left <= 0:
		d.stop = true
	case elapsed < deadline/2:
		d.wait = deadline/2 - elapsed
	default:
		d.wait = min(left, disconnectCheckInterval)
	}
	return d
}

// disconnectLoop keeps the disconnect deadline until ctx ends (see the top
// of this file). It does nothing without one.
func (c *Client) disconnectLoop(ctx context.Context) {
	deadline := c.cfg.DisconnectDeadline
	if deadline <= 0 {
		// A contact persisted while a deadline was set must not count if
		// one is set again later.
		if err := c.db.Delete(bucketServerContact, keyLastContact); err != nil {
			c.logger.Warn("forgetting the last contact with the servers failed", "error", err)
		}
		return
	}
	c.restoreContact()
	grace := c.cfg.KillGrace
	if grace <= 0 {
		grace = defaultKillGrace
	}
	stopped := map[string]bool{} // allocs this loop stopped, while the client has them
	for {
		live := c.liveRunners(stopped)
		var longest time.Duration
		for _, r := range live {
			longest = max(longest, taskrunner.DefaultKillTimeout, maxKillTimeout(r.Alloc()))
		}
		elapsed := c.sinceContact()
		d := decideDisconnect(elapsed, deadline, longest, grace)
		wait := d.wait
		if d.stop {
			if len(live) > 0 {
				c.stopDisconnected(live, elapsed, d, stopped)
			}
			wait = disconnectCheckInterval
		}
		if !helper.SleepCtx(ctx, wait) {
			return
		}
	}
}

// liveRunners returns the runners of allocs with CSI volumes still meant
// to run and not yet stopped by disconnectLoop, and forgets the stopped allocs the client
// no longer has.
func (c *Client) liveRunners(stopped map[string]bool) []allocrunner.AllocRunner {
	c.allocLock.RLock()
	if c.closing {
		c.allocLock.RUnlock()
		return nil
	}
	for id := range stopped {
		if _, ok := c.allocs[id]; !ok {
			delete(stopped, id)
		}
	}
	var candidates []allocrunner.AllocRunner
	for id, e := range c.allocs {
		if e.runner != nil && !e.destroying && !stopped[id] {
			candidates = append(candidates, e.runner)
		}
	}
	c.allocLock.RUnlock()

	var live []allocrunner.AllocRunner
	for _, r := range candidates {
		a := r.Alloc()
		if !a.TerminalStatus() && (hasCSIVolumes(a) || c.cfg.disconnectStopsAll) {
			live = append(live, r)
		}
	}
	slices.SortFunc(live, func(a, b allocrunner.AllocRunner) int { return strings.Compare(a.ID(), b.ID()) })
	return live
}

// stopDisconnected stops every runner in live for the disconnect deadline,
// each in a goroutine the client owns; the stops wait for postrun, which
// for CSI volumes ends only once the servers hear of the unpublish.
func (c *Client) stopDisconnected(live []allocrunner.AllocRunner, elapsed time.Duration, d disconnectDecision, stopped map[string]bool) {
	deadline := c.cfg.DisconnectDeadline
	ids := make([]string, 0, len(live))
	for _, r := range live {
		ids = append(ids, r.ID())
		stopped[r.ID()] = true
	}
	lost := elapsed.Round(time.Second)
	c.logger.Warn("no contact with the servers for too long: stopping the allocs that use CSI volumes to keep the disconnect deadline; they will not restart",
		"alloc_ids", ids, "lost_for", lost, "disconnect_deadline", deadline, "stop_budget", d.budget)
	if d.capped {
		c.logger.Warn("the allocs' kill timeouts leave too little time before the disconnect deadline: they may still be stopping when the servers free their volume claims; raise client.disconnect_deadline or lower the tasks' kill_timeout",
			"alloc_ids", ids, "disconnect_deadline", deadline, "stop_budget", d.budget)
	}
	c.contact.lock.Lock()
	c.contact.stopped = true
	c.contact.lock.Unlock()

	ev := taskrunner.KillingEvent(fmt.Sprintf("Stopped: lost contact with the servers for %s (disconnect deadline %s)", lost, deadline))
	for _, r := range live {
		c.wg.Add(1) // the loop's own count keeps wg above zero: no race with Shutdown's Wait
		go func() {
			defer c.wg.Done()
			if err := r.StopFailed(c.ctx, ev); err != nil {
				if c.ctx.Err() == nil {
					c.logger.Warn("stopping alloc for the disconnect deadline failed", "alloc_id", r.ID(), "error", err)
				}
				return
			}
			c.logger.Info("alloc stopped for the disconnect deadline", "alloc_id", r.ID())
		}()
	}
}

// noteContact records a successful call to the servers sent at sent.
func (c *Client) noteContact(sent time.Time) {
	if c.cfg.DisconnectDeadline <= 0 {
		return
	}
	t := &c.contact
	t.lock.Lock()
	defer t.lock.Unlock()
	if sent.After(t.last) {
		t.last = sent
	}
	if t.stopped {
		t.stopped = false
		c.logger.Info("in contact with the servers again; the allocs stopped for the disconnect deadline stay stopped and are reported failed")
	}
	if !sent.After(t.persisted) {
		return
	}
	t.persisted = sent
	if err := c.db.Put(bucketServerContact, keyLastContact, []byte(strconv.FormatInt(sent.UnixNano(), 10))); err != nil {
		// A restarted client would count from an older contact: it
		// would stop allocs early, never late.
		c.logger.Warn("persisting the last contact with the servers failed", "error", err)
	}
}

// restoreContact starts the count from the contact a previous client
// process persisted, or from now when there is none (a first start, or a
// previous process that took its promise back on Shutdown).
func (c *Client) restoreContact() {
	now := time.Now()
	from := now
	raw, err := c.db.Get(bucketServerContact, keyLastContact)
	switch {
	case err != nil:
		c.logger.Warn("reading the last contact with the servers failed; counting from now", "error", err)
	case raw != nil:
		ns, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			c.logger.Warn("unreadable last contact with the servers; counting from now", "value", string(raw))
			break
		}
		// A contact "in the future" (the clock went back) counts as now.
		if t := time.Unix(0, ns); t.Before(now) {
			from = t
		}
		c.logger.Debug("restored the last contact with the servers", "last_contact", from, "ago", now.Sub(from))
	}
	t := &c.contact
	t.lock.Lock()
	defer t.lock.Unlock()
	if t.last.IsZero() || from.After(t.last) {
		t.last = from
	}
}

// sinceContact is the time since the last contact with the servers.
func (c *Client) sinceContact() time.Duration {
	c.contact.lock.Lock()
	last := c.contact.last
	c.contact.lock.Unlock()
	return time.Since(last)
}

// retractDisconnectDeadline takes the promise off the node (Shutdown: no
// loop keeps it once the client is gone, while the tasks keep running) and
// reports whether there was one, which the servers must then hear of.
func (c *Client) retractDisconnectDeadline() bool {
	c.nodeLock.Lock()
	defer c.nodeLock.Unlock()
	if c.node.DisconnectDeadline == 0 {
		return false
	}
	n := c.node.Copy()
	n.DisconnectDeadline = 0
	c.node = n
	return true
}

// finalRegister sends the node once more at Shutdown, bounded: its CSI
// plugins unhealthy and, if retract, without its disconnect deadline.
func (c *Client) finalRegister(retract bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := c.register(ctx); err != nil {
		if retract {
			c.logger.Error("could not tell the servers that this client no longer keeps its disconnect deadline: its tasks keep running, yet the servers may free their volume claims once the node has been down that long; start the client again before then",
				"disconnect_deadline", c.cfg.DisconnectDeadline, "error", err)
			return
		}
		c.logger.Debug("final CSI fingerprint not sent", "error", err)
		return
	}
	if retract {
		// The servers no longer count on the deadline: the next client
		// process counts from its own start, not from this contact.
		if err := c.db.Delete(bucketServerContact, keyLastContact); err != nil {
			c.logger.Warn("forgetting the last contact with the servers failed", "error", err)
		}
	}
}
