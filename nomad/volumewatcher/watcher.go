package volumewatcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/helper/keylock"
	"github.com/berth-io/berth/nomad/claims"
	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// ClaimWriter commits claim transitions through Raft.
type ClaimWriter interface {
	// WriteClaims commits updates, in order, as one Raft entry, and
	// returns its index. It fails, changing nothing, when this server is
	// no longer the leader or the state store refuses an update; the
	// watcher then retries the volume with backoff. Safe for concurrent
	// use.
	WriteClaims(ctx context.Context, updates []*structs.CSIVolumeClaimUpdate) (uint64, error)
}

// Controller reaches the controller plugin of a volume.
type Controller interface {
	// ControllerUnpublish detaches vol from the node of claim
	// (claim.ExternalNodeID is the plugin's ID for it). It must be
	// idempotent: a volume that is not attached there is a success. An
	// error means the volume may still be attached; the watcher records
	// it on the claim and retries with backoff. The watcher calls it for
	// one volume at a time, never mutates nor keeps vol and claim, and
	// bounds each call with Config.ControllerTimeout: ctx's deadline is
	// the claim's UnpublishUntil, which the call must not outlive, retries
	// included. An error returned after ctx ended, or with
	// claims.ErrMayStillRun in its chain, leaves the call possibly running
	// until then; any other is the call's end.
	ControllerUnpublish(ctx context.Context, vol *structs.CSIVolume, claim *structs.CSIVolumeClaim) error
}

// NodeDetacher asks a node's client to unpublish a volume for an alloc.
type NodeDetacher interface {
	// NodeDetach has the client of claim's node unpublish vol for
	// claim's alloc (NodeUnpublish, and NodeUnstage for the node's last
	// user of the volume). It must be idempotent. The client refuses,
	// with an error, while a task of the alloc still runs. An error means
	// the volume may still be published there; the watcher records it on
	// the claim and retries with backoff.
	NodeDetach(ctx context.Context, vol *structs.CSIVolume, claim *structs.CSIVolumeClaim) error
}

// Config configures a Watcher. Zero durations take the defaults below.
type Config struct {
	// State returns the current state store (it changes when a snapshot
	// is restored, so it is read afresh on every pass).
	State func() *state.StateStore
	// Writer commits claim steps.
	Writer ClaimWriter
	// Controller runs ControllerUnpublish; nil when the servers cannot
	// reach controllers (then no plugin counts as needing one).
	Controller Controller
	// NodeDetacher reaches clients; nil when the servers cannot (a claim
	// whose client did not unpublish then waits for it, or an operator).
	NodeDetacher NodeDetacher
	// ControllerTimeout bounds one controller call (and one node detach).
	ControllerTimeout time.Duration
	// DefaultDisconnectDeadline applies to down nodes that report no
	// DisconnectDeadline of their own. Zero (no default) is deliberate and
	// stays zero: a node whose client promised nothing may still run its
	// tasks, so only fencing or an operator may free its claims.
	DefaultDisconnectDeadline time.Duration
	// NodeDetachGrace is how long after a stopped alloc last changed its
	// client gets to unpublish the volume by itself before the watcher
	// asks it to (NodeDetacher); zero takes claims.DefaultNodeDetachGrace.
	NodeDetachGrace time.Duration
	// RetryBase and RetryMax bound the capped exponential backoff of
	// failed controller calls (recorded on the claim as NextRetry) and of
	// failed passes.
	RetryBase time.Duration
	RetryMax  time.Duration
	// ResyncInterval is how often every volume with unfinished claims is
	// queued again, whatever changed.
	ResyncInterval time.Duration
	// Workers is how many volumes are processed at once.
	Workers int
	// Now is the clock decisions use (disconnect deadlines, NextRetry);
	// nil means time.Now. Queue delays use real timers.
	Now func() time.Time
	// Logger gets the watcher's logs; nil discards them.
	Logger hclog.Logger
}

// Defaults for zero Config fields.
const (
	DefaultControllerTimeout = 2 * time.Minute
	DefaultRetryBase         = time.Second
	DefaultRetryMax          = time.Minute
	DefaultResyncInterval    = time.Minute
	DefaultWorkers           = 4
)

