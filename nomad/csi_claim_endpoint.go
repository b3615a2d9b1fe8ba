package nomad

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-memdb"
	metrics "github.com/hashicorp/go-metrics"

	"github.com/berth-io/berth/helper/groupcommit"
	"github.com/berth-io/berth/helper/steptrace"
	"github.com/berth-io/berth/nomad/claims"
	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/nomad/volumewatcher"
)

// The claim protocol's endpoints (DESIGN.md §4). Clients call Claim before
// they stage and publish a volume for an alloc, and Unpublish once they
// have unpublished it after every task of the alloc exited; operators call
// Detach. Each runs on the leader, under the volume's lock (shared with
// the volumewatcher), and checkpoints every step in Raft:
//
//	Claim:     Reserved ─(ControllerPublish, when the plugin needs it)─► Taken
//	Unpublish: Taken ─► NodeDetached ─(ControllerUnpublish, when needed)─► ControllerDetached ─► freed
//	Detach:    the node's claims ─► freed when releasable; with Force, ─► NodeDetached first
//
// The release half is the volumewatcher's pass (Watcher.Release), so an
// endpoint and the watcher always take the same step for the same state.

// ControllerPublisher reaches a healthy controller instance of a volume's
// plugin. The servers call controllers through the clients that run them
// (csi_controller.go); tests may set a fake in Config.ControllerPublisher.
//
// The servers call it on the leader only, one call per volume at a time
// (under the volume's lock), with a context bounded by
// Config.CSIControllerTimeout. They never mutate nor keep vol and claim;
// vol carries its secrets. Implementations serialize calls per plugin and
// target node, as CSI controllers expect.
type ControllerPublisher interface {
	// ControllerPublish attaches vol to the node of claim
	// (claim.ExternalNodeID is the plugin's ID for it) with the claim's
	// access mode, and returns the publish context for the node plugin.
	// It must be idempotent: publishing again to the same node returns
	// the same context. An error means the volume is not (known to be)
	// attached; a *structs.Error keeps its code, any other error reaches
	// the client as retryable. An error returned after ctx ended, or with
	// errMayStillRun in its chain, leaves the call possibly running until
	// claim.PublishUntil; any other is the call's end. One with
	// errTriedBefore in its chain followed an attempt that may have
	// attached.
	ControllerPublish(ctx context.Context, vol *structs.CSIVolume, claim *structs.CSIVolumeClaim) (map[string]string, error)
	// ControllerUnpublish detaches vol from the node of claim. It must be
	// idempotent: a volume not attached there is a success. An error
	// means it may still be attached; the servers retry with backoff.
	ControllerUnpublish(ctx context.Context, vol *structs.CSIVolume, claim *structs.CSIVolumeClaim) error
}

// csiContext bounds one claim endpoint's work: the wait for the volume's
// lock and the controller call.
func (s *Server) csiContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.ctx, s.config.CSIControllerTimeout+s.config.RaftTimeout)
}

// csiOperation starts one claim endpoint's work on the leader: the term's
// machinery and a context bounding the wait for the volume's lock and the
// plugin call (csiContext). Call cancel when done.
func (s *Server) csiOperation() (*scheduling, context.Context, context.CancelFunc, error) {
	sc, err := s.csiTerm()
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := s.csiContext()
	return sc, ctx, cancel, nil
}

// lockVolume takes the volume's lock (shared with the volumewatcher) for
// the operation described by what ("claiming volume \"db\" for alloc
// …"), or says what could not wait.
func (sc *scheduling) lockVolume(ctx context.Context, ns, id, what string) (func(), error) {
	unlock, err := sc.volumes.Lock(ctx, ns, id, what)
	if err != nil {
		return nil, fmt.Errorf("%s: waiting for the volume: %w", what, err)
	}
	return unlock, nil
}

// writeClaims commits claim transitions, all or none, at the leader's
// time, and returns the index of the entry that carried them. Writes of
// concurrent callers (claims, unpublishes, the volumewatcher's steps) go
// out as one Raft entry (claimWrites): each is still applied or refused on
// its own, and answered only once that entry committed.
//
// berth_csi_claim_write (ms) is one caller's wait, queued and committed;
// berth_csi_claim_commit (ms) one commit's, and berth_csi_claim_commit_groups
// how many callers it carried: their difference is the time queued.
func (s *Server) writeClaims(updates ...*structs.CSIVolumeClaimUpdate) (uint64, error) {
	defer metrics.MeasureSince([]string{"csi", "claim", "write"}, time.Now())
	r := s.claimWrites.Do(updates)
	return r.Index, r.Err
}

// Bounds of one group commit of claim writes: a claim update encodes to
// well under 4 KB, so an entry stays far below maxEntrySize.
const (
	maxClaimGroups  = 512
	maxClaimUpdates = 2048
)

