package allocrunner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/berth-io/berth/client/pluginmanager/csimanager"
	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/helper/crashpoint"
	"github.com/berth-io/berth/helper/steptrace"
	"github.com/berth-io/berth/nomad/structs"
)

// csiRelease is one volume's release goroutine.
type csiRelease struct {
	// done is closed when the goroutine returns.
	done chan struct{}
	// ok and err are guarded by csiHook.lock: ok once the volume was
	// released, err the last failure otherwise.
	ok  bool
	err error
}

// Postrun releases every volume the alloc took (see csiHook). It starts a
// release goroutine per volume that has none, then waits for them up to
// PostrunWait: nil once all are released, else an error naming the
// pending volumes and why, and the alloc runner calls Postrun again later.
func (h *csiHook) Postrun(ctx context.Context) error {
	if waits := h.startReleases(); len(waits) > 0 {
		timer := time.NewTimer(h.cfg.PostrunWait)
		defer timer.Stop()
	wait:
		for _, done := range waits {
			select {
			case <-done:
			case <-ctx.Done():
				return ctx.Err()
			case <-timer.C:
				break wait
			}
		}
	}
	// The persisted state, not the goroutines, says what is left: a hook
	// already shut down starts none, yet must not report its volumes
	// released.
	h.lock.Lock()
	defer h.lock.Unlock()
	var pending []string
	for _, name := range h.state.names() {
		why := "in progress"
		if rel := h.releases[name]; rel != nil && rel.err != nil {
			why = rel.err.Error()
		}
		pending = append(pending, fmt.Sprintf("volume %q (source %q): %s", name, h.state.Volumes[name].Source, why))
	}
	if len(pending) == 0 {
		return nil
	}
	return fmt.Errorf("releasing CSI volumes of alloc %s: still pending: %s", h.alloc.ID, strings.Join(pending, "; "))
}

// startReleases starts a release goroutine for every volume still taken
// that has none running, and returns what to wait on.
func (h *csiHook) startReleases() []<-chan struct{} {
	h.lock.Lock()
	defer h.lock.Unlock()
	if h.ctx.Err() != nil {
		return nil
	}
	var waits []<-chan struct{}
	for _, name := range h.state.names() {
		rel := h.releases[name]
		if rel != nil {
			select {
			case <-rel.done:
				rel = nil // ended without releasing (cancelled): go again
			default:
			}
		}
		if rel == nil {
			rel = &csiRelease{done: make(chan struct{})}
			h.releases[name] = rel
			h.wg.Add(1)
			go func() {
				defer h.wg.Done()
				defer close(rel.done)
				h.releaseLoop(name, rel)
			}()
		}
		waits = append(waits, rel.done)
	}
	return waits
}

// releaseLoop releases one volume, retrying with capped backoff until it
// is done or the hook is shut down or destroyed. Its task events tell only
// what happened: "release pending" with the reason whenever that reason
// changes, and "released" once the node plugin undid the mount and the
// servers accepted the unpublish, worded by how far the mount had got.
func (h *csiHook) releaseLoop(name string, rel *csiRelease) {
	lastMsg := ""
	// pending records why the release waits: a task event when the reason
	// changes, and a progress report to the servers at every attempt.
	pending := func(st *csiVolumeState, why, event string, attempts int, next time.Time) {
		h.reportProgress(st.Source, st.Namespace, structs.CSIClaimPhaseUnpublish, why, attempts, next)
		if event == lastMsg {
			return
		}
		lastMsg = event
		h.emit(name, st.Source, st.PluginID, csiStepReleasePending, fmt.Sprintf("Release of volume %q pending: %s", st.Source, event))
	}
	from := ""
	for attempt := 0; ; attempt++ {
		st := h.volumeState(name)
		if st == nil {
			h.setRelease(rel, true, nil)
			return
		}
		if from == "" {
			from = st.Step
		}
		err := h.release(h.ctx, name, st, func(why string) {
			pending(st, why, why, attempt+1, time.Now().Add(h.cfg.PluginWait))
		}, func() {
			// Before the volume is forgotten: once it is, Postrun may
			// report the alloc's tasks exited, and the event must be
			// there by then.
			h.logger.Info("volume released", "volume", name, "volume_id", st.Source)
			h.emit(name, st.Source, st.PluginID, csiStepReleased, releasedText(st.Source, from))
		})
		if err == nil {
			h.setRelease(rel, true, nil)
			return
		}
		h.setRelease(rel, false, err)
		if h.ctx.Err() != nil {
			return
		}
		d := h.cfg.RetryBackoff.Delay(attempt)
		h.logger.Warn("releasing volume failed; retrying", "volume", name, "volume_id", st.Source, "error", err, "retry_in", d)
		pending(st, err.Error(), fmt.Sprintf("%v (retrying)", err), attempt+1, time.Now().Add(d))
		if !helper.SleepCtx(h.ctx, d) {
			return
		}
	}
}