const (
	// maxRounds bounds the steps one pass takes for a volume before it
	// yields (Taken → NodeDetached → ControllerDetached → freed is three).
	maxRounds = 4
	// minScanInterval spaces scans of the tables out under heavy write
	// load; a quiet cluster's change is scanned at once.
	minScanInterval = 50 * time.Millisecond
	// scanCostFactor spaces scans out further when they are slow: a scan
	// reads every claimed volume with its allocs and nodes (10,000
	// claimed volumes: tens of ms on a loaded machine), and claim churn
	// changes the tables all the time, so back-to-back scans took a large
	// share of the leader's CPU while 10,000 claims were released. Waiting
	// this many times the last scan's duration keeps scans under about a
	// tenth of a core. Releases do not wait for scans: the client's
	// Unpublish and the claim endpoints run their pass at once.
	scanCostFactor = 10
)

// scanGap is the least time between the start of a scan that took took
// and the next one, when the tables keep changing.
func scanGap(took time.Duration) time.Duration {
	return max(minScanInterval, scanCostFactor*took)
}

// ErrNoState is returned when the Config has no State.
var ErrNoState = errors.New("volumewatcher: no state store")

// Watcher is the leader's claim reaper (see the package doc). New makes
// one per leadership term; Run runs it until the term ends. Enqueue,
// EnqueueAll, Release and Decide may be called from any goroutine, before,
// during or after Run.
type Watcher struct {
	cfg    Config
	logger hclog.Logger
	retry  helper.Backoff
	queue  *queue
	locks  keylock.Locks[volumeKey]

	// issuedMu guards issued: the UnpublishUntil values this watcher
	// gave a caller to write with a claim's step (UnpublishDeadline) that
	// no call has used yet, each with the value it replaced. A call under
	// one needs no write of its own first, and once answered leaves the
	// replaced value, as the watcher's own write before a call does. A new
	// leader's watcher has none, so it takes any deadline it finds for a
	// call that may still run.
	issuedMu sync.Mutex
	issued   map[claimKey]issuedDeadline

	// holders names who holds each volume's lock and since when, for the
	// error of a caller that could not wait for it: from outside, a
	// release stuck behind the lock looks only like "context deadline
	// exceeded" (simulator seeds 21774, 21824, 21828, 21845).
	holdersMu sync.Mutex
	holders   map[volumeKey]lockHolder
}

type lockHolder struct {
	what  string
	since time.Time
}

type issuedDeadline struct{ until, prior int64 }

// UnpublishDeadline returns the UnpublishUntil the caller writes on
// claim, a claim of volume (ns, id) whose next step is ControllerUnpublish
// (claims.Unpublish says so), in the Raft entry of its step, before it
// runs a pass over the volume (Release): the pass then makes the call
// under that deadline without writing one first. A value never written,
// or never used, costs nothing but a publish to the node held until it.
func (w *Watcher) UnpublishDeadline(ns, id string, claim *structs.CSIVolumeClaim) int64 {
	now := w.cfg.Now().UnixNano()
	until := max(claim.UnpublishUntil, now+int64(w.cfg.ControllerTimeout))
	w.issuedMu.Lock()
	defer w.issuedMu.Unlock()
	for k, d := range w.issued { // those never used (a write that failed)
		if d.until < now {
			delete(w.issued, k)
		}
	}
	if w.issued == nil {
		w.issued = map[claimKey]issuedDeadline{}
	}
	w.issued[claimKey{volumeKey{ns, id}, claim.AllocID}] = issuedDeadline{until: until, prior: claim.UnpublishUntil}
	return until
}

// takeIssued returns, and forgets, the deadline UnpublishDeadline issued
// for claim when it is the one claim carries: no call used it yet.
func (w *Watcher) takeIssued(k volumeKey, claim *structs.CSIVolumeClaim) (issuedDeadline, bool) {
	w.issuedMu.Lock()
	defer w.issuedMu.Unlock()
	ck := claimKey{k, claim.AllocID}
	d, ok := w.issued[ck]
	if !ok {
		return issuedDeadline{}, false
	}
	delete(w.issued, ck)
	return d, d.until == claim.UnpublishUntil
}