// newClaimWrites group-commits claim writes. Config.CSIClaimCommitsInFlight
// entries may be in Raft at once: the leader appends and replicates each
// as it comes, so the writes queued behind an entry need not wait for it
// to apply before they go out. It stays one by default: at 5,000 simulated
// nodes more in flight made smaller entries that each waited longer, and
// the plans and alloc updates behind them too (README, berth-nodesim).
func newClaimWrites(s *Server) *groupcommit.Batcher[[]*structs.CSIVolumeClaimUpdate] {
	return groupcommit.NewPipelined(s.submitClaimGroups,
		func(u []*structs.CSIVolumeClaimUpdate) int { return len(u) },
		groupcommit.Limits{MaxRequests: maxClaimGroups, MaxWeight: maxClaimUpdates},
		s.config.CSIClaimCommitsInFlight)
}

// submitClaimGroups submits the claim writes of one or more callers as
// one Raft entry and returns the wait for its commit. A lone write keeps
// the single-write message type, which servers of every version apply.
// The Batcher submits entries one at a time in its queue's order, so Raft
// orders them as their writers arrived; each write is still checked by
// the FSM against the state its entry applies to, whatever is in flight.
func (s *Server) submitClaimGroups(groups [][]*structs.CSIVolumeClaimUpdate) func() []groupcommit.Result {
	start := time.Now()
	metrics.AddSample([]string{"csi", "claim", "commit_groups"}, float32(len(groups)))
	ts := start.UnixNano()
	var wait func() (any, uint64, error)
	if len(groups) == 1 {
		wait = s.raftSubmit(structs.CSIVolumeClaimRequestType, &structs.CSIVolumeClaimBatchRequest{
			Claims: groups[0], Timestamp: ts,
		})
	} else {
		req := &structs.CSIVolumeClaimGroupsRequest{Groups: make([]structs.CSIVolumeClaimGroup, len(groups)), Timestamp: ts}
		for i, g := range groups {
			req.Groups[i].Claims = g
		}
		wait = s.raftSubmit(structs.CSIVolumeClaimGroupsRequestType, req)
	}
	return func() []groupcommit.Result {
		defer metrics.MeasureSince([]string{"csi", "claim", "commit"}, start)
		resp, index, err := wait()
		out := make([]groupcommit.Result, len(groups))
		if len(groups) == 1 {
			out[0] = groupcommit.Result{Index: index, Err: err}
			return out
		}
		errs, ok := resp.([]error)
		if err == nil && (!ok || len(errs) != len(groups)) {
			err = structs.NewError(structs.CodeInternal, "raft apply: a group commit of %d claim writes was answered with %T", len(groups), resp)
		}
		for i := range out {
			out[i].Index = index
			if err != nil {
				out[i].Err = err
			} else {
				out[i].Err = errs[i]
			}
		}
		return out
	}
}

// raftSubmit is raftApply in two halves: it hands the entry to Raft and
// returns at once with the wait for its commit and apply, which answers
// as raftApply does. Entries submitted one after the other are in the log
// in that order. The leader's FSM applies msg as it is instead of
// decoding the entry (handOff, as raftApplyHandOff): the claim writes'
// FSM cases store copies of the claims, never the caller's objects.
func (s *Server) raftSubmit(t structs.MessageType, msg any) func() (any, uint64, error) {
	buf, err := encodeEntry(t, msg)
	if err != nil {
		return func() (any, uint64, error) { return nil, 0, err }
	}
	if len(buf) > 1 {
		s.fsm.decoded.put(buf[1:], msg)
	}
	f := s.propose(buf)
	return func() (any, uint64, error) {
		if len(buf) > 1 {
			// Taken back here if Raft never applies it on this server.
			defer s.fsm.decoded.take(buf[1:])
		}
		return s.applied(f)
	}
}

// claimNamespace is the request's namespace, which must name one.
func claimNamespace(w *structs.WriteRequest, op string) (string, error) {
	ns := w.RequestNamespace()
	if ns == structs.AllNamespaces {
		return "", structs.NewError(structs.CodeInvalid, "%s: namespace %q is only for listing; name one namespace", op, ns)
	}
	return ns, nil
}

