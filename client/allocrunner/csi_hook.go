package allocrunner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/client/allocrunner/shared"
	"github.com/berth-io/berth/client/pluginmanager/csimanager"
	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/helper/crashpoint"
	"github.com/berth-io/berth/helper/steptrace"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

// csiHookName names the hook in logs and its hook data.
const csiHookName = "csi"

// CSIManager is what the csi_hook needs of the client's CSI plugin manager
// (*csimanager.Manager).
type CSIManager interface {
	// NodePlugin returns a node plugin that can mount now.
	NodePlugin(pluginID string) (csimanager.VolumeManager, bool)
	// WaitForNodePlugin waits for a node plugin, or for ctx.
	WaitForNodePlugin(ctx context.Context, pluginID string) (csimanager.VolumeManager, error)
	// IsMounted reports whether a host path is a mount point.
	IsMounted(path string) (bool, error)
}

// CSIRPC calls a server RPC (CSIVolume.Get, .Claim, .Unpublish), returning
// as soon as ctx ends. Errors keep their structs.Error code.
type CSIRPC func(ctx context.Context, method string, args, reply any) error

// CSIHookConfig is what the client gives every csi_hook.
type CSIHookConfig struct {
	Manager CSIManager
	RPC     CSIRPC
	// NodeID returns this node's ID.
	NodeID func() string
	// Drivers are the node's drivers, for their mount support.
	Drivers map[string]drivers.Driver
	// Events records task events about volumes; nil records none.
	Events *CSIEvents
	// PluginWait bounds each wait for a node plugin (default 1m).
	PluginWait time.Duration
	// RetryBackoff paces claim, lookup and release retries (default 500ms
	// doubling to 30s).
	RetryBackoff helper.Backoff
	// PostrunWait is how long one Postrun waits for the releases before it
	// reports them pending, so the alloc runner logs and calls it again
	// (default 5s). The releases go on in between.
	PostrunWait time.Duration
	// Plugins remembers each volume's plugin across the client's allocs;
	// NewCSIHookFactory makes one when nil.
	Plugins *CSIVolumePlugins
	// Setups counts the Preruns under way on the node, for task starts to
	// wait on (nil counts nothing).
	Setups *CSISetups
}

// CSIVolumePlugins remembers which plugin each volume (namespace/ID) was
// last claimed through, so that the next alloc of a volume claims it at
// once instead of first reading the volume (CSIVolume.Get, one server
// round trip on the claim path). The Claim reply names the volume's
// plugin: when it is another one (the volume was registered again with
// another plugin), the hook claims again with that plugin's node ID.
// Safe for concurrent use.
type CSIVolumePlugins struct {
	// lock guards byVolume.
	lock     sync.Mutex
	byVolume map[string]string
}

// NewCSIVolumePlugins returns an empty CSIVolumePlugins.
func NewCSIVolumePlugins() *CSIVolumePlugins {
	return &CSIVolumePlugins{byVolume: map[string]string{}}
}

func (p *CSIVolumePlugins) get(namespace, volID string) string {
	p.lock.Lock()
	defer p.lock.Unlock()
	return p.byVolume[namespace+"/"+volID]
}

func (p *CSIVolumePlugins) set(namespace, volID, pluginID string) {
	if pluginID == "" {
		return
	}
	p.lock.Lock()
	defer p.lock.Unlock()
	p.byVolume[namespace+"/"+volID] = pluginID
}

// Defaults of CSIHookConfig.
const (
	DefaultCSIPluginWait  = time.Minute
	DefaultCSIPostrunWait = 5 * time.Second
)

// DefaultCSIRetryBackoff paces the csi_hook's retries.
var DefaultCSIRetryBackoff = helper.Backoff{Base: 500 * time.Millisecond, Max: 30 * time.Second}

// NewCSIHookFactory returns the factory of the csi_hook, which claims,
// stages and publishes a group's CSI volumes before its tasks start and
// releases them after every task exited. Groups without CSI volumes get a
// hook that does nothing.
func NewCSIHookFactory(cfg CSIHookConfig) HookFactory {
	if cfg.PluginWait <= 0 {
		cfg.PluginWait = DefaultCSIPluginWait
	}
	if cfg.RetryBackoff.Base <= 0 {
		cfg.RetryBackoff = DefaultCSIRetryBackoff
	}
	if cfg.PostrunWait <= 0 {
		cfg.PostrunWait = DefaultCSIPostrunWait
	}
	if cfg.Plugins == nil {
		cfg.Plugins = NewCSIVolumePlugins()
	}
	return func(hc *HookConfig) Hook { return newCSIHook(cfg, hc) }
}