// releasedText is the "released" event's message for a volume whose
// release started at step from. It is pure.
func releasedText(source, from string) string {
	switch from {
	case csiVolumeMounted:
		return fmt.Sprintf("Volume %q unmounted and released", source)
	case csiVolumeMounting:
		return fmt.Sprintf("Volume %q released; its mount never completed, and the node plugin confirmed it is unpublished", source)
	case csiVolumeUnmounted:
		return fmt.Sprintf("Volume %q released; it was already unpublished on this node", source)
	}
	return fmt.Sprintf("Claim on volume %q released; it was never mounted", source)
}

func (h *csiHook) setRelease(rel *csiRelease, ok bool, err error) {
	h.lock.Lock()
	defer h.lock.Unlock()
	rel.ok, rel.err = ok, err
}

// release does what is left of one volume's release, persisting each step.
// It calls pending with the reason before it waits for a node plugin that
// is not running, and released once the servers accepted the unpublish,
// before it forgets the volume.
func (h *csiHook) release(ctx context.Context, name string, st *csiVolumeState, pending func(why string), released func()) error {
	if st.needsUnmount() {
		vm, err := h.pluginForRelease(ctx, st.PluginID, pending)
		if err != nil {
			return err
		}
		ref := csimanager.VolumeRef{Namespace: st.Namespace, ID: st.Source, ExternalID: st.ExternalID}
		if err := vm.UnmountVolume(ctx, ref, h.alloc.ID, &st.Usage); err != nil {
			return err
		}
		steptrace.Mark(h.alloc.ID, steptrace.Unpublished)
		st.Step = csiVolumeUnmounted
		if err := h.saveVolume(name, st); err != nil {
			return err
		}
		crashpoint.Hit(crashpoint.CSIUnmounted)
	} else if vm, ok := h.cfg.Manager.NodePlugin(st.PluginID); ok {
		// Never mounted: remove what PrepareMount made, here too for a
		// client that crashed during the claim (the setup that failed
		// removed it already; this is idempotent).
		vm.DiscardPrepared(csimanager.VolumeRef{Namespace: st.Namespace, ID: st.Source}, h.alloc.ID, &st.Usage)
	}
	req := &structs.CSIVolumeUnpublishRequest{
		VolumeID: st.Source, AllocationID: h.alloc.ID, NodeID: h.cfg.NodeID(),
		WriteRequest: structs.WriteRequest{Namespace: st.Namespace},
	}
	var resp structs.GenericResponse
	// NotFound: the volume or the claim is gone already; nothing to report.
	if err := h.cfg.RPC(ctx, "CSIVolume.Unpublish", req, &resp); err != nil && !errors.Is(err, structs.ErrNotFound) {
		return fmt.Errorf("telling the servers volume %q is unpublished: %w", st.Source, err)
	}
	steptrace.Mark(h.alloc.ID, steptrace.ReleaseAnswered)
	released()
	return h.saveVolume(name, nil)
}

// pluginForRelease waits, up to PluginWait, for the node plugin that
// mounted a volume: after a client restart it may not be back yet.
func (h *csiHook) pluginForRelease(ctx context.Context, pluginID string, pending func(why string)) (csimanager.VolumeManager, error) {
	if vm, ok := h.cfg.Manager.NodePlugin(pluginID); ok {
		return vm, nil
	}
	pending(fmt.Sprintf("node plugin %q not running on this node; waiting up to %s for it", pluginID, h.cfg.PluginWait))
	wctx, cancel := context.WithTimeout(ctx, h.cfg.PluginWait)
	defer cancel()
	return h.cfg.Manager.WaitForNodePlugin(wctx, pluginID)
}

// Shutdown stops the release goroutines (the next client process resumes
// them from the persisted state) and waits for them, up to ctx: a plugin
// that hangs never holds up the client.
func (h *csiHook) Shutdown(ctx context.Context) {
	h.stop(ctx)
}

// Destroy stops the release goroutines and waits for them, up to ctx.
func (h *csiHook) Destroy(ctx context.Context) error {
	return h.stop(ctx)
}

func (h *csiHook) stop(ctx context.Context) error {
	// Under the lock, so that startReleases either sees the cancel or has
	// counted its goroutine already.
	h.lock.Lock()
	h.cancel()
	h.lock.Unlock()
	h.cfg.Events.forget(h.alloc.ID)
	done := make(chan struct{})
	go func() { // ends when the release goroutines do, which watch h.ctx
		h.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stopping the CSI volume releases of alloc %s: %w", h.alloc.ID, ctx.Err())
	}
}