// Claim takes the claim of an alloc on a volume for the client of the
// alloc's node, before it stages and publishes the volume:
//
//   - the volume, the alloc and the requested modes are checked: the
//     alloc must run on the requesting node and not be stopping, and the
//     (access, attachment) pair must be one of the volume's capabilities
//     (and the reservation's, when there is one);
//   - the alloc's reservation (made at plan apply) becomes Taken, with
//     the external node ID and, when the plugin requires a controller,
//     the publish context from ControllerPublish; an alloc without one
//     reserves and takes in one write, which the state store checks
//     against the other claims;
//   - a claim that another claim blocks fails with CodeNotReady naming
//     the blocking alloc, its node and its step: the client retries;
//   - a repeated Claim of a taken claim returns what the first one did,
//     without a second ControllerPublish.
//
// The reply carries the volume with its secrets: it goes only to the
// claiming client, which passes them to its node plugin.
func (v *CSIVolumeEndpoint) Claim(args *structs.CSIVolumeClaimRequest, reply *structs.CSIVolumeClaimResponse) (err error) {
	defer wire(&err)
	defer measureRPC("CSIVolume.Claim", time.Now())
	if done, err := v.srv.forward("CSIVolume.Claim", args, args, reply); done {
		return err
	}
	steptrace.Mark(args.AllocationID, steptrace.ClaimServed)
	ns, err := claimNamespace(&args.WriteRequest, "volume claim")
	if err != nil {
		return err
	}
	if err := validateClaimRequest(args); err != nil {
		return err
	}
	sc, ctx, cancel, err := v.srv.csiOperation()
	if err != nil {
		return err
	}
	defer cancel()
	unlock, err := sc.lockVolume(ctx, ns, args.VolumeID, fmt.Sprintf("claiming volume %q for alloc %s", args.VolumeID, args.AllocationID))
	if err != nil {
		return err
	}
	defer unlock()

	snap, err := v.srv.State().Snapshot()
	if err != nil {
		return err
	}
	vol, alloc, err := claimSubjects(snap, ns, args)
	if err != nil {
		return err
	}
	existing := vol.Claims[alloc.ID]
	if existing != nil {
		switch existing.Step {
		case structs.CSIClaimTaken:
			if existing.NodeID != args.NodeID {
				return structs.NewError(structs.CodeInvalid, "claiming volume %q for alloc %s: the claim is on node %s, not %s",
					vol.ID, alloc.ID, existing.NodeID, args.NodeID)
			}
			return v.claimReply(ns, vol.ID, alloc.ID, vol.ModifyIndex, reply) // a retry: answer as before
		case structs.CSIClaimNodeDetached, structs.CSIClaimControllerDetached:
			return structs.NewError(structs.CodeConflict,
				"claiming volume %q for alloc %s: the alloc's claim is being released (%s); a stopped alloc cannot claim it again",
				vol.ID, alloc.ID, existing.Step.Describe())
		}
	}
	plugin, err := snap.CSIPluginSummary(nil, vol.PluginID)
	if err != nil {
		return err
	}
	plan, err := claims.Take(vol, existing, alloc, args, sc.volumes.ProfileOf(plugin))
	if err != nil {
		return err
	}
	claim := plan.Claim
	if claim.ExternalNodeID == "" {
		node, err := snap.NodeByID(nil, args.NodeID)
		if err != nil {
			return err
		}
		if node != nil && node.CSINodePlugins[vol.PluginID] != nil && node.CSINodePlugins[vol.PluginID].NodeInfo != nil {
			claim.ExternalNodeID = node.CSINodePlugins[vol.PluginID].NodeInfo.ID
		}
	}
	if plan.ControllerPublish {
		if err := v.controllerPublish(ctx, sc, vol, existing, claim, plan.PublishReadOnly); err != nil {
			return err
		}
	}

	claim.Step = structs.CSIClaimTaken
	claim.LastError, claim.Attempts, claim.NextRetry = "", 0, 0
	if v.srv.sched.Load() != sc {
		// Leadership changed while we published: the new term's watcher
		// owns the volume now; the client retries there.
		return structs.NewError(structs.CodeNoLeader, "claiming volume %q for alloc %s: leadership changed; retry", vol.ID, alloc.ID)
	}
	steptrace.Mark(alloc.ID, steptrace.ClaimProposed)
	index, err := v.srv.writeClaims(&structs.CSIVolumeClaimUpdate{Namespace: ns, VolumeID: vol.ID, Claim: claim})
	if err != nil {
		return claimWriteError(vol.ID, alloc.ID, err)
	}
	steptrace.Mark(alloc.ID, steptrace.ClaimCommitted)
	return v.claimReply(ns, vol.ID, alloc.ID, index, reply)
}