// New returns a Watcher; it does nothing until Run.
func New(cfg Config) *Watcher {
	if cfg.ControllerTimeout <= 0 {
		cfg.ControllerTimeout = DefaultControllerTimeout
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = DefaultRetryBase
	}
	if cfg.RetryMax < cfg.RetryBase {
		cfg.RetryMax = max(DefaultRetryMax, cfg.RetryBase)
	}
	if cfg.ResyncInterval <= 0 {
		cfg.ResyncInterval = DefaultResyncInterval
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.NodeDetachGrace <= 0 {
		cfg.NodeDetachGrace = claims.DefaultNodeDetachGrace
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	retry := helper.Backoff{Base: cfg.RetryBase, Max: cfg.RetryMax}
	return &Watcher{
		cfg:    cfg,
		logger: logger.Named("volumewatcher"),
		retry:  retry,
		queue:  newQueue(retry),
	}
}

// Run watches state and releases claims until ctx ends, then waits for
// its goroutines. Call it once per Watcher.
func (w *Watcher) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { w.queue.runDelayed(ctx) })
	for range w.cfg.Workers {
		wg.Go(func() { w.work(ctx) })
	}
	wg.Go(func() { w.watch(ctx) })
	<-ctx.Done()
	w.queue.ShutDown()
	wg.Wait()
	// Another server leads now; its watcher reports from here on.
	gauges{}.emit()
}

// Enqueue queues a pass over one volume.
func (w *Watcher) Enqueue(ns, id string) {
	w.queue.Add(volumeKey{ns, id})
}

// EnqueueAll queues a pass over every volume with live claims (claim GC:
// belt and braces over the table watch and the resync).
func (w *Watcher) EnqueueAll() error {
	if w.cfg.State == nil {
		return ErrNoState
	}
	iter, err := w.cfg.State().CSIVolumes(nil, structs.AllNamespaces)
	if err != nil {
		return err
	}
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		if v := raw.(*structs.CSIVolume); len(v.Claims) > 0 {
			w.queue.Add(volumeKey{v.Namespace, v.ID})
		}
	}
	return nil
}

// Lock takes the volume's lock, which every pass holds: the servers'
// claim endpoints hold it while they read a volume's claims, call its
// controller and write the result. It returns the unlock function (safe
// to call twice), or ctx's error.
// what names the holder ("claiming volume \"db\" for alloc …") in the
// error of a caller that gives up waiting for it.
func (w *Watcher) Lock(ctx context.Context, ns, id, what string) (func(), error) {
	return w.lock(ctx, volumeKey{ns, id}, what)
}

func (w *Watcher) lock(ctx context.Context, k volumeKey, what string) (func(), error) {
	unlock, err := w.locks.Lock(ctx, k)
	if err != nil {
		w.holdersMu.Lock()
		h, ok := w.holders[k]
		w.holdersMu.Unlock()
		if ok {
			return nil, fmt.Errorf("%w (held for %s by %s)", err, time.Since(h.since).Round(time.Millisecond), h.what)
		}
		return nil, err
	}
	w.holdersMu.Lock()
	if w.holders == nil {
		w.holders = map[volumeKey]lockHolder{}
	}
	w.holders[k] = lockHolder{what: what, since: time.Now()}
	w.holdersMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			w.holdersMu.Lock()
			delete(w.holders, k)
			w.holdersMu.Unlock()
			unlock()
		})
	}, nil
}

// ReleaseOptions narrow a Release.
type ReleaseOptions struct {
	// AllocIDs limits the pass to these allocs' claims; empty means all.
	AllocIDs []string
	// IgnoreBackoff retries failed controller calls now instead of at
	// their NextRetry (an operator asked).
	IgnoreBackoff bool
}

// Release runs a pass over the volume now, on the caller's goroutine,
// under the volume's lock (the caller must not hold it): each claim is
// carried as far towards freed as it can go now. Claims left waiting on
// a retry or a deadline are queued for the watcher. A controller failure
// is not an error (it is recorded on the claim and retried); an error
// means state could not be read or written, and the volume is queued
// for a retry with backoff.
func (w *Watcher) Release(ctx context.Context, ns, id string, opts ReleaseOptions) error {
	k := volumeKey{ns, id}
	po := passOptions{ignoreBackoff: opts.IgnoreBackoff}
	if len(opts.AllocIDs) > 0 {
		po.only = map[string]bool{}
		for _, a := range opts.AllocIDs {
			po.only[a] = true
		}
	}
	wait, err := w.pass(ctx, k, po)
	if err != nil {
		w.queue.AddRateLimited(k)
		return err
	}
	if wait > 0 {
		w.queue.AddAfter(k, wait)
	}
	return nil
}