// csiHook is the alloc hook for CSI volumes (DESIGN.md §4, the claim
// protocol):
//
//	Prerun  (per volume, in parallel): resolve per_alloc source ─► restored
//	        and still mounted? re-use it ─► else look up the volume's plugin
//	        ─► wait for the node plugin (bounded) ─► Claim RPC (retried while
//	        another claim blocks) ─► NodeStage (first user on the node) ─►
//	        NodePublish ─► HookResources.SetCSIMounts for volume_mount hooks
//	Postrun (every task exited): one release goroutine per volume, owned by
//	        the hook, retrying with backoff: NodeUnpublish ─► NodeUnstage
//	        (last user on the node) ─► Unpublish RPC. Postrun reports an error
//	        until all are done, so TasksExited waits for them.
//	Shutdown, Destroy: cancel and wait for the release goroutines; a
//	        restarted client resumes from the persisted state.
type csiHook struct {
	cfg     CSIHookConfig
	alloc   *structs.Allocation
	tg      *structs.TaskGroup
	volumes map[string]*structs.VolumeRequest // the group's CSI volumes
	res     *shared.HookResources
	data    HookData
	logger  hclog.Logger
	// claimsDone tells the runner the claims are answered (nil: nobody
	// asks; HookConfig.ClaimsDone).
	claimsDone func()

	// loadErr is why the persisted state could not be read (Prerun fails).
	loadErr error

	// ctx ends at Shutdown or Destroy; release goroutines run under it and
	// are counted in wg.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// lock guards state, releases and hook data writes.
	lock     sync.Mutex
	state    *csiHookState
	releases map[string]*csiRelease
}