func validateClaimRequest(args *structs.CSIVolumeClaimRequest) error {
	var missing []string
	for _, f := range []struct{ name, val string }{
		{"volume ID", args.VolumeID}, {"alloc ID", args.AllocationID}, {"node ID", args.NodeID},
	} {
		if f.val == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return structs.NewError(structs.CodeInvalid, "volume claim: missing %s", strings.Join(missing, ", "))
	}
	switch args.Mode {
	case "", structs.CSIVolumeClaimRead, structs.CSIVolumeClaimWrite:
	default:
		return structs.NewError(structs.CodeInvalid, "claiming volume %q for alloc %s: unknown claim mode %q (want %q or %q)",
			args.VolumeID, args.AllocationID, args.Mode, structs.CSIVolumeClaimRead, structs.CSIVolumeClaimWrite)
	}
	if args.AccessMode != "" && !args.AccessMode.Valid() {
		return structs.NewError(structs.CodeInvalid, "claiming volume %q for alloc %s: unknown access mode %q",
			args.VolumeID, args.AllocationID, args.AccessMode)
	}
	if args.AttachmentMode != "" && !args.AttachmentMode.Valid() {
		return structs.NewError(structs.CodeInvalid, "claiming volume %q for alloc %s: unknown attachment mode %q",
			args.VolumeID, args.AllocationID, args.AttachmentMode)
	}
	return nil
}

// claimSubjects reads the volume and the alloc of a Claim and checks that
// the alloc may claim.
func claimSubjects(snap *state.StateSnapshot, ns string, args *structs.CSIVolumeClaimRequest) (*structs.CSIVolume, *structs.Allocation, error) {
	vol, err := snap.CSIVolumeByID(nil, ns, args.VolumeID)
	if err != nil {
		return nil, nil, err
	}
	if vol == nil {
		return nil, nil, structs.NewError(structs.CodeNotFound, "claiming volume %q for alloc %s: volume not found in namespace %q",
			args.VolumeID, args.AllocationID, ns)
	}
	alloc, err := snap.AllocByID(nil, args.AllocationID)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case alloc == nil:
		return nil, nil, structs.NewError(structs.CodeNotFound, "claiming volume %q: alloc %s not found", vol.ID, args.AllocationID)
	case alloc.NodeID != args.NodeID:
		return nil, nil, structs.NewError(structs.CodeInvalid, "claiming volume %q for alloc %s: the alloc runs on node %s, not on node %s",
			vol.ID, alloc.ID, alloc.NodeID, args.NodeID)
	case alloc.TerminalStatus():
		return nil, nil, structs.NewError(structs.CodeConflict,
			"claiming volume %q for alloc %s: the alloc is stopping (desired %s, client %s) and may not claim volumes",
			vol.ID, alloc.ID, alloc.DesiredStatus, alloc.ClientStatus)
	}
	return vol, alloc, nil
}