// Profile is what vol's plugin can do now (claims.ProfileOf): re-read on
// every decision, never kept, since plugins get upgraded. Without a
// Controller the servers controller-publish nothing, so they have nothing
// to controller-unpublish either.
func (w *Watcher) Profile(snap *state.StateSnapshot, vol *structs.CSIVolume) (claims.Profile, error) {
	if w.cfg.Controller == nil {
		return claims.Profile{}, nil
	}
	p, err := snap.CSIPluginSummary(nil, vol.PluginID)
	if err != nil {
		return claims.Profile{}, err
	}
	return w.ProfileOf(p), nil
}

// Subjects returns claim's alloc and node as of snap (nil when gone), the
// node with the disconnect deadline that applies to it.
func (w *Watcher) Subjects(snap *state.StateSnapshot, claim *structs.CSIVolumeClaim) (*structs.Allocation, *structs.Node, error) {
	alloc, err := snap.AllocByID(nil, claim.AllocID)
	if err != nil {
		return nil, nil, err
	}
	node, err := snap.NodeByID(nil, claim.NodeID)
	if err != nil {
		return nil, nil, err
	}
	return alloc, claims.WithDeadline(node, w.cfg.DefaultDisconnectDeadline), nil
}

// ProfileOf is plugin p's profile as this watcher's decisions see it.
func (w *Watcher) ProfileOf(p *structs.CSIPlugin) claims.Profile {
	return claims.ProfileOf(p, w.cfg.Controller != nil)
}

// Backoff is the capped backoff of failed claim calls.
func (w *Watcher) Backoff() helper.Backoff { return w.retry }

// Now is the watcher's clock.
func (w *Watcher) Now() time.Time { return w.cfg.Now() }

// NodeDetachGrace is the watcher's wait for a client's own unpublish
// (Config.NodeDetachGrace, defaulted).
func (w *Watcher) NodeDetachGrace() time.Duration { return w.cfg.NodeDetachGrace }

// Decide says what the watcher does next for claim, a live claim of vol,
// as of snap.
func (w *Watcher) Decide(snap *state.StateSnapshot, vol *structs.CSIVolume, claim *structs.CSIVolumeClaim) (claims.Action, error) {
	prof, err := w.Profile(snap, vol)
	if err != nil {
		return claims.Action{}, err
	}
	return w.decide(snap, vol, claim, prof, w.cfg.Now())
}

func (w *Watcher) decide(snap *state.StateSnapshot, vol *structs.CSIVolume, claim *structs.CSIVolumeClaim, prof claims.Profile, now time.Time) (claims.Action, error) {
	alloc, node, err := w.Subjects(snap, claim)
	if err != nil {
		return claims.Action{}, err
	}
	return claims.Next(vol, claim, alloc, node, prof, w.cfg.NodeDetachGrace, now), nil
}

// work processes queued volumes until the queue shuts down.
func (w *Watcher) work(ctx context.Context) {
	for {
		k, ok := w.queue.Get(ctx)
		if !ok {
			return
		}
		wait, err := w.pass(ctx, k, passOptions{})
		switch {
		case err != nil && ctx.Err() != nil:
		case err != nil:
			w.logger.Warn("releasing volume claims failed; retrying", "namespace", k.ns, "volume_id", k.id, "error", err)
			w.queue.AddRateLimited(k)
		default:
			w.queue.Forget(k)
			if wait > 0 {
				w.queue.AddAfter(k, wait)
			}
		}
		w.queue.Done(k)
	}
}

type passOptions struct {
	only          map[string]bool // nil: every claim
	ignoreBackoff bool
}