func newCSIHook(cfg CSIHookConfig, hc *HookConfig) *csiHook {
	h := &csiHook{
		cfg: cfg, alloc: hc.Alloc, res: hc.Resources, data: hc.Data, claimsDone: hc.ClaimsDone,
		logger:   hc.Logger.Named("csi_hook"),
		volumes:  map[string]*structs.VolumeRequest{},
		releases: map[string]*csiRelease{},
		state:    &csiHookState{Volumes: map[string]*csiVolumeState{}},
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	if hc.Alloc.Job != nil {
		h.tg = hc.Alloc.Job.LookupTaskGroup(hc.Alloc.TaskGroup)
	}
	if h.tg != nil {
		for name, v := range h.tg.Volumes {
			if v != nil && v.Type == structs.VolumeTypeCSI {
				h.volumes[name] = v
			}
		}
	}
	// Load what an earlier run did whether or not this runner was restored:
	// Postrun must release it even when Prerun does not run again.
	if h.data != nil && len(h.volumes) > 0 {
		raw, err := h.data.Load(csiHookName)
		if err == nil {
			h.state, err = decodeCSIHookState(raw)
		}
		if err != nil {
			h.loadErr = fmt.Errorf("reading what the csi hook did before: %w", err)
			h.state = &csiHookState{Volumes: map[string]*csiVolumeState{}}
		}
	}
	return h
}

func (*csiHook) Name() string { return csiHookName }

// Prerun sets up every CSI volume of the group; see csiHook.
func (h *csiHook) Prerun(ctx context.Context) error {
	claimsDone := func() {}
	if h.claimsDone != nil {
		claimsDone = h.claimsDone
	}
	defer claimsDone() // whatever ends Prerun early
	if len(h.volumes) == 0 {
		return nil
	}
	if h.loadErr != nil {
		return h.loadErr
	}
	if err := checkMountSupport(h.tg, h.volumes, h.driverMountSupport); err != nil {
		return err
	}
	defer h.cfg.Setups.begin()()
	// The first failure cancels the other volumes' setup; what they did is
	// persisted and released by Postrun.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		claimed sync.WaitGroup // a volume's Claim answered, or its setup over
		lock    sync.Mutex
		errs    []error
		mounts  = map[string]*shared.CSIMount{}
	)
	claimed.Add(len(h.volumes))
	go func() {
		claimed.Wait()
		claimsDone()
	}()
	for _, name := range slices.Sorted(maps.Keys(h.volumes)) {
		wg.Go(func() {
			answered := sync.OnceFunc(claimed.Done)
			defer answered()
			m, err := h.setupVolume(ctx, name, answered)
			lock.Lock()
			defer lock.Unlock()
			if err != nil {
				errs = append(errs, err)
				cancel()
				return
			}
			mounts[name] = m
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		// Report the cause, not the siblings it cancelled.
		var real []error
		for _, err := range errs {
			if !errors.Is(err, context.Canceled) {
				real = append(real, err)
			}
		}
		if len(real) == 0 {
			real = errs
		}
		return errors.Join(real...)
	}
	h.res.SetCSIMounts(mounts)
	return nil
}

func (h *csiHook) driverMountSupport(name string) (structs.MountConfigSupport, bool) {
	d, ok := h.cfg.Drivers[name]
	if !ok || d == nil {
		return "", false
	}
	return d.Capabilities().MountConfig, true
}

// checkMountSupport fails, naming the task, its driver and the volume, when
// a task mounts a CSI volume with a driver that cannot mount volumes. It is
// pure.
func checkMountSupport(tg *structs.TaskGroup, volumes map[string]*structs.VolumeRequest, support func(driver string) (structs.MountConfigSupport, bool)) error {
	if tg == nil {
		return nil
	}
	var errs []error
	for _, t := range tg.Tasks {
		for _, m := range t.VolumeMounts {
			if m == nil || volumes[m.Volume] == nil {
				continue
			}
			s, ok := support(t.Driver)
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("task %q uses driver %q, which is not available on this node; volume %q needs a driver such as %q",
					t.Name, t.Driver, m.Volume, "exec"))
			case s != structs.MountConfigSupportAll:
				errs = append(errs, fmt.Errorf("task %q uses driver %q, which cannot mount volumes; volume %q needs a driver such as %q",
					t.Name, t.Driver, m.Volume, "exec"))
			}
		}
	}
	return errors.Join(errs...)
}

// volumeState returns a copy of a volume's persisted state, or nil.
func (h *csiHook) volumeState(name string) *csiVolumeState {
	h.lock.Lock()
	defer h.lock.Unlock()
	return h.state.Volumes[name].copy()
}

// saveVolume persists a volume's state (nil forgets it).
func (h *csiHook) saveVolume(name string, st *csiVolumeState) error {
	h.lock.Lock()
	defer h.lock.Unlock()
	if st == nil {
		delete(h.state.Volumes, name)
	} else {
		h.state.Volumes[name] = st.copy()
	}
	if h.data == nil {
		return nil
	}
	raw, err := h.state.encode()
	if err == nil {
		err = h.data.Save(csiHookName, raw)
	}
	if err != nil {
		return fmt.Errorf("persisting the csi hook state of volume %q: %w", name, err)
	}
	return nil
}

