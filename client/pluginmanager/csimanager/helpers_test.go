package csimanager

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/client/dynamicplugins"
	"github.com/berth-io/berth/client/internal/testlog"
	"github.com/berth-io/berth/client/state"
	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi"
	"github.com/berth-io/berth/testutil"
)

// socketPath returns a socket path short enough for any test name.
func socketPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "csim")
	must.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "csi.sock")
}

// fastCSI makes plugin clients give up quickly, so failures show at once.
var fastCSI = []csi.Option{
	csi.WithMaxAttempts(2),
	csi.WithBackoff(csi.ExponentialBackoff(5*time.Millisecond, 20*time.Millisecond, nil)),
	csi.WithTimeouts(csi.Timeouts{Probe: 2 * time.Second, Fingerprint: 2 * time.Second, Call: 5 * time.Second}),
}

// nodeUpdates records what the manager told the node.
type nodeUpdates struct {
	// lock guards list.
	lock sync.Mutex
	list []nodeUpdate
}

type nodeUpdate struct {
	typ, id string
	info    *structs.CSIInfo
}

func (u *nodeUpdates) record(typ, id string, info *structs.CSIInfo) {
	u.lock.Lock()
	defer u.lock.Unlock()
	u.list = append(u.list, nodeUpdate{typ, id, info})
}

func (u *nodeUpdates) all() []nodeUpdate {
	u.lock.Lock()
	defer u.lock.Unlock()
	return append([]nodeUpdate(nil), u.list...)
}

// waitFor waits for an update matching ok and returns it.
func (u *nodeUpdates) waitFor(t *testing.T, what string, ok func(nodeUpdate) bool) nodeUpdate {
	t.Helper()
	var got nodeUpdate
	testutil.WaitForResult(t, func() (bool, error) {
		for _, x := range u.all() {
			if ok(x) {
				got = x
				return true, nil
			}
		}
		return false, fmt.Errorf("no update with %s among %d", what, len(u.all()))
	})
	return got
}

// fakeMounts plays the mount table for tests with the fake plugin, which
// mounts nothing.
type fakeMounts struct {
	// lock guards paths.
	lock  sync.Mutex
	paths map[string]bool
}

func newFakeMounts() *fakeMounts { return &fakeMounts{paths: map[string]bool{}} }

func (f *fakeMounts) IsMountpoint(p string) (bool, error) {
	f.lock.Lock()
	defer f.lock.Unlock()
	return f.paths[p], nil
}

func (f *fakeMounts) set(p string, mounted bool) {
	f.lock.Lock()
	defer f.lock.Unlock()
	f.paths[p] = mounted
}

// managerHarness is one client process's CSI manager; a second harness on
// the same DB and root is the client after a restart.
type managerHarness struct {
	t        *testing.T
	db       state.DB
	root     string
	registry *dynamicplugins.Registry
	mgr      *Manager
	updates  *nodeUpdates
	cancel   context.CancelFunc
	done     chan struct{}
}

func newManagerHarness(t *testing.T, db state.DB, root string, tweak func(*Config)) *managerHarness {
	t.Helper()
	reg, err := dynamicplugins.New(db, testlog.Logger(t))
	must.NoError(t, err)
	h := &managerHarness{t: t, db: db, root: root, registry: reg, updates: &nodeUpdates{}, done: make(chan struct{})}
	cfg := Config{
		Registry: reg, DB: db, Root: root, Logger: testlog.Logger(t), UpdateNode: h.updates.record,
		FingerprintInterval: time.Hour, FingerprintBackoff: helper.Backoff{Base: 10 * time.Millisecond, Max: 50 * time.Millisecond},
		CSIOptions: fastCSI,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	h.mgr, err = New(cfg)
	must.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		defer close(h.done)
		h.mgr.Run(ctx)
	}()
	t.Cleanup(h.stop)
	return h
}

// stop ends Run and waits for it.
func (h *managerHarness) stop() {
	h.cancel()
	<-h.done
}

func (h *managerHarness) register(name, typ, socket, allocID string) {
	h.t.Helper()
	must.NoError(h.t, h.registry.Register(&dynamicplugins.PluginInfo{Name: name, Type: typ, SocketPath: socket, AllocID: allocID}))
}

func (h *managerHarness) nodePlugin(id string) VolumeManager {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	vm, err := h.mgr.WaitForNodePlugin(ctx, id)
	must.NoError(h.t, err)
	return vm
}

func testVolume(id string) *structs.CSIVolume {
	return &structs.CSIVolume{
		ID: id, Namespace: "default", PluginID: "fakeplug", ExternalID: "ext-" + id,
		Secrets: structs.CSISecrets{"token": "s3cret"}, Context: map[string]string{"k": "v"},
	}
}

var rwUsage = &UsageOptions{AccessMode: structs.CSIVolumeAccessModeMultiNodeMultiWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}

func alloc(id string) *structs.Allocation { return &structs.Allocation{ID: id, Namespace: "default"} }
