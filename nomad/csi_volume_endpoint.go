package nomad

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/helper/steptrace"
	"github.com/berth-io/berth/nomad/acl"
	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// CSIVolumeEndpoint registers, deregisters and reads CSI volumes
// ("CSIVolume.*"). Claims, create and delete come with the claim protocol.
type CSIVolumeEndpoint struct {
	srv *Server
}

// Register registers volumes or updates registered ones, all or none, in
// one Raft entry. Every problem with every volume is reported at once.
//
// Each volume must be valid and its plugin known to the cluster; the
// volume takes the plugin's provider and version. An update may change
// only what is safe to change under live claims: see checkVolumeUpdate.
// Secrets are replaced when the update gives some and kept otherwise, so
// a spec read back from the API (which never carries secrets) can be
// registered again without losing them.
func (v *CSIVolumeEndpoint) Register(args *structs.CSIVolumeRegisterRequest, reply *structs.CSIVolumeRegisterResponse) (err error) {
	defer wire(&err)
	defer measureRPC("CSIVolume.Register", time.Now())
	if done, err := v.srv.forward("CSIVolume.Register", args, args, reply); done {
		return err
	}
	if len(args.Volumes) == 0 {
		return structs.NewError(structs.CodeInvalid, "volume register: no volumes given")
	}
	ns := args.RequestNamespace()
	if ns == structs.AllNamespaces {
		return structs.NewError(structs.CodeInvalid, "volume register: namespace %q is only for listing; name one namespace", ns)
	}
	snap, err := v.srv.State().Snapshot()
	if err != nil {
		return err
	}
	now := time.Now().UnixNano()
	reads := newRegisterReads(snap)
	var (
		errs []error
		vols = make([]*structs.CSIVolume, 0, len(args.Volumes))
		// existing[i] is what vols[i] replaces, nil for a new volume.
		existing = make([]*structs.CSIVolume, 0, len(args.Volumes))
		seen     = make(map[string]bool, len(args.Volumes))
	)
	for i, in := range args.Volumes {
		if in == nil {
			errs = append(errs, structs.NewError(structs.CodeInvalid, "volume %d of the request is empty", i+1))
			continue
		}
		// Copy: in-process callers share the volumes with us, unless
		// they handed them over (a seventh of a 1,000-volume register's
		// CPU on the server was these copies).
		vol := in
		if !args.VolumesHandedOver() {
			vol = in.Copy()
		}
		if vol.Namespace == "" {
			vol.Namespace = ns
		}
		key := vol.Namespace + "\x00" + vol.ID
		if vol.ID != "" && seen[key] {
			errs = append(errs, structs.NewError(structs.CodeInvalid, "volume %q is given twice in the request", vol.ID))
			continue
		}
		seen[key] = true
		old, verrs := prepareVolumeRegister(reads, vol, now)
		if len(verrs) > 0 {
			errs = append(errs, verrs...)
			continue
		}
		vols, existing = append(vols, vol), append(existing, old)
	}
	if len(errs) > 0 {
		return joinCoded(errs)
	}
	// A new volume of a plugin with controllers is checked by one
	// (ValidateVolumeCapabilities) before it is recorded: a volume the
	// provider cannot serve as asked fails here, not at first claim. When
	// no controller can be reached the volume is registered with a
	// warning: operators may register volumes before the plugin's job is
	// up, and the claim's ControllerPublish checks the volume again.
	var (
		ctx      context.Context
		warnings []string
	)
	for i, vol := range vols {
		if existing[i] != nil {
			continue
		}
		plugin, err := reads.plugin(vol.PluginID)
		if err != nil {
			return err
		}
		if plugin == nil || plugin.ControllersExpected == 0 {
			continue
		}
		if ctx == nil {
			var cancel context.CancelFunc
			ctx, cancel = v.srv.csiContext()
			defer cancel()
		}
		err = v.srv.validateWithController(ctx, vol, plugin)
		switch {
		case err == nil:
		case structs.CodeOf(err) == structs.CodeRetryable:
			warnings = append(warnings, fmt.Sprintf("%v; registered without that check", err))
		default:
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return joinCoded(errs)
	}
	if err := v.changeRegistered(vols, existing); err != nil {
		return err
	}
	reply.Warnings = strings.Join(warnings, "\n")
	args.Namespace, args.Volumes, args.Timestamp = ns, vols, now
	// vols are this call's own (copies, or volumes handed over), so the
	// leader's FSM may store them without decoding the entry.
	resp, index, err := v.srv.raftApplyHandOff(structs.CSIVolumeRegisterRequestType, args, markFirst(vols, steptrace.RegisterProposed))
	if err != nil {
		return fmt.Errorf("registering volumes: %w", err)
	}
	markFirst(vols, steptrace.RegisterCommitted)()
	// The answer is the volumes as this entry stored them (the FSM's
	// response), not read back one by one: that was 1,000 lookups and
	// deep copies per 1,000-volume register.
	stored, ok := resp.([]*structs.CSIVolume)
	if !ok {
		return structs.NewError(structs.CodeInternal, "registering volumes: the FSM answered %T, not the stored volumes", resp)
	}
	reply.Volumes = make([]*structs.CSIVolume, 0, len(stored))
	for _, vol := range stored {
		reply.Volumes = append(reply.Volumes, vol.Redacted())
	}
	reply.Index = index
	return nil
}

// markFirst returns a func that marks step (helper/steptrace) for the
// register of vols, keyed by its first volume's ID.
func markFirst(vols []*structs.CSIVolume, step string) func() {
	if len(vols) == 0 || vols[0] == nil {
		return func() {}
	}
	id := vols[0].ID
	return func() { steptrace.Mark(id, step) }
}

// changeRegistered applies, before the registration is written, what
// each volume of vols asks that changes a live volume, as re-running
// create does (changeLocked): a larger capacity_min grows it, changed
// mutable_parameters are set through the plugin, and the results are
// carried into vols. A new volume's mutable_parameters are set on the
// provider's volume. Every refusal is reported before anything changes;
// a failed plugin call stops the registration, naming the volumes that
// did change. existing[i] is the registered volume vols[i] replaces, nil
// for a new one.
func (v *CSIVolumeEndpoint) changeRegistered(vols, existing []*structs.CSIVolume) error {
	var (
		change []*structs.CSIVolume
		errs   []error
	)
	for i, vol := range vols {
		existing := existing[i]
		if existing == nil {
			if len(vol.MutableParameters) > 0 {
				if err := v.srv.canModify(vol, vol.MutableParameters); err != nil {
					errs = append(errs, err)
				} else {
					change = append(change, vol)
				}
			}
			continue
		}
		grow, err := sizeChange(existing, vol)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		changes := mutableChange(existing, vol)
		if len(changes) > 0 {
			if err := v.srv.canModify(existing, changes); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if grow || len(changes) > 0 {
			change = append(change, vol)
		}
	}
	if len(errs) > 0 {
		return joinCoded(errs)
	}
	if len(change) == 0 {
		return nil
	}
	sc, ctx, cancel, err := v.srv.csiOperation()
	if err != nil {
		return err
	}
	defer cancel()
	var done []string
	for _, vol := range change {
		if err := v.changeOne(ctx, sc, vol); err != nil {
			if len(done) > 0 {
				return structs.NewError(structs.CodeOf(err), "%v (volumes %s of the request were changed; nothing was registered)", err, strings.Join(done, ", "))
			}
			return err
		}
		done = append(done, strconv.Quote(vol.ID))
	}
	return nil
}

// changeOne applies one volume's changes under its lock, deciding again
// on the volume as it is once the lock is held, and copies what the
// servers now own into vol.
func (v *CSIVolumeEndpoint) changeOne(ctx context.Context, sc *scheduling, vol *structs.CSIVolume) error {
	unlock, err := sc.lockVolume(ctx, vol.Namespace, vol.ID, fmt.Sprintf("changing volume %q", vol.ID))
	if err != nil {
		return err
	}
	defer unlock()
	existing, err := v.srv.State().CSIVolumeByID(nil, vol.Namespace, vol.ID)
	if err != nil {
		return err
	}
	if existing == nil {
		// Not registered yet: set the mutable parameters on the provider's
		// volume; the registration records them.
		if err := v.srv.csiControllers.modify(ctx, vol, vol.MutableParameters); err != nil {
			return structs.NewError(structs.CodeOf(err), "volume %q: plugin %q did not set mutable_parameters %s: %v",
				vol.ID, vol.PluginID, formatMap(vol.MutableParameters), err)
		}
		return nil
	}
	stored, _, _, err := v.changeLocked(ctx, existing, vol, "register")
	if err != nil {
		return err
	}
	vol.Capacity, vol.Expansion = stored.Capacity, stored.Expansion.Copy()
	vol.MutableParameters, vol.Modification = maps.Clone(stored.MutableParameters), stored.Modification.Copy()
	return nil
}

// registerReads answers a register's reads from one state snapshot, each
// plugin read once however many volumes name it: a request of 1,000
// volumes of one plugin read that plugin 2,000 times and each volume
// three times.
type registerReads struct {
	snap    *state.StateSnapshot
	plugins map[string]*structs.CSIPlugin // by ID; nil: not known
}

func newRegisterReads(snap *state.StateSnapshot) *registerReads {
	return &registerReads{snap: snap, plugins: map[string]*structs.CSIPlugin{}}
}

// plugin is the plugin with the given ID, or nil when there is none.
func (r *registerReads) plugin(id string) (*structs.CSIPlugin, error) {
	if p, ok := r.plugins[id]; ok {
		return p, nil
	}
	p, err := r.snap.CSIPluginSummary(nil, id)
	if err != nil {
		return nil, err
	}
	r.plugins[id] = p
	return p, nil
}

// prepareVolumeRegister validates vol against the plugin and the volume
// it replaces, and fills in what the servers own. It returns the volume
// vol replaces (nil when it is new) and every problem it finds.
func prepareVolumeRegister(reads *registerReads, vol *structs.CSIVolume, now int64) (*structs.CSIVolume, []error) {
	var errs []error
	if err := vol.Validate(); err != nil {
		errs = append(errs, err)
	}
	var plugin *structs.CSIPlugin
	if vol.PluginID != "" {
		p, err := reads.plugin(vol.PluginID)
		if err != nil {
			return nil, append(errs, err)
		}
		if p == nil {
			errs = append(errs, structs.NewError(structs.CodeInvalid,
				"volume %q: CSI plugin %q is not known to the cluster; run 'berth plugin status' to list the plugins, "+
					"and check that the plugin's job is running", vol.ID, vol.PluginID))
		}
		plugin = p
	}
	var existing *structs.CSIVolume
	if vol.ID != "" {
		e, err := reads.snap.CSIVolumeByID(nil, vol.Namespace, vol.ID)
		if err != nil {
			return nil, append(errs, err)
		}
		existing = e
	}
	if existing != nil {
		errs = append(errs, checkVolumeUpdate(existing, vol)...)
	}
	if len(errs) > 0 {
		return existing, errs
	}

	vol.Provider, vol.ProviderVersion = plugin.Provider, plugin.Version
	vol.State = structs.CSIVolumeStateReady
	if vol.Topologies == nil && vol.RequestedTopologies != nil {
		vol.Topologies = slices.Clone(vol.RequestedTopologies.Required)
	}
	if existing != nil {
		if len(vol.Secrets) == 0 {
			vol.Secrets = maps.Clone(existing.Secrets)
		}
		if redactedFlags(vol.MountOptions) && existing.MountOptions != nil {
			vol.MountOptions.MountFlags = slices.Clone(existing.MountOptions.MountFlags)
		}
		// The servers own the capacity and the expansion record once the
		// volume is registered: a spec registered again (which has neither,
		// or an old copy read back from the API) keeps them. Growing goes
		// through sizeChange and expandLocked, never through this copy.
		vol.Capacity = existing.Capacity
		vol.Expansion = existing.Expansion.Copy()
		// Mutable parameters the spec leaves out keep their values (CSI
		// cannot unset one); changed ones are set through the plugin by
		// changeRegistered before this copy is written.
		mutable := maps.Clone(existing.MutableParameters)
		if len(vol.MutableParameters) > 0 && mutable == nil {
			mutable = map[string]string{}
		}
		maps.Copy(mutable, vol.MutableParameters)
		vol.MutableParameters = mutable
		vol.Modification = existing.Modification.Copy()
	}
	// Claims and their modes belong to the claim protocol; the store keeps
	// the stored ones and the indexes. Drop what the request carried.
	vol.Claims, vol.PastClaims = nil, nil
	vol.AccessMode, vol.AttachmentMode = "", ""
	vol.CreateIndex, vol.ModifyIndex = 0, 0
	vol.CreateTime, vol.ModifyTime = now, now
	if existing != nil {
		vol.CreateTime = existing.CreateTime
	}
	return existing, nil
}

// checkVolumeUpdate says what in update may not replace the registered
// volume old, one error per violation:
//
//   - plugin_id, external_id, parameters, snapshot_id and clone_id are
//     fixed once registered (the storage provider knows the volume by
//     them): CodeInvalid;
//   - the capabilities must still include the access and attachment mode
//     of every live claim: CodeConflict;
//   - mount options change only while the volume is unclaimed (mounted
//     volumes keep theirs): CodeConflict;
//   - a volume being created or deleted cannot be registered over:
//     CodeConflict.
func checkVolumeUpdate(old, update *structs.CSIVolume) []error {
	var errs []error
	fixed := func(field, was, is string) {
		if was != is {
			errs = append(errs, structs.NewError(structs.CodeInvalid,
				"volume %q: %s cannot change once registered (registered %q, request has %q); "+
					"deregister the volume and register it again to change it", old.ID, field, was, is))
		}
	}
	fixed("plugin_id", old.PluginID, update.PluginID)
	fixed("external_id", old.ExternalID, update.ExternalID)
	fixed("snapshot_id", old.SnapshotID, update.SnapshotID)
	fixed("clone_id", old.CloneID, update.CloneID)
	if !maps.Equal(old.Parameters, update.Parameters) {
		errs = append(errs, structs.NewError(structs.CodeInvalid,
			"volume %q: parameters cannot change once registered (registered %s, request has %s); "+
				"deregister the volume and register it again to change them",
			old.ID, formatMap(old.Parameters), formatMap(update.Parameters)))
	}
	switch old.State {
	case structs.CSIVolumeStateCreating, structs.CSIVolumeStateDeleting:
		errs = append(errs, structs.NewError(structs.CodeConflict,
			"volume %q is %s; wait for that to finish before registering it again", old.ID, old.State))
	}

	claims := old.LiveClaims()
	if len(claims) == 0 {
		return errs
	}
	type mode struct {
		access structs.CSIVolumeAccessMode
		attach structs.CSIVolumeAttachmentMode
	}
	byMode := map[mode][]string{}
	var modes []mode
	for _, c := range claims {
		m := mode{c.AccessMode, c.AttachmentMode}
		if m.access == "" {
			m.access = old.AccessMode
		}
		if m.attach == "" {
			m.attach = old.AttachmentMode
		}
		if m.access == "" || m.attach == "" {
			continue
		}
		if _, ok := byMode[m]; !ok {
			modes = append(modes, m)
		}
		byMode[m] = append(byMode[m], c.AllocID)
	}
	for _, m := range modes {
		if !update.HasCapability(m.access, m.attach) {
			errs = append(errs, structs.NewError(structs.CodeConflict,
				"volume %q: capabilities must still include access_mode %q with attachment_mode %q, "+
					"which live claims use (allocs %s); add that capability back, or stop those allocs first",
				old.ID, m.access, m.attach, strings.Join(byMode[m], ", ")))
		}
	}
	if !mountOptionsEqual(old.MountOptions, update.MountOptions) {
		allocs := make([]string, 0, len(claims))
		for _, c := range claims {
			allocs = append(allocs, c.AllocID)
		}
		errs = append(errs, structs.NewError(structs.CodeConflict,
			"volume %q: mount_options cannot change while the volume is claimed (allocs %s); "+
				"stop those allocs, then register again", old.ID, strings.Join(allocs, ", ")))
	}
	return errs
}

// redactedFlags reports whether o carries the placeholder the API shows
// instead of mount flags: a spec read back from the API.
func redactedFlags(o *structs.CSIMountOptions) bool {
	return o != nil && len(o.MountFlags) == 1 && o.MountFlags[0] == "[REDACTED]"
}

func mountOptionsEqual(a, b *structs.CSIMountOptions) bool {
	if redactedFlags(b) && a != nil {
		// The API's placeholder for the stored flags: only fs_type counts.
		return a.FSType == b.FSType
	}
	empty := func(o *structs.CSIMountOptions) bool { return o == nil || (o.FSType == "" && len(o.MountFlags) == 0) }
	if empty(a) || empty(b) {
		return empty(a) && empty(b)
	}
	return a.FSType == b.FSType && slices.Equal(a.MountFlags, b.MountFlags)
}

func formatMap(m map[string]string) string {
	if len(m) == 0 {
		return "{}"
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%q", k, m[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// joinCoded joins errors into one coded error: CodeConflict when every
// error is a conflict (the input is fine, the state is not), CodeInvalid
// otherwise. Messages are one per line.
func joinCoded(errs []error) error {
	if len(errs) == 1 {
		var coded *structs.Error
		if errors.As(errs[0], &coded) {
			return coded
		}
	}
	code := structs.CodeConflict
	msgs := make([]string, 0, len(errs))
	for _, err := range errs {
		if structs.CodeOf(err) != structs.CodeConflict {
			code = structs.CodeInvalid
		}
		msgs = append(msgs, err.Error())
	}
	return &structs.Error{Code: code, Msg: strings.Join(msgs, "\n")}
}

// Deregister removes volumes, all or none. A volume with live claims is
// refused (CodeConflict, naming the claiming allocs); with Force, claims
// of allocs that have stopped running do not count. The state store
// enforces both and writes the message.
func (v *CSIVolumeEndpoint) Deregister(args *structs.CSIVolumeDeregisterRequest, reply *structs.GenericResponse) (err error) {
	defer wire(&err)
	defer measureRPC("CSIVolume.Deregister", time.Now())
	if done, err := v.srv.forward("CSIVolume.Deregister", args, args, reply); done {
		return err
	}
	if len(args.VolumeIDs) == 0 || slices.Contains(args.VolumeIDs, "") {
		return structs.NewError(structs.CodeInvalid, "volume deregister: missing volume ID")
	}
	ns := args.RequestNamespace()
	if ns == structs.AllNamespaces {
		return structs.NewError(structs.CodeInvalid, "volume deregister: namespace %q is only for listing; name one namespace", ns)
	}
	args.Namespace = ns
	_, index, err := v.srv.raftApply(structs.CSIVolumeDeregisterRequestType, args)
	if err != nil {
		var coded *structs.Error
		if errors.As(err, &coded) {
			// The store's message names the volume and what blocks it.
			return err
		}
		return fmt.Errorf("deregistering volumes %s: %w", strings.Join(args.VolumeIDs, ", "), err)
	}
	reply.Index = index
	return nil
}

// Get reads one volume by ID or unique ID prefix, with its live and past
// claims and without its secrets; reply.Volume is nil when there is none.
func (v *CSIVolumeEndpoint) Get(args *structs.CSIVolumeGetRequest, reply *structs.CSIVolumeGetResponse) (err error) {
	defer wire(&err)
	defer measureRPC("CSIVolume.Get", time.Now())
	if done, err := v.srv.forward("CSIVolume.Get", args, args, reply); done {
		return err
	}
	if args.ID == "" {
		return structs.NewError(structs.CodeInvalid, "volume read: missing volume ID")
	}
	ns := args.RequestNamespace()
	return v.srv.blockingRPC(&args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, snap *state.StateSnapshot) (uint64, error) {
		vol, err := lookupExact("volume", args.ID,
			func() (*structs.CSIVolume, error) {
				if ns == structs.AllNamespaces {
					return nil, nil
				}
				return snap.CSIVolumeByID(ws, ns, args.ID)
			},
			func() (memdb.ResultIterator, error) { return snap.CSIVolumesByIDPrefix(ws, ns, args.ID) },
			func(v *structs.CSIVolume) string { return v.ID })
		if err != nil {
			return 0, err
		}
		reply.Volume = nil
		if vol != nil {
			reply.Volume = vol.Sanitize()
			reply.Volume.Stats = v.srv.volumeStats.get(vol.Namespace, vol.ID, time.Now())
			return vol.ModifyIndex, nil
		}
		return snap.Index(state.TableCSIVolumes)
	})
}

// List lists the volumes of a namespace ("*" for all): all of them, those
// of one plugin, or those claimed by allocs on one node; by ID prefix, one
// page at a time (next token "<namespace>.<id>"), filtered over the list
// stubs.
func (v *CSIVolumeEndpoint) List(args *structs.CSIVolumeListRequest, reply *structs.CSIVolumeListResponse) (err error) {
	defer wire(&err)
	defer measureRPC("CSIVolume.List", time.Now())
	if done, err := v.srv.forward("CSIVolume.List", args, args, reply); done {
		return err
	}
	ns := args.RequestNamespace()
	return v.srv.blockingRPC(&args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, snap *state.StateSnapshot) (uint64, error) {
		var (
			iter memdb.ResultIterator
			err  error
		)
		switch {
		case args.NodeID != "":
			iter, err = snap.CSIVolumesByNodeID(ws, args.NodeID)
		case args.PluginID != "":
			iter, err = snap.CSIVolumesByPluginID(ws, ns, args.PluginID)
		default:
			iter, err = snap.CSIVolumesByIDPrefix(ws, ns, args.Prefix)
		}
		if err != nil {
			return 0, err
		}
		iter = memdb.NewFilterIterator(iter, func(raw any) bool {
			vol := raw.(*structs.CSIVolume)
			return (ns != structs.AllNamespaces && vol.Namespace != ns) ||
				(args.PluginID != "" && vol.PluginID != args.PluginID) ||
				!strings.HasPrefix(vol.ID, args.Prefix)
		})
		if iter, err = visible(v.srv, &args.QueryOptions, acl.CapCSIListVolume, iter, func(v *structs.CSIVolume) string { return v.Namespace }); err != nil {
			return 0, err
		}
		p, err := paginate(iter, &args.QueryOptions,
			func(v *structs.CSIVolume) pageKey { return nsKey(v.Namespace, v.ID) },
			(*structs.CSIVolume).Stub)
		if err != nil {
			return 0, err
		}
		reply.Volumes, reply.NextToken = p.Items, p.NextToken
		return snap.Index(state.TableCSIVolumes)
	})
}

// volumeStatsTTL is how long a node's sample is shown after it arrived: a
// node that stops reporting (down, or its plugin gone) drops out of the
// volume's stats after a few missed intervals instead of showing old
// figures as current.
const volumeStatsTTL = 3 * structs.MaxCSIStatsInterval

type volumeKey struct{ ns, id string }

// volumeStatsStore keeps the latest usage sample of each (volume, node) in
// the leader's memory. Samples are not written to Raft: at one report per
// node every 15 s they would be most of the log, bump every volume's
// index (waking every blocking query on volumes) for figures that are
// stale in 15 s anyway. A new leader starts empty and is filled by the
// next round of reports (clients send theirs to whichever server is
// leader). The zero value is ready to use.
type volumeStatsStore struct {
	lock sync.Mutex
	// byVolume holds the samples by volume, then node ID.
	byVolume map[volumeKey]map[string]*structs.CSIVolumeStats
	// byNode holds, per node, the volumes of its last report and when it
	// arrived.
	byNode map[string]nodeStatsReport
}

type nodeStatsReport struct {
	at      time.Time
	volumes []volumeKey
}

// replace makes samples the node's current report.
func (s *volumeStatsStore) replace(nodeID string, samples []*structs.CSIVolumeStatsSample, now time.Time) {
	s.lock.Lock()
	defer s.lock.Unlock()
	if s.byVolume == nil {
		s.byVolume = map[volumeKey]map[string]*structs.CSIVolumeStats{}
		s.byNode = map[string]nodeStatsReport{}
	}
	s.dropNodeLocked(nodeID)
	// Forget nodes that stopped reporting, so memory follows the cluster.
	for id, r := range s.byNode {
		if now.Sub(r.at) > volumeStatsTTL {
			s.dropNodeLocked(id)
		}
	}
	rep := nodeStatsReport{at: now, volumes: make([]volumeKey, 0, len(samples))}
	for _, sm := range samples {
		k := volumeKey{sm.Namespace, sm.VolumeID}
		m := s.byVolume[k]
		if m == nil {
			m = map[string]*structs.CSIVolumeStats{}
			s.byVolume[k] = m
		}
		st := sm.Stats.Copy()
		st.NodeID = nodeID
		m[nodeID] = st
		rep.volumes = append(rep.volumes, k)
	}
	s.byNode[nodeID] = rep
}

func (s *volumeStatsStore) dropNodeLocked(nodeID string) {
	for _, k := range s.byNode[nodeID].volumes {
		delete(s.byVolume[k], nodeID)
		if len(s.byVolume[k]) == 0 {
			delete(s.byVolume, k)
		}
	}
	delete(s.byNode, nodeID)
}

// get returns copies of a volume's current samples by node ID, or nil.
func (s *volumeStatsStore) get(ns, id string, now time.Time) map[string]*structs.CSIVolumeStats {
	s.lock.Lock()
	defer s.lock.Unlock()
	var out map[string]*structs.CSIVolumeStats
	for nodeID, st := range s.byVolume[volumeKey{ns, id}] {
		if now.Sub(s.byNode[nodeID].at) > volumeStatsTTL {
			continue
		}
		if out == nil {
			out = map[string]*structs.CSIVolumeStats{}
		}
		out[nodeID] = st.Copy()
	}
	return out
}

// EachVolumeStats calls fn with a copy of every current usage sample this
// server holds, ordered by namespace, volume and node. Only the leader
// holds samples (see volumeStatsStore); on a follower fn is never called.
// The agent's metrics read them as per-volume gauges.
func (s *Server) EachVolumeStats(now time.Time, fn func(ns, volumeID, nodeID string, st *structs.CSIVolumeStats)) {
	type row struct {
		key    volumeKey
		nodeID string
		st     *structs.CSIVolumeStats
	}
	var rows []row
	s.volumeStats.lock.Lock()
	for key, byNode := range s.volumeStats.byVolume {
		for nodeID, st := range byNode {
			if now.Sub(s.volumeStats.byNode[nodeID].at) <= volumeStatsTTL {
				rows = append(rows, row{key, nodeID, st.Copy()})
			}
		}
	}
	s.volumeStats.lock.Unlock()
	slices.SortFunc(rows, func(a, b row) int {
		return strings.Compare(a.key.ns+"\x00"+a.key.id+"\x00"+a.nodeID, b.key.ns+"\x00"+b.key.id+"\x00"+b.nodeID)
	})
	for _, r := range rows {
		fn(r.key.ns, r.key.id, r.nodeID, r.st)
	}
}

// ReportStats takes a client's report of the usage of every CSI volume
// published on its node (structs.CSIVolumeStatsReportRequest) and keeps
// it in the leader's memory, replacing the node's previous report;
// CSIVolume.Get adds the samples to the volume as Stats. Nothing is
// written to Raft (see volumeStatsStore).
func (v *CSIVolumeEndpoint) ReportStats(args *structs.CSIVolumeStatsReportRequest, reply *structs.GenericResponse) (err error) {
	defer wire(&err)
	defer measureRPC("CSIVolume.ReportStats", time.Now())
	if done, err := v.srv.forward("CSIVolume.ReportStats", args, args, reply); done {
		return err
	}
	if args.NodeID == "" {
		return structs.NewError(structs.CodeInvalid, "volume stats report: missing node ID")
	}
	if len(args.Samples) > structs.MaxCSIStatsSamples {
		return structs.NewError(structs.CodeInvalid, "volume stats report from node %s: %d samples, over the limit of %d",
			args.NodeID, len(args.Samples), structs.MaxCSIStatsSamples)
	}
	for i, sm := range args.Samples {
		if sm == nil || sm.Stats == nil || sm.VolumeID == "" || sm.Namespace == "" {
			return structs.NewError(structs.CodeInvalid, "volume stats report from node %s: sample %d lacks a namespace, volume ID or stats", args.NodeID, i)
		}
		if c := sm.Stats.Condition; c != nil && len(c.Message) > structs.MaxCSIConditionMessage {
			c.Message = c.Message[:structs.MaxCSIConditionMessage] + "…"
		}
	}
	node, err := v.srv.State().NodeByID(nil, args.NodeID)
	if err != nil {
		return err
	}
	if node == nil {
		return structs.NewError(structs.CodeNotFound, "volume stats report: node %s is not registered", args.NodeID)
	}
	v.srv.volumeStats.replace(args.NodeID, args.Samples, time.Now())
	reply.Index = v.srv.latestIndex()
	return nil
}