// setupVolume makes one volume ready for the tasks. It calls answered
// once its Claim RPC returned (Prerun's caller may then start work that
// would slow the claim's Raft write down).
func (h *csiHook) setupVolume(ctx context.Context, name string, answered func()) (*shared.CSIMount, error) {
	req := h.volumes[name]
	source := req.Source
	if req.PerAlloc {
		source = req.SourceFor(h.alloc.Index())
	}
	usage := csimanager.UsageOptions{
		ReadOnly: req.ReadOnly, AttachmentMode: req.AttachmentMode, AccessMode: req.AccessMode, MountOptions: req.MountOptions.Copy(),
	}
	logger := h.logger.With("volume", name, "volume_id", source)
	prev := h.volumeState(name)
	if prev != nil && prev.Source != source {
		// Never overwrite what an earlier run took: Postrun releases it.
		return nil, fmt.Errorf("volume %q was set up with source %q, but the alloc now asks for %q; stop the alloc and place a new one",
			name, prev.Source, source)
	}
	if prev != nil && prev.Step == csiVolumeMounted {
		mounted, err := h.cfg.Manager.IsMounted(prev.MountSource)
		if err == nil && mounted {
			logger.Info("re-using the volume's mount", "path", prev.MountSource)
			h.emit(name, source, prev.PluginID, csiStepReused, fmt.Sprintf("Re-using volume %q (%s) mounted at %s", source, usageText(req), prev.MountSource))
			return &shared.CSIMount{VolumeID: source, PluginID: prev.PluginID, Source: prev.MountSource, ReadOnly: req.ReadOnly, IsDevice: prev.IsDevice}, nil
		}
		logger.Warn("the volume's mount is gone; claiming and mounting it again", "path", prev.MountSource, "error", err)
	}

	pluginID := ""
	if prev != nil {
		pluginID = prev.PluginID
	}
	if pluginID == "" {
		// Only a plugin running here: a stale entry must not make the alloc
		// wait for a plugin that is gone.
		if cached := h.cfg.Plugins.get(h.namespace(), source); cached != "" {
			if _, ok := h.cfg.Manager.NodePlugin(cached); ok {
				pluginID = cached
			}
		}
	}
	if pluginID == "" {
		vol, err := h.lookupVolume(ctx, name, source)
		if err != nil {
			return nil, err
		}
		pluginID = vol.PluginID
	}
	vm, err := h.waitForPlugin(ctx, name, source, pluginID)
	if err != nil {
		return nil, err
	}

	if err := ctx.Err(); err != nil {
		// Stopped already (a restored alloc whose stop was stored,
		// Runner.restoreStop): claim nothing; Postrun releases prev.
		return nil, err
	}
	st := &csiVolumeState{Step: csiVolumeClaiming, Source: source, Namespace: h.namespace(), PluginID: pluginID, Usage: usage}
	if prev != nil && prev.needsUnmount() {
		// A mount may be half there: keep undoing it on release, by the
		// ID the plugin knows the volume by (a claim refused now leaves
		// the release only prev's).
		st.Step, st.ExternalID = csiVolumeMounting, prev.ExternalID
	}
	if err := h.saveVolume(name, st); err != nil {
		return nil, err
	}
	steptrace.Mark(h.alloc.ID, steptrace.ClaimRecorded)
	// The mount's directories are made while the claim is in flight
	// (VolumeManager.PrepareMount); whatever ends the setup before
	// MountVolume removes them again.
	ref := csimanager.VolumeRef{Namespace: h.namespace(), ID: source}
	prepared := make(chan struct{})
	go func() {
		defer close(prepared)
		if err := vm.PrepareMount(ctx, ref, h.alloc.ID, &usage); err != nil {
			logger.Debug("making the mount's directories ahead failed; mounting makes them", "error", err)
		}
	}()
	resp, err := h.claim(ctx, name, source, pluginID, req, vm.ExternalNodeID())
	answered()
	<-prepared
	mounting := false
	defer func() {
		if !mounting {
			vm.DiscardPrepared(ref, h.alloc.ID, &usage)
		}
	}()
	if err != nil {
		return nil, err
	}
	crashpoint.Hit(crashpoint.CSIClaimed)
	vol := resp.Volume
	if vol.PluginID != "" && vol.PluginID != pluginID {
		// The volume moved to another plugin since we looked it up (or
		// since an earlier alloc claimed it): claim again with the node ID
		// that plugin knows this node by.
		logger.Info("the volume's plugin changed; claiming it again through the new one", "old_plugin_id", pluginID, "plugin_id", vol.PluginID)
		vm.DiscardPrepared(ref, h.alloc.ID, &usage)
		mounting = true // nothing prepared through the new plugin
		if vm, err = h.waitForPlugin(ctx, name, source, vol.PluginID); err != nil {
			return nil, err
		}
		pluginID = vol.PluginID
		if resp, err = h.claim(ctx, name, source, pluginID, req, vm.ExternalNodeID()); err != nil {
			return nil, err
		}
		vol = resp.Volume
	}
	h.cfg.Plugins.set(h.namespace(), source, pluginID)
	if vol.Namespace == "" {
		vol.Namespace = h.namespace()
	}
	// Taken: straight to mounting, in one write (each costs an fsync of
	// the client state, and nothing happens between the two steps that
	// would tell them apart: unmounting what was never mounted is a no-op).
	st.Namespace, st.ExternalID, st.PluginID = vol.Namespace, vol.ExternalID, pluginID
	st.Step = csiVolumeMounting
	if err := h.saveVolume(name, st); err != nil {
		return nil, err
	}
	// From here the release unmounts, which removes the directories.
	mounting = true
	steptrace.Mark(h.alloc.ID, steptrace.MountRecorded)
	mi, err := vm.MountVolume(ctx, vol, h.alloc, &usage, resp.PublishContext)
	if err != nil {
		return nil, fmt.Errorf("volume %q (source %q): %w", name, source, err)
	}
	crashpoint.Hit(crashpoint.CSIPublished)
	steptrace.Mark(h.alloc.ID, steptrace.Published)
	st.Step, st.MountSource, st.IsDevice = csiVolumeMounted, mi.Source, mi.IsDevice
	if err := h.saveVolume(name, st); err != nil {
		return nil, err
	}
	logger.Info("volume mounted", "path", mi.Source, "plugin_id", pluginID)
	h.emit(name, source, pluginID, csiStepMounted, fmt.Sprintf("Volume %q (%s) mounted at %s", source, usageText(req), mi.Source))
	return &shared.CSIMount{VolumeID: source, PluginID: pluginID, Source: mi.Source, ReadOnly: req.ReadOnly, IsDevice: mi.IsDevice}, nil
}