// controllerPublish runs ControllerPublish for claim and sets its publish
// context. The claim is first written as Reserved with the external node
// ID and ControllerPublished, so the volume is held for the alloc while
// the controller works and the volumewatcher can undo a publish whose
// Taken write is lost (it controller-unpublishes such a reservation before
// freeing it). A failure is recorded on the reservation for operators
// (claims.PublishFailed): a retryable one keeps it, and the client
// retries; a final one (the plugin refused, or does not implement the
// call) answers the client with a final code, which fails the alloc with
// the plugin's words, and the reservation is freed once the alloc stops.
// readOnly is ControllerPublish's readonly field (claims.TakePlan).
func (v *CSIVolumeEndpoint) controllerPublish(ctx context.Context, sc *scheduling, vol *structs.CSIVolume, existing, claim *structs.CSIVolumeClaim, readOnly bool) error {
	pub := v.srv.controllers()
	if claim.ExternalNodeID == "" {
		return structs.NewError(structs.CodeNotReady,
			"claiming volume %q for alloc %s: node %s has no external node ID for plugin %q yet (its node plugin has not fingerprinted); retry",
			vol.ID, claim.AllocID, claim.NodeID, vol.PluginID)
	}
	// A ControllerUnpublish of the volume from this node that may still
	// run would detach it from under this alloc if it landed after the
	// publish (seed 4060). Its deadline is in state (UnpublishUntil, which
	// the client ends it by), so a leader that did not make the call
	// waits it out too; this one also holds the node's controller lock.
	if holder, until := claims.UnpublishHold(vol, claim.ExternalNodeID, sc.volumes.Now()); holder != nil {
		return structs.NewError(structs.CodeNotReady,
			"claiming volume %q for alloc %s: a controller unpublish of the volume from node %s (releasing alloc %s's claim) may still be running until %s; "+
				"the controller publish to that node waits until then; retry",
			vol.ID, claim.AllocID, claim.NodeID, holder.AllocID, until.UTC().Format(time.RFC3339Nano))
	}
	// An earlier Claim's call to the same node may have attached the
	// volume (it succeeded and its Taken write was lost, or it timed out).
	earlier := existing != nil && existing.ControllerPublished && existing.ExternalNodeID == claim.ExternalNodeID
	// An earlier Claim's call that may still run keeps its deadline.
	var prior int64
	if existing != nil && existing.PublishUntil > sc.volumes.Now().UnixNano() {
		prior = existing.PublishUntil
	}
	claim.ControllerPublished = true
	// The call gets CSIControllerTimeout from now (the Raft write below
	// included), bounded by the operation's context, and ends then on the
	// client too, retries included (the request carries the deadline).
	// PublishUntil is that instant on the watcher's clock (time.Now but
	// in tests): the release waits it out (claims.Next), so a publish
	// landing after this server gave up or lost leadership cannot follow
	// an unpublish.
	callCtx, cancelCall := context.WithTimeout(ctx, v.srv.config.CSIControllerTimeout)
	defer cancelCall()
	left := v.srv.config.CSIControllerTimeout
	if until, ok := callCtx.Deadline(); ok {
		left = time.Until(until)
	}
	claim.PublishUntil = sc.volumes.Now().Add(left).UnixNano()
	reserved := claim.Copy()
	reserved.Step = structs.CSIClaimReserved
	if _, err := v.srv.writeClaims(&structs.CSIVolumeClaimUpdate{Namespace: vol.Namespace, VolumeID: vol.ID, Claim: reserved}); err != nil {
		return claimWriteError(vol.ID, claim.AllocID, err)
	}
	call := claim.Copy()
	call.ReadOnly = readOnly
	pctx, err := pub.ControllerPublish(callCtx, vol.Copy(), call)
	if err == nil {
		claim.PublishContext = maps.Clone(pctx)
		claim.PublishUntil = prior // this call is over; an earlier one may not be
		return nil
	}
	// A call the client answered is over; one whose answer the server did
	// not wait for (or lost with the session) may still land until
	// PublishUntil, which the release then waits out.
	inFlight := callCtx.Err() != nil || errors.Is(err, errMayStillRun)
	if !inFlight {
		reserved.PublishUntil = prior
	}
	// A call that may still run may still attach, whatever the answer
	// we hold says; so may one another controller answered retryably
	// before this answer.
	earlier = earlier || inFlight || errors.Is(err, errTriedBefore)
	failed, code := claims.PublishFailed(reserved, earlier, fmt.Errorf("controller publish to node %s (external ID %q) through plugin %q failed: %w",
		claim.NodeID, claim.ExternalNodeID, vol.PluginID, err), sc.volumes.Now(), sc.volumes.Backoff())
	if _, werr := v.srv.writeClaims(&structs.CSIVolumeClaimUpdate{Namespace: vol.Namespace, VolumeID: vol.ID, Claim: failed}); werr != nil {
		v.srv.logger.Warn("recording a failed controller publish", "volume_id", vol.ID, "alloc_id", claim.AllocID, "error", werr)
	}
	what := "retry"
	if code != structs.CodeRetryable && code != structs.CodeNotReady && code != structs.CodeNoLeader {
		what = "the plugin will answer the same: check the volume and the plugin, then run the job again"
	}
	return structs.NewError(code, "claiming volume %q for alloc %s: ControllerPublish to node %s through plugin %q failed: %v; %s",
		vol.ID, claim.AllocID, claim.NodeID, vol.PluginID, err, what)
}

// claimWriteError names the claiming alloc in a refused claim write; a
// conflict keeps the store's code and its naming of the blocking claim.
func claimWriteError(volID, allocID string, err error) error {
	var coded *structs.Error
	if errors.As(err, &coded) {
		return &structs.Error{Code: coded.Code, Msg: fmt.Sprintf("alloc %s cannot claim volume %q yet: %s", allocID, volID, coded.Msg)}
	}
	return fmt.Errorf("claiming volume %q for alloc %s: %w", volID, allocID, err)
}

// claimReply fills a Claim reply from the stored claim.
func (v *CSIVolumeEndpoint) claimReply(ns, volID, allocID string, index uint64, reply *structs.CSIVolumeClaimResponse) error {
	vol, err := v.srv.State().CSIVolumeByID(nil, ns, volID)
	if err != nil {
		return err
	}
	if vol == nil || vol.Claims[allocID] == nil {
		return structs.NewError(structs.CodeRetryable, "claiming volume %q for alloc %s: the claim changed meanwhile; retry", volID, allocID)
	}
	reply.PublishContext = maps.Clone(vol.Claims[allocID].PublishContext)
	reply.Volume = vol.Copy() // with secrets: for the claiming client only
	reply.Index = index
	return nil
}