// pass takes the volume's lock and runs rounds until one makes no
// progress. It returns when the volume should be looked at again (0:
// on the next change).
func (w *Watcher) pass(ctx context.Context, k volumeKey, opts passOptions) (time.Duration, error) {
	if w.cfg.State == nil {
		return 0, ErrNoState
	}
	unlock, err := w.lock(ctx, k, "the volumewatcher's release pass")
	if err != nil {
		return 0, err
	}
	defer unlock()
	var wait time.Duration
	for range maxRounds {
		progressed, next, err := w.round(ctx, k, opts)
		if err != nil {
			return 0, err
		}
		wait = next
		if !progressed {
			break
		}
		opts.ignoreBackoff = false // an operator's retry is one attempt
	}
	return wait, nil
}

// round reads the volume, decides every claim's next step, runs the
// controller calls and commits the results in one Raft entry.
func (w *Watcher) round(ctx context.Context, k volumeKey, opts passOptions) (progressed bool, wait time.Duration, err error) {
	snap, err := w.cfg.State().Snapshot()
	if err != nil {
		return false, 0, err
	}
	vol, err := snap.CSIVolumeByID(nil, k.ns, k.id)
	if err != nil || vol == nil || len(vol.Claims) == 0 {
		return false, 0, err // gone or nothing claimed: done
	}
	prof, err := w.Profile(snap, vol)
	if err != nil {
		return false, 0, err
	}
	now := w.cfg.Now()

	type pending struct {
		claim    *structs.CSIVolumeClaim
		act      claims.Action
		prior    int64     // the claim's UnpublishUntil before this round's call
		deadline time.Time // the call's, on the real clock: claim.UnpublishUntil
	}
	var (
		updates   []*structs.CSIVolumeClaimUpdate
		unpublish []pending
		next      time.Time
	)
	add := func(c *structs.CSIVolumeClaim) {
		updates = append(updates, &structs.CSIVolumeClaimUpdate{Namespace: vol.Namespace, VolumeID: vol.ID, Claim: c})
	}
	for _, claim := range vol.LiveClaims() {
		if opts.only != nil && !opts.only[claim.AllocID] {
			continue
		}
		decideOn := claim
		if opts.ignoreBackoff && claim.NextRetry != 0 {
			decideOn = claim.Copy()
			decideOn.NextRetry = 0
		}
		act, err := w.decide(snap, vol, decideOn, prof, now)
		if err != nil {
			return false, 0, err
		}
		switch act.Kind {
		case claims.None, claims.Wait:
			if c := noted(claim, act); c != nil {
				add(c)
			}
			if !act.At.IsZero() {
				next = earliest(next, act.At)
			}
		case claims.RetryAfter:
			next = earliest(next, act.At)
		case claims.MarkNodeDetached:
			add(stepped(claim, structs.CSIClaimNodeDetached, act.ReleaseReason))
			progressed = true
		case claims.Free:
			if claim.Step == structs.CSIClaimNodeDetached {
				// The controller side needs nothing (or is left to the
				// node's last claim): checkpoint it as done, in the same
				// entry, so every release passes ControllerDetached.
				add(stepped(claim, structs.CSIClaimControllerDetached, act.ReleaseReason))
			}
			add(stepped(claim, structs.CSIClaimFreed, act.ReleaseReason))
			progressed = true
		case claims.ControllerUnpublish:
			unpublish = append(unpublish, pending{claim: claim, act: act})
		case claims.NodeDetach:
			if w.cfg.NodeDetacher == nil {
				act = claims.Action{Kind: claims.Wait, Record: true, Reason: act.Reason + " (the servers cannot reach clients: " +
					"once that node has unpublished it, or is gone for good, run 'berth volume detach')"}
				if c := noted(claim, act); c != nil {
					add(c)
				}
				continue
			}
			if err := w.nodeDetach(ctx, vol, claim); err != nil {
				if ctx.Err() != nil {
					return false, 0, ctx.Err()
				}
				f := claims.ReleaseFailed(claim, fmt.Errorf("%s: %w", act.Reason, err), now, w.retry)
				add(f)
				w.logFailure(vol, f, "node detach", err)
				if f.NextRetry != 0 {
					next = earliest(next, time.Unix(0, f.NextRetry))
				}
				continue
			}
			add(stepped(claim, structs.CSIClaimNodeDetached, act.ReleaseReason))
			progressed = true
		}
	}

	// The calls' deadline goes into Raft before them, on each claim
	// (UnpublishUntil), with the steps decided so far: the client ends a
	// call by it, retries included, and until it has passed no leader —
	// this one or the next, which knows nothing of this one's calls —
	// ControllerPublishes the volume to that node or frees the claim
	// (seed 4060). A call that is answered gives the claim back the
	// deadline an earlier call may still need (prior). A deadline the
	// client's Unpublish wrote with NodeDetached (UnpublishDeadline) and
	// no call used yet serves without a write, while most of it is left.
	if len(unpublish) > 0 {
		holds := false
		for i := range unpublish {
			p := &unpublish[i]
			p.prior = p.claim.UnpublishUntil
			if d, ok := w.takeIssued(k, p.claim); ok {
				p.prior = d.prior
				if left := time.Unix(0, d.until).Sub(now); left >= w.cfg.ControllerTimeout/2 {
					p.deadline = time.Now().Add(left)
					continue
				}
			}
			p.deadline = time.Now().Add(w.cfg.ControllerTimeout)
			p.claim = p.claim.Copy()
			p.claim.UnpublishUntil = max(p.prior, now.Add(w.cfg.ControllerTimeout).UnixNano())
			add(p.claim)
			holds = true
		}
		if holds {
			if _, err := w.cfg.Writer.WriteClaims(ctx, updates); err != nil {
				return false, 0, fmt.Errorf("writing the controller unpublish deadline of volume %q in namespace %q: %w", vol.ID, vol.Namespace, err)
			}
			updates = nil
		}
	}

	// Claims of one node share its attachment: one call serves them all.
	type result struct {
		err       error
		abandoned bool // the call may still run: its answer never came
	}
	results := map[string]result{}
	for _, p := range unpublish {
		target := p.claim.NodeID + "\x00" + p.claim.ExternalNodeID
		r, done := results[target]
		if !done {
			// One call for the node's claims: it ends by the earliest of
			// their deadlines.
			deadline := p.deadline
			for _, o := range unpublish {
				if o.claim.NodeID+"\x00"+o.claim.ExternalNodeID == target && o.deadline.Before(deadline) {
					deadline = o.deadline
				}
			}
			r.abandoned, r.err = w.controllerUnpublish(ctx, vol, p.claim, deadline)
			results[target] = r
		}
		if r.err == nil {
			c := stepped(p.claim, structs.CSIClaimControllerDetached, p.act.ReleaseReason)
			c.UnpublishUntil = p.prior // this call is over; an earlier one may not be
			act := claims.Next(vol, c, nil, nil, prof, w.cfg.NodeDetachGrace, now)
			if act.Kind == claims.Free {
				add(c)
				add(stepped(c, structs.CSIClaimFreed, p.act.ReleaseReason))
			} else {
				// Waits out the earlier call (claims.Next), saying so.
				if n := noted(c, act); n != nil {
					c = n
				}
				add(c)
				next = earliest(next, act.At)
			}
			progressed = true
			continue
		}
		if ctx.Err() != nil {
			return false, 0, ctx.Err()
		}
		f := claims.ReleaseFailed(p.claim, fmt.Errorf("controller unpublish of volume %q from node %s (external ID %q) through plugin %q failed: %w",
			vol.ID, p.claim.NodeID, p.claim.ExternalNodeID, vol.PluginID, r.err), now, w.retry)
		if !r.abandoned {
			f.UnpublishUntil = p.prior // answered: this call is over
		}
		add(f)
		w.logFailure(vol, f, "controller unpublish", r.err)
		if f.NextRetry != 0 {
			next = earliest(next, time.Unix(0, f.NextRetry))
		}
	}

	if len(updates) > 0 {
		if _, err := w.cfg.Writer.WriteClaims(ctx, updates); err != nil {
			return false, 0, fmt.Errorf("writing claim steps of volume %q in namespace %q: %w", vol.ID, vol.Namespace, err)
		}
		for _, u := range updates {
			if u.Claim.Step == structs.CSIClaimFreed {
				w.logger.Debug("claim freed", "namespace", vol.Namespace, "volume_id", vol.ID,
					"alloc_id", u.Claim.AllocID, "node_id", u.Claim.NodeID, "reason", u.Claim.ReleaseReason)
			}
		}
	}
	if !next.IsZero() {
		// Never 0: that would mean "no need to look again".
		wait = max(next.Sub(now), time.Millisecond)
	}
	return progressed, wait, nil
}

