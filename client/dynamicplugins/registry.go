// Package dynamicplugins is the client's registry of plugins that run as
// Berth tasks (today: CSI plugins, registered by the plugin_supervisor task
// hook). Plugins are kept by type and name; several allocs may register the
// same plugin (a plugin job being updated), and the newest registration
// wins until it is deregistered, when the one before it wins again.
//
//	plugin_supervisor ── Register / Deregister ──► Registry ──► state DB
//	                                                  │             (BucketDynamicPlugins,
//	                                                  │              reloaded by New)
//	                                                  ├─► Subscribe: change events (csimanager)
//	                                                  └─► WaitForPlugin (csi_hook)
//
// The registry is persisted so that a restarted client knows its plugins
// at once, before the plugin tasks are re-attached and probed again: allocs
// restored with it can find their node plugin (DESIGN.md §4 guarantee 4).
package dynamicplugins

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/client/state"
)

// Plugin types.
const (
	PluginTypeCSINode       = "csi-node"
	PluginTypeCSIController = "csi-controller"
)

// Option keys of a CSI plugin's PluginInfo.Options, set by the plugin
// supervisor. The client owns the staging and publish paths on the host
// (StagePublishHostDir); the plugin sees the same directory at
// StagePublishPluginDir (its stage_publish_base_dir for a plugin in its own
// mount namespace, the host path itself for one that is not).
const (
	OptionStagePublishHostDir   = "stage_publish_host_dir"
	OptionStagePublishPluginDir = "stage_publish_plugin_dir"
	// OptionProvider is the vendor name from GetPluginInfo.
	OptionProvider = "provider"
)

// Sentinel errors.
var (
	// ErrPluginNotFound: no plugin of that type and name is registered.
	ErrPluginNotFound = errors.New("plugin not registered")
	// ErrInvalidPlugin: a registration misses its name, type, socket or alloc.
	ErrInvalidPlugin = errors.New("invalid plugin registration")
)

// PluginInfo is one registration of a plugin.
type PluginInfo struct {
	// Name is the plugin's ID in jobs (csi_plugin.id).
	Name string
	// Type is PluginTypeCSINode or PluginTypeCSIController.
	Type string
	// Version is the plugin's vendor version (GetPluginInfo).
	Version string
	// SocketPath is the plugin's unix socket, as a host path.
	SocketPath string
	// AllocID is the alloc whose task serves the plugin.
	AllocID string
	// Options are type-specific (see the Option* keys).
	Options map[string]string
}

// Copy returns a deep copy.
func (p *PluginInfo) Copy() *PluginInfo {
	if p == nil {
		return nil
	}
	out := *p
	out.Options = maps.Clone(p.Options)
	return &out
}

func (p *PluginInfo) validate() error {
	switch {
	case p == nil:
		return fmt.Errorf("%w: nil", ErrInvalidPlugin)
	case p.Name == "" || p.Type == "" || p.SocketPath == "" || p.AllocID == "":
		return fmt.Errorf("%w: name %q, type %q, socket %q and alloc %q must all be set",
			ErrInvalidPlugin, p.Name, p.Type, p.SocketPath, p.AllocID)
	}
	return nil
}

// EventType says what happened to a plugin.
type EventType string

const (
	EventRegistered   EventType = "registered"
	EventDeregistered EventType = "deregistered"
)

// Event is one change of the registry.
type Event struct {
	Type       EventType
	PluginType string
	Name       string
	// Plugin is the registration that was added or removed.
	Plugin *PluginInfo
}

// subscriberBuffer is how many events wait for a slow subscriber before
// newer ones are dropped (see Subscribe).
const subscriberBuffer = 64

// Registry holds the plugins of one client. Its methods are safe for
// concurrent use.
type Registry struct {
	db     state.DB
	logger hclog.Logger

	// lock guards plugins, subs and changed. DB writes happen under it, so
	// the stored registry never lags behind or overtakes memory.
	lock sync.Mutex
	// plugins holds, by type and name, every registration, oldest first:
	// the last one is the current plugin.
	plugins map[string]map[string][]*PluginInfo
	subs    map[chan *Event]struct{}
	// changed is closed and replaced on every change (WaitForPlugin).
	changed chan struct{}
}

// New returns a registry that persists to db (nil: memory only) and holds
// what db already stored.
func New(db state.DB, logger hclog.Logger) (*Registry, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	r := &Registry{
		db:      db,
		logger:  logger.Named("dynamic_plugins"),
		plugins: map[string]map[string][]*PluginInfo{},
		subs:    map[chan *Event]struct{}{},
		changed: make(chan struct{}),
	}
	if db == nil {
		return r, nil
	}
	stored, err := db.List(state.BucketDynamicPlugins)
	if err != nil {
		return nil, fmt.Errorf("loading dynamic plugins: %w", err)
	}
	for key, raw := range stored {
		var regs []*PluginInfo
		if err := json.Unmarshal(raw, &regs); err != nil {
			// One bad entry must not hide the others; the plugin's supervisor
			// registers it again once it is healthy.
			r.logger.Error("dropping unreadable plugin registration", "key", key, "error", err)
			continue
		}
		for _, p := range regs {
			if p.validate() != nil {
				continue
			}
			r.byName(p.Type)[p.Name] = append(r.byName(p.Type)[p.Name], p)
		}
	}
	return r, nil
}