// Unpublish is the client's report that the node side of an alloc's claim
// is done: every task exited, NodeUnpublish (and NodeUnstage for the last
// user) succeeded. When no controller call is left to make, the claim is
// freed in one entry (NodeDetached, ControllerDetached, freed:
// claims.Unpublish); otherwise it is checkpointed NodeDetached, then
// carried on (ControllerUnpublish, ControllerDetached, freed) by the
// volumewatcher's pass. A failed controller call is recorded on the claim (LastError,
// Attempts, NextRetry) and left to the watcher: the client's part is done,
// so the reply is a success. It is idempotent: an alloc without a live
// claim (already freed, or a volume that is gone) succeeds at once. The
// alloc itself may be gone (garbage collected); the claim's node must be
// the requesting one.
func (v *CSIVolumeEndpoint) Unpublish(args *structs.CSIVolumeUnpublishRequest, reply *structs.GenericResponse) (err error) {
	defer wire(&err)
	defer measureRPC("CSIVolume.Unpublish", time.Now())
	if done, err := v.srv.forward("CSIVolume.Unpublish", args, args, reply); done {
		return err
	}
	ns, err := claimNamespace(&args.WriteRequest, "volume unpublish")
	if err != nil {
		return err
	}
	if args.VolumeID == "" || args.AllocationID == "" || args.NodeID == "" {
		return structs.NewError(structs.CodeInvalid, "volume unpublish: missing volume ID, alloc ID or node ID")
	}
	sc, ctx, cancel, err := v.srv.csiOperation()
	if err != nil {
		return err
	}
	defer cancel()

	var freed bool
	index, err := func() (uint64, error) {
		unlock, err := sc.lockVolume(ctx, ns, args.VolumeID, fmt.Sprintf("unpublishing volume %q for alloc %s", args.VolumeID, args.AllocationID))
		if err != nil {
			return 0, err
		}
		defer unlock()
		snap, err := v.srv.State().Snapshot()
		if err != nil {
			return 0, err
		}
		vol, err := snap.CSIVolumeByID(nil, ns, args.VolumeID)
		if err != nil || vol == nil {
			return 0, err // a volume that is gone has nothing to release
		}
		claim := vol.Claims[args.AllocationID]
		if claim == nil {
			return vol.ModifyIndex, nil // already freed: a retry
		}
		if claim.NodeID != args.NodeID {
			return 0, structs.NewError(structs.CodeInvalid,
				"unpublishing volume %q for alloc %s: the claim is on node %s; node %s cannot release it",
				vol.ID, claim.AllocID, claim.NodeID, args.NodeID)
		}
		if claim.Step != structs.CSIClaimReserved && claim.Step != structs.CSIClaimTaken {
			return vol.ModifyIndex, nil // node side already recorded: a retry
		}
		prof, err := sc.volumes.Profile(snap, vol)
		if err != nil {
			return 0, err
		}
		// NodeDetached, and freed in the same entry when no controller
		// call is left to make (claims.Unpublish).
		steps, next := claims.Unpublish(vol, claim, prof, sc.volumes.Now())
		if next == claims.ControllerUnpublish {
			// The release below makes that call first: its deadline goes
			// in this entry, not in one of the watcher's before the call.
			steps[0].UnpublishUntil = sc.volumes.UnpublishDeadline(ns, vol.ID, steps[0])
		}
		updates := make([]*structs.CSIVolumeClaimUpdate, len(steps))
		for i, c := range steps {
			updates[i] = &structs.CSIVolumeClaimUpdate{Namespace: ns, VolumeID: vol.ID, Claim: c}
		}
		index, err := v.srv.writeClaims(updates...)
		if err != nil {
			return 0, fmt.Errorf("unpublishing volume %q for alloc %s: %w", vol.ID, claim.AllocID, err)
		}
		freed = steps[len(steps)-1].Step == structs.CSIClaimFreed
		return index, nil
	}()
	if err != nil {
		return err
	}
	if !freed {
		// The node side is in Raft: from here on the watcher finishes the
		// release whatever happens to this call.
		if err := sc.volumes.Release(ctx, ns, args.VolumeID, volumewatcher.ReleaseOptions{AllocIDs: []string{args.AllocationID}}); err != nil {
			v.srv.logger.Warn("releasing claim after unpublish; the volumewatcher retries",
				"namespace", ns, "volume_id", args.VolumeID, "alloc_id", args.AllocationID, "error", err)
		}
	}
	reply.Index = max(index, v.srv.latestIndex())
	return nil
}

// MaxProgressError bounds the error text a client's progress report
// stores on a claim.
const MaxProgressError = 1024