// logFailure logs a failed release call: a warning while it is retried,
// an error once the claim needs an operator (the one case where someone
// must act).
func (w *Watcher) logFailure(vol *structs.CSIVolume, c *structs.CSIVolumeClaim, call string, err error) {
	countReleaseFailure(call, vol.PluginID, err)
	kv := []any{"namespace", vol.Namespace, "volume_id", vol.ID, "alloc_id", c.AllocID, "node_id", c.NodeID,
		"plugin_id", vol.PluginID, "attempts", c.Attempts, "error", err}
	if c.Step == structs.CSIClaimNeedsOperator {
		w.logger.Error(call+" failed with an error the plugin will repeat; the claim needs 'berth volume detach'", kv...)
		return
	}
	w.logger.Warn(call+" failed; will retry", append(kv, "next_retry", time.Unix(0, c.NextRetry))...)
}

func (w *Watcher) nodeDetach(ctx context.Context, vol *structs.CSIVolume, claim *structs.CSIVolumeClaim) error {
	cctx, cancel := context.WithTimeout(ctx, w.cfg.ControllerTimeout)
	defer cancel()
	return w.cfg.NodeDetacher.NodeDetach(cctx, vol.Copy(), claim.Copy())
}

// controllerUnpublish runs one ControllerUnpublish until deadline (the
// claim's UnpublishUntil, on the real clock), and reports whether the
// call may still run: its answer never came (claims.ErrMayStillRun, or
// the wait ended).
func (w *Watcher) controllerUnpublish(ctx context.Context, vol *structs.CSIVolume, claim *structs.CSIVolumeClaim, deadline time.Time) (abandoned bool, err error) {
	cctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	err = w.cfg.Controller.ControllerUnpublish(cctx, vol.Copy(), claim.Copy())
	return err != nil && (cctx.Err() != nil || errors.Is(err, claims.ErrMayStillRun)), err
}