func (h *csiHook) namespace() string {
	if h.alloc.Namespace == "" {
		return "default"
	}
	return h.alloc.Namespace
}

func usageText(req *structs.VolumeRequest) string {
	return fmt.Sprintf("%s, %s, %s", req.ClaimMode(), req.AccessMode, req.AttachmentMode)
}

// lookupVolume reads the volume from the servers to learn its plugin,
// retrying while the servers cannot answer.
func (h *csiHook) lookupVolume(ctx context.Context, name, source string) (*structs.CSIVolume, error) {
	for attempt := 0; ; attempt++ {
		req := &structs.CSIVolumeGetRequest{ID: source, QueryOptions: structs.QueryOptions{Namespace: h.namespace()}}
		var resp structs.CSIVolumeGetResponse
		err := h.cfg.RPC(ctx, "CSIVolume.Get", req, &resp)
		switch {
		case err == nil && resp.Volume == nil:
			return nil, fmt.Errorf("volume %q (source %q): no such volume in namespace %q", name, source, h.namespace())
		case err == nil:
			return resp.Volume, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case !retryableServerError(err):
			return nil, fmt.Errorf("volume %q (source %q): looking up the volume: %w", name, source, err)
		}
		d := h.cfg.RetryBackoff.Delay(attempt)
		h.logger.Warn("looking up volume failed; retrying", "volume_id", source, "error", err, "retry_in", d)
		if !helper.SleepCtx(ctx, d) {
			return nil, ctx.Err()
		}
	}
}

// waitForPlugin returns the node plugin, waiting for it up to PluginWait
// with a task event saying what the alloc waits for.
func (h *csiHook) waitForPlugin(ctx context.Context, name, source, pluginID string) (csimanager.VolumeManager, error) {
	if vm, ok := h.cfg.Manager.NodePlugin(pluginID); ok {
		return vm, nil
	}
	h.logger.Info("waiting for the volume's node plugin", "volume_id", source, "plugin_id", pluginID, "timeout", h.cfg.PluginWait)
	h.emit(name, source, pluginID, csiStepWaitingForPlugin,
		fmt.Sprintf("Waiting up to %s for CSI node plugin %q on this node (volume %q)", h.cfg.PluginWait, pluginID, source))
	// The claim is reserved for this alloc already: say on it why it waits.
	h.reportProgress(source, h.namespace(), structs.CSIClaimPhasePublish,
		fmt.Sprintf("node plugin %q not running on this node", pluginID), 1, time.Now().Add(h.cfg.PluginWait))
	wctx, cancel := context.WithTimeout(ctx, h.cfg.PluginWait)
	defer cancel()
	vm, err := h.cfg.Manager.WaitForNodePlugin(wctx, pluginID)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("volume %q (source %q): waited %s: %w", name, source, h.cfg.PluginWait, err)
	}
	h.reportProgress(source, h.namespace(), structs.CSIClaimPhasePublish, "", 0, time.Time{})
	return vm, nil
}