// ReportProgress records a client's report on a claim it cannot move
// forward on its node (structs.CSIVolumeClaimProgressRequest) as the
// claim's LastError, Attempts and NextRetry, leaving its step alone, so
// that operators see why it waits: the servers cannot see a node plugin
// that is down. Only the claim's node may report on it, and only while the
// node side is the client's (Reserved or Taken); a report on a claim that
// moved on, or is gone, is dropped as stale. A repeat of what is stored
// writes nothing.
func (v *CSIVolumeEndpoint) ReportProgress(args *structs.CSIVolumeClaimProgressRequest, reply *structs.GenericResponse) (err error) {
	defer wire(&err)
	defer measureRPC("CSIVolume.ReportProgress", time.Now())
	if done, err := v.srv.forward("CSIVolume.ReportProgress", args, args, reply); done {
		return err
	}
	ns, err := claimNamespace(&args.WriteRequest, "volume claim progress")
	if err != nil {
		return err
	}
	switch {
	case args.VolumeID == "" || args.AllocationID == "" || args.NodeID == "":
		return structs.NewError(structs.CodeInvalid, "volume claim progress: missing volume ID, alloc ID or node ID")
	case args.Phase != structs.CSIClaimPhasePublish && args.Phase != structs.CSIClaimPhaseUnpublish:
		return structs.NewError(structs.CodeInvalid, "volume claim progress: unknown phase %q (want %q or %q)",
			args.Phase, structs.CSIClaimPhasePublish, structs.CSIClaimPhaseUnpublish)
	case args.Attempts < 0:
		return structs.NewError(structs.CodeInvalid, "volume claim progress: negative attempts %d", args.Attempts)
	}
	sc, ctx, cancel, err := v.srv.csiOperation()
	if err != nil {
		return err
	}
	defer cancel()
	unlock, err := sc.lockVolume(ctx, ns, args.VolumeID, fmt.Sprintf("recording progress of volume %q for alloc %s", args.VolumeID, args.AllocationID))
	if err != nil {
		return err
	}
	defer unlock()
	reply.Index = v.srv.latestIndex()
	vol, err := v.srv.State().CSIVolumeByID(nil, ns, args.VolumeID)
	if err != nil || vol == nil {
		return err
	}
	claim := vol.Claims[args.AllocationID]
	if claim == nil || (claim.Step != structs.CSIClaimReserved && claim.Step != structs.CSIClaimTaken) {
		return nil // stale: the claim moved on
	}
	if claim.NodeID != args.NodeID {
		return structs.NewError(structs.CodeInvalid,
			"recording progress of volume %q for alloc %s: the claim is on node %s, not on node %s",
			vol.ID, claim.AllocID, claim.NodeID, args.NodeID)
	}
	msg := args.Error
	if len(msg) > MaxProgressError {
		msg = msg[:MaxProgressError] + "…"
	}
	if msg != "" {
		msg = fmt.Sprintf("node %s: %s failed: %s", args.NodeID, args.Phase, msg)
	}
	attempts, next := args.Attempts, args.NextRetry
	if msg == "" {
		attempts, next = 0, 0
	}
	if claim.LastError == msg && claim.Attempts == attempts && claim.NextRetry == next {
		return nil
	}
	c := claim.Copy()
	c.LastError, c.Attempts, c.NextRetry = msg, attempts, next
	index, err := v.srv.writeClaims(&structs.CSIVolumeClaimUpdate{Namespace: ns, VolumeID: vol.ID, Claim: c})
	if err != nil {
		return fmt.Errorf("recording progress of volume %q for alloc %s: %w", vol.ID, claim.AllocID, err)
	}
	reply.Index = index
	return nil
}

// latestIndex is the index a write that changed nothing replies with.
func (s *Server) latestIndex() uint64 {
	idx, _ := s.State().LatestIndex()
	return max(idx, 1)
}