// stepped is claims.Stepped.
func stepped(claim *structs.CSIVolumeClaim, step structs.CSIClaimStep, releaseReason string) *structs.CSIVolumeClaim {
	return claims.Stepped(claim, step, releaseReason)
}

// noted returns claim with its LastError showing why it waits (for a
// recorded Wait) or cleared (it no longer waits on that), or nil when it
// already says so. It never overwrites the error of a failed call on a
// reserved claim (the client's Claim records those); a Taken claim that
// is back in use or waiting on its client drops a stale one.
func noted(claim *structs.CSIVolumeClaim, act claims.Action) *structs.CSIVolumeClaim {
	want := ""
	if act.Kind == claims.Wait && act.Record {
		want = act.Reason
	}
	switch {
	case claim.Step == structs.CSIClaimTaken && claim.Attempts == 0:
		// A claim with attempts carries a failure someone reported (the
		// client's progress, a failed node detach): that stays until its
		// reporter clears it or the claim moves on.
		if claim.LastError == want && claim.NextRetry == 0 {
			return nil
		}
		c := claim.Copy()
		c.LastError, c.Attempts, c.NextRetry = want, 0, 0
		return c
	case claim.Attempts == 0 && claim.LastError != want:
		c := claim.Copy()
		c.LastError = want
		return c
	}
	return nil
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// watch queues volumes whose claims may have work when the tables they
// depend on change, and every volume with unfinished claims on each
// resync (the first pass of a term is one: a new leader resumes what
// the old one left).
func (w *Watcher) watch(ctx context.Context) {
	sc := &scanner{}
	var index uint64
	resyncAt := time.Now()
	var lastScan time.Time
	var lastTook time.Duration
	for attempt := 0; ; {
		wctx, cancel := context.WithDeadline(ctx, resyncAt)
		idx, err := state.BlockingQueryFunc(wctx, w.cfg.State, index, watchTables)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			full := !time.Now().Before(resyncAt)
			if full {
				resyncAt = time.Now().Add(w.cfg.ResyncInterval)
			} else if d := scanGap(lastTook) - time.Since(lastScan); d > 0 && !helper.SleepCtx(ctx, d) {
				return
			}
			lastScan = time.Now()
			var g gauges
			if g, err = w.scan(sc, full); err == nil {
				g.emit()
			}
			lastTook = time.Since(lastScan)
		}
		if err != nil {
			w.logger.Warn("watching volume claims failed; retrying", "error", err)
			if !helper.SleepCtx(ctx, w.retry.Delay(attempt)) {
				return
			}
			attempt++
			continue
		}
		attempt, index = 0, max(idx, 1)
	}
}