func (r *Registry) byName(typ string) map[string][]*PluginInfo {
	m, ok := r.plugins[typ]
	if !ok {
		m = map[string][]*PluginInfo{}
		r.plugins[typ] = m
	}
	return m
}

func storeKey(typ, name string) string { return typ + "/" + name }

// Register adds a registration, or replaces that of the same alloc; either
// way it becomes the current plugin of its type and name.
func (r *Registry) Register(p *PluginInfo) error {
	if err := p.validate(); err != nil {
		return err
	}
	p = p.Copy()
	r.lock.Lock()
	defer r.lock.Unlock()
	regs := slices.DeleteFunc(slices.Clone(r.byName(p.Type)[p.Name]), func(o *PluginInfo) bool { return o.AllocID == p.AllocID })
	regs = append(regs, p)
	if err := r.persistLocked(p.Type, p.Name, regs); err != nil {
		return fmt.Errorf("registering %s plugin %q of alloc %s: %w", p.Type, p.Name, p.AllocID, err)
	}
	r.byName(p.Type)[p.Name] = regs
	r.notifyLocked(&Event{Type: EventRegistered, PluginType: p.Type, Name: p.Name, Plugin: p})
	return nil
}

// Deregister removes the registration of allocID. Removing one that is not
// there is not an error.
func (r *Registry) Deregister(typ, name, allocID string) error {
	r.lock.Lock()
	defer r.lock.Unlock()
	old := r.byName(typ)[name]
	i := slices.IndexFunc(old, func(o *PluginInfo) bool { return o.AllocID == allocID })
	if i < 0 {
		return nil
	}
	gone := old[i]
	regs := slices.Delete(slices.Clone(old), i, i+1)
	if err := r.persistLocked(typ, name, regs); err != nil {
		return fmt.Errorf("deregistering %s plugin %q of alloc %s: %w", typ, name, allocID, err)
	}
	if len(regs) == 0 {
		delete(r.byName(typ), name)
	} else {
		r.byName(typ)[name] = regs
	}
	r.notifyLocked(&Event{Type: EventDeregistered, PluginType: typ, Name: name, Plugin: gone})
	return nil
}

func (r *Registry) persistLocked(typ, name string, regs []*PluginInfo) error {
	if r.db == nil {
		return nil
	}
	if len(regs) == 0 {
		return r.db.Delete(state.BucketDynamicPlugins, storeKey(typ, name))
	}
	raw, err := json.Marshal(regs)
	if err != nil {
		return err
	}
	return r.db.Put(state.BucketDynamicPlugins, storeKey(typ, name), raw)
}

// notifyLocked wakes waiters and queues ev for every subscriber. A full
// subscriber misses ev; it still has older events to read, and readers
// re-read the registry on each (see Subscribe).
func (r *Registry) notifyLocked(ev *Event) {
	close(r.changed)
	r.changed = make(chan struct{})
	for ch := range r.subs {
		select {
		case ch <- &Event{Type: ev.Type, PluginType: ev.PluginType, Name: ev.Name, Plugin: ev.Plugin.Copy()}:
		default:
			r.logger.Debug("subscriber is slow; dropping a plugin event", "plugin_id", ev.Name, "type", ev.PluginType)
		}
	}
}

// Plugin returns the current plugin of a type and name, or nil.
func (r *Registry) Plugin(typ, name string) *PluginInfo {
	r.lock.Lock()
	defer r.lock.Unlock()
	return r.currentLocked(typ, name)
}

func (r *Registry) currentLocked(typ, name string) *PluginInfo {
	regs := r.plugins[typ][name]
	if len(regs) == 0 {
		return nil
	}
	return regs[len(regs)-1].Copy()
}

// List returns the current plugin of every name of a type, by name.
func (r *Registry) List(typ string) []*PluginInfo {
	r.lock.Lock()
	defer r.lock.Unlock()
	out := make([]*PluginInfo, 0, len(r.plugins[typ]))
	for name := range r.plugins[typ] {
		out = append(out, r.currentLocked(typ, name))
	}
	slices.SortFunc(out, func(a, b *PluginInfo) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// WaitForPlugin returns the current plugin of a type and name as soon as
// there is one, or an error wrapping ErrPluginNotFound and ctx.Err() when
// ctx ends first. It waits on registry changes, never polls.
func (r *Registry) WaitForPlugin(ctx context.Context, typ, name string) (*PluginInfo, error) {
	for {
		r.lock.Lock()
		p, changed := r.currentLocked(typ, name), r.changed
		r.lock.Unlock()
		if p != nil {
			return p, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s plugin %q: %w: %w", typ, name, ErrPluginNotFound, ctx.Err())
		case <-changed:
		}
	}
}

// Subscribe returns a channel of registry changes, closed when ctx ends.
// Events are notifications: a subscriber reacts by re-reading the registry
// (Plugin, List), not by replaying events. One that falls more than a
// buffer behind misses events, but never the fact that something changed:
// it still has buffered events to read, and re-reads after them.
func (r *Registry) Subscribe(ctx context.Context) <-chan *Event {
	ch := make(chan *Event, subscriberBuffer)
	r.lock.Lock()
	r.subs[ch] = struct{}{}
	r.lock.Unlock()
	context.AfterFunc(ctx, func() {
		r.lock.Lock()
		defer r.lock.Unlock()
		delete(r.subs, ch)
		close(ch)
	})
	return ch
}