// Detach is the operator's `volume detach VOL NODE` (node by ID or unique
// prefix). claims.Detach decides for each of the node's claims:
//
//   - a claim releasing by itself (its alloc stopped, its node side done
//     or moot) is carried on now, failed calls retried at once;
//   - a NeedsOperator claim is resumed at the step it stopped at, or,
//     when its plugin does not implement that step (or with Force), has
//     the step skipped and goes on towards freed;
//   - with Force, claims of stopped allocs, or of any alloc on a node that
//     is down or gone, are marked NodeDetached ("detach -force by
//     operator") without waiting for the node; Force never detaches from
//     an alloc that runs on a live node.
//
// If any claim cannot be released, nothing is done and the error names
// each alloc, its step and what it waits for. The release itself runs
// after the reply's writes; the CLI follows the volume until the node's
// claims are freed, or one stops on an error.
func (v *CSIVolumeEndpoint) Detach(args *structs.CSIVolumeDetachRequest, reply *structs.GenericResponse) (err error) {
	defer wire(&err)
	defer measureRPC("CSIVolume.Detach", time.Now())
	if done, err := v.srv.forward("CSIVolume.Detach", args, args, reply); done {
		return err
	}
	ns, err := claimNamespace(&args.WriteRequest, "volume detach")
	if err != nil {
		return err
	}
	if args.VolumeID == "" || args.NodeID == "" {
		return structs.NewError(structs.CodeInvalid, "volume detach: missing volume ID or node ID")
	}
	sc, ctx, cancel, err := v.srv.csiOperation()
	if err != nil {
		return err
	}
	defer cancel()

	allocIDs, err := func() ([]string, error) {
		unlock, err := sc.lockVolume(ctx, ns, args.VolumeID, fmt.Sprintf("detaching volume %q", args.VolumeID))
		if err != nil {
			return nil, err
		}
		defer unlock()
		snap, err := v.srv.State().Snapshot()
		if err != nil {
			return nil, err
		}
		vol, err := snap.CSIVolumeByID(nil, ns, args.VolumeID)
		if err != nil {
			return nil, err
		}
		if vol == nil {
			return nil, structs.NewError(structs.CodeNotFound, "volume %q not found in namespace %q", args.VolumeID, ns)
		}
		nodeID, err := detachNode(snap, vol, args.NodeID)
		if err != nil {
			return nil, err
		}
		prof, err := sc.volumes.Profile(snap, vol)
		if err != nil {
			return nil, err
		}
		var (
			blocking, ids []string
			updates       []*structs.CSIVolumeClaimUpdate
		)
		now := sc.volumes.Now()
		for _, c := range vol.LiveClaims() {
			if c.NodeID != nodeID {
				continue
			}
			alloc, node, err := sc.volumes.Subjects(snap, c)
			if err != nil {
				return nil, err
			}
			act := claims.Detach(vol, c, alloc, node, prof, args.Force, sc.volumes.NodeDetachGrace(), now)
			switch act.Kind {
			case claims.DetachBlocked:
				blocking = append(blocking, fmt.Sprintf("alloc %s (%s): %s", c.AllocID, c.Step, act.Reason))
			case claims.DetachWrite:
				updates = append(updates, &structs.CSIVolumeClaimUpdate{Namespace: vol.Namespace, VolumeID: vol.ID, Claim: act.Claim})
			}
			ids = append(ids, c.AllocID)
		}
		if len(blocking) > 0 {
			hint := "stop those allocs and wait for their client, or use -force if the node is gone for good"
			if args.Force {
				hint = "-force does not detach a volume from allocs that still run on a live node: stop those allocs first"
			}
			return nil, structs.NewError(structs.CodeConflict, "volume %q cannot be detached from node %s yet: %s; %s",
				vol.ID, nodeID, strings.Join(blocking, "; "), hint)
		}
		if len(updates) > 0 {
			if _, err := v.srv.writeClaims(updates...); err != nil {
				return nil, fmt.Errorf("detaching volume %q from node %s: %w", vol.ID, nodeID, err)
			}
			v.srv.logger.Warn("volume claims moved by operator detach", "namespace", vol.Namespace, "volume_id", vol.ID,
				"node_id", nodeID, "force", args.Force, "claims", len(updates))
		}
		return ids, nil
	}()
	if err != nil || len(allocIDs) == 0 {
		reply.Index = v.srv.latestIndex()
		return err
	}
	if err := sc.volumes.Release(ctx, ns, args.VolumeID, volumewatcher.ReleaseOptions{AllocIDs: allocIDs, IgnoreBackoff: true}); err != nil {
		return fmt.Errorf("detaching volume %q from node %s: %w; the volumewatcher retries", args.VolumeID, args.NodeID, err)
	}
	reply.Index = v.srv.latestIndex()
	return nil
}

// detachNode resolves the node of a detach: an exact ID or a unique
// prefix among the nodes holding claims on vol (a node may be gone from
// the servers and still hold claims), else among registered nodes (which
// then have nothing to detach).
func detachNode(snap *state.StateSnapshot, vol *structs.CSIVolume, id string) (string, error) {
	var matches []string
	for _, c := range vol.LiveClaims() {
		if c.NodeID == id {
			return id, nil
		}
		if strings.HasPrefix(c.NodeID, id) && !slices.Contains(matches, c.NodeID) {
			matches = append(matches, c.NodeID)
		}
	}
	switch len(matches) {
	case 1:
		return matches[0], nil
	case 0:
	default:
		slices.Sort(matches)
		return "", structs.NewError(structs.CodeInvalid,
			"node ID prefix %q is ambiguous: volume %q has claims on nodes %s; give more of the ID",
			id, vol.ID, strings.Join(matches, ", "))
	}
	node, err := lookupExact("node", id,
		func() (*structs.Node, error) { return snap.NodeByID(nil, id) },
		func() (memdb.ResultIterator, error) { return snap.NodesByIDPrefix(nil, id) },
		func(n *structs.Node) string { return n.ID })
	if err != nil {
		return "", err
	}
	if node == nil {
		return "", structs.NewError(structs.CodeNotFound, "node %q not found, and volume %q has no claims on such a node", id, vol.ID)
	}
	return node.ID, nil
}