// watchTables is the blocking query of watch: any write to the tables a
// claim's next step depends on.
func watchTables(ws memdb.WatchSet, snap *state.StateSnapshot) (uint64, error) {
	if _, err := snap.CSIVolumes(ws, structs.AllNamespaces); err != nil {
		return 0, err
	}
	if _, err := snap.Allocs(ws); err != nil {
		return 0, err
	}
	if _, err := snap.Nodes(ws); err != nil {
		return 0, err
	}
	if _, err := snap.CSIPlugins(ws); err != nil {
		return 0, err
	}
	var index uint64
	for _, t := range []string{state.TableCSIVolumes, state.TableAllocs, state.TableNodes, state.TableCSIPlugins} {
		i, err := snap.Index(t)
		if err != nil {
			return 0, err
		}
		index = max(index, i)
	}
	return index, nil
}

// scanner is what watch remembers between scans. Stored objects are
// immutable, so an unchanged pointer means an unchanged object.
type scanner struct {
	seen map[volumeKey]*observed
	// unfinishedSince is when this term first saw each claim with release
	// work (anything but None), for the oldest-age gauge.
	unfinishedSince map[claimKey]time.Time
}

type observed struct {
	vol    *structs.CSIVolume
	plugin *structs.CSIPlugin
	allocs map[string]*structs.Allocation
	nodes  map[string]*structs.Node
}

type claimKey struct {
	vol   volumeKey
	alloc string
}

// scan reads every volume with live claims, queues those with work that
// changed since the last scan (all of them with work when full), and
// returns the gauges.
func (w *Watcher) scan(sc *scanner, full bool) (gauges, error) {
	snap, err := w.cfg.State().Snapshot()
	if err != nil {
		return gauges{}, err
	}
	iter, err := snap.CSIVolumes(nil, structs.AllNamespaces)
	if err != nil {
		return gauges{}, err
	}
	now := w.cfg.Now()
	seen := map[volumeKey]*observed{}
	unfinished := map[claimKey]time.Time{}
	var g gauges
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		vol := raw.(*structs.CSIVolume)
		if len(vol.Claims) == 0 {
			continue
		}
		k := volumeKey{vol.Namespace, vol.ID}
		obs := &observed{vol: vol, allocs: map[string]*structs.Allocation{}, nodes: map[string]*structs.Node{}}
		if w.cfg.Controller != nil {
			if obs.plugin, err = snap.CSIPluginSummary(nil, vol.PluginID); err != nil {
				return gauges{}, err
			}
		}
		prof := claims.Profile{}
		if w.cfg.Controller != nil {
			prof = claims.ProfileOf(obs.plugin, true)
		}
		prev := sc.seen[k]
		changed := full || prev == nil || prev.vol != vol || prev.plugin != obs.plugin
		work := false
		for _, c := range vol.LiveClaims() {
			alloc, err := snap.AllocByID(nil, c.AllocID)
			if err != nil {
				return gauges{}, err
			}
			node, err := snap.NodeByID(nil, c.NodeID)
			if err != nil {
				return gauges{}, err
			}
			obs.allocs[c.AllocID], obs.nodes[c.NodeID] = alloc, node
			if prev != nil && (prev.allocs[c.AllocID] != alloc || prev.nodes[c.NodeID] != node) {
				changed = true
			}
			if claims.Next(vol, c, alloc, claims.WithDeadline(node, w.cfg.DefaultDisconnectDeadline), prof, w.cfg.NodeDetachGrace, now).Kind == claims.None {
				continue
			}
			work = true
			ck := claimKey{k, c.AllocID}
			since, ok := sc.unfinishedSince[ck]
			if !ok {
				since = now
			}
			unfinished[ck] = since
			g.backlog++
			g.oldest = max(g.oldest, now.Sub(since))
		}
		seen[k] = obs
		if changed && work {
			w.queue.Add(k)
		}
	}
	sc.seen, sc.unfinishedSince = seen, unfinished
	return g, nil
}