// claim takes the alloc's claim on the volume, retrying with capped
// backoff while another claim blocks it (the servers answer NotReady,
// naming that claim, which a task event shows) or the servers cannot
// answer.
func (h *csiHook) claim(ctx context.Context, name, source, pluginID string, vr *structs.VolumeRequest, externalNodeID string) (*structs.CSIVolumeClaimResponse, error) {
	lastMsg := ""
	for attempt := 0; ; attempt++ {
		req := &structs.CSIVolumeClaimRequest{
			VolumeID: source, AllocationID: h.alloc.ID, NodeID: h.cfg.NodeID(), ExternalNodeID: externalNodeID,
			Mode: vr.ClaimMode(), AccessMode: vr.AccessMode, AttachmentMode: vr.AttachmentMode,
			WriteRequest: structs.WriteRequest{Namespace: h.namespace()},
		}
		var resp structs.CSIVolumeClaimResponse
		steptrace.Mark(h.alloc.ID, steptrace.ClaimSent)
		err := h.cfg.RPC(ctx, "CSIVolume.Claim", req, &resp)
		steptrace.Mark(h.alloc.ID, steptrace.ClaimAnswered)
		switch {
		case err == nil && resp.Volume == nil:
			return nil, fmt.Errorf("volume %q (source %q): the servers granted the claim without the volume", name, source)
		case err == nil:
			if attempt > 0 {
				h.logger.Info("claim granted after retrying", "volume_id", source, "attempts", attempt+1)
			}
			return &resp, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case !retryableServerError(err):
			return nil, fmt.Errorf("volume %q (source %q): claiming: %w", name, source, err)
		}
		d := h.cfg.RetryBackoff.Delay(attempt)
		h.logger.Info("claim not granted yet; retrying", "volume_id", source, "error", err, "retry_in", d)
		if errors.Is(err, structs.ErrNotReady) && err.Error() != lastMsg {
			lastMsg = err.Error()
			h.emit(name, source, pluginID, csiStepClaimBlocked, fmt.Sprintf("Claim of volume %q blocked, retrying: %v", source, err))
		}
		if !helper.SleepCtx(ctx, d) {
			return nil, ctx.Err()
		}
	}
}

// retryableServerError reports whether a server RPC may succeed later: the
// errors that say "not now" (NotReady, NoLeader, Retryable), and transport
// failures (errors without a code). It is pure.
func retryableServerError(err error) bool {
	var se *structs.Error
	if !errors.As(err, &se) {
		return true
	}
	switch se.Code {
	case structs.CodeNotReady, structs.CodeNoLeader, structs.CodeRetryable:
		return true
	}
	return false
}

// emit records a task event about a volume on the tasks that mount it
// (every task when none does), with the destination each mounts it at.
func (h *csiHook) emit(name, source, pluginID, step, msg string) {
	if h.cfg.Events == nil || h.tg == nil {
		return
	}
	req := h.volumes[name]
	details := map[string]string{"volume": name, "source": source, "step": step}
	if pluginID != "" {
		details["plugin"] = pluginID
	}
	if req != nil {
		details["access_mode"] = string(req.AccessMode)
		details["attachment_mode"] = string(req.AttachmentMode)
		details["claim_mode"] = string(req.ClaimMode())
	}
	targets := map[string]string{}
	for _, t := range h.tg.Tasks {
		for _, m := range t.VolumeMounts {
			if m != nil && m.Volume == name {
				targets[t.Name] = m.Destination
			}
		}
	}
	if len(targets) == 0 {
		for _, t := range h.tg.Tasks {
			targets[t.Name] = ""
		}
	}
	for task, dest := range targets {
		d := maps.Clone(details)
		text := msg
		if dest != "" {
			d["destination"] = dest
			text = fmt.Sprintf("%s (task path %s)", msg, dest)
		}
		h.cfg.Events.emit(h.alloc.ID, task, &structs.TaskEvent{
			Type: EventCSIVolume, Time: time.Now().UnixNano(), Message: text, DisplayMessage: text, Details: d,
		})
	}
}
