package dynamicplugins

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/client/state"
)

func plugin(name, typ, alloc string) *PluginInfo {
	return &PluginInfo{Name: name, Type: typ, Version: "1.0", SocketPath: "/run/" + alloc + "/csi.sock", AllocID: alloc,
		Options: map[string]string{OptionStagePublishHostDir: "/data/client/csi/" + name}}
}

func TestRegistry_NewestRegistrationWins(t *testing.T) {
	cases := []struct {
		name  string
		steps func(r *Registry) error
		want  string // current alloc, "" for none
	}{
		{"one registration", func(r *Registry) error { return r.Register(plugin("p", PluginTypeCSINode, "a1")) }, "a1"},
		{"newest wins", func(r *Registry) error {
			return errors.Join(r.Register(plugin("p", PluginTypeCSINode, "a1")), r.Register(plugin("p", PluginTypeCSINode, "a2")))
		}, "a2"},
		{"deregistering the newest falls back to the one before", func(r *Registry) error {
			return errors.Join(r.Register(plugin("p", PluginTypeCSINode, "a1")), r.Register(plugin("p", PluginTypeCSINode, "a2")),
				r.Deregister(PluginTypeCSINode, "p", "a2"))
		}, "a1"},
		{"registering again moves a registration to the front", func(r *Registry) error {
			return errors.Join(r.Register(plugin("p", PluginTypeCSINode, "a1")), r.Register(plugin("p", PluginTypeCSINode, "a2")),
				r.Register(plugin("p", PluginTypeCSINode, "a1")))
		}, "a1"},
		{"deregistering an older one keeps the newest", func(r *Registry) error {
			return errors.Join(r.Register(plugin("p", PluginTypeCSINode, "a1")), r.Register(plugin("p", PluginTypeCSINode, "a2")),
				r.Deregister(PluginTypeCSINode, "p", "a1"))
		}, "a2"},
		{"deregistering all", func(r *Registry) error {
			return errors.Join(r.Register(plugin("p", PluginTypeCSINode, "a1")), r.Deregister(PluginTypeCSINode, "p", "a1"),
				r.Deregister(PluginTypeCSINode, "p", "never-there"))
		}, ""},
		{"types are separate", func(r *Registry) error { return r.Register(plugin("p", PluginTypeCSIController, "a1")) }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := state.NewMemDB()
			r, err := New(db, nil)
			must.NoError(t, err)
			must.NoError(t, tc.steps(r))
			check := func(r *Registry) {
				got := r.Plugin(PluginTypeCSINode, "p")
				if tc.want == "" {
					must.Nil(t, got)
					must.SliceEmpty(t, r.List(PluginTypeCSINode))
					return
				}
				must.NotNil(t, got)
				must.Eq(t, tc.want, got.AllocID)
				must.Eq(t, []*PluginInfo{got}, r.List(PluginTypeCSINode))
			}
			check(r)
			// A restarted client reads the same registry back.
			r2, err := New(db, nil)
			must.NoError(t, err)
			check(r2)
		})
	}
}

func TestRegistry_RejectsIncompleteRegistrations(t *testing.T) {
	r, err := New(nil, nil)
	must.NoError(t, err)
	p := plugin("p", PluginTypeCSINode, "a1")
	p.SocketPath = ""
	must.ErrorIs(t, r.Register(p), ErrInvalidPlugin)
}

func TestRegistry_ReturnsCopies(t *testing.T) {
	r, err := New(nil, nil)
	must.NoError(t, err)
	p := plugin("p", PluginTypeCSINode, "a1")
	must.NoError(t, r.Register(p))
	p.Options["x"] = "changed by the caller"
	got := r.Plugin(PluginTypeCSINode, "p")
	got.Options["y"] = "changed by a reader"
	must.MapNotContainsKeys(t, r.Plugin(PluginTypeCSINode, "p").Options, []string{"x", "y"})
}

func TestRegistry_WaitForPluginWakesOnRegister(t *testing.T) {
	r, err := New(nil, nil)
	must.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	got := make(chan *PluginInfo, 1)
	errc := make(chan error, 1)
	go func() {
		p, err := r.WaitForPlugin(ctx, PluginTypeCSINode, "p")
		errc <- err
		got <- p
	}()
	// Another plugin does not end the wait.
	must.NoError(t, r.Register(plugin("other", PluginTypeCSINode, "a0")))
	must.NoError(t, r.Register(plugin("p", PluginTypeCSINode, "a1")))
	must.NoError(t, <-errc)
	must.Eq(t, "a1", (<-got).AllocID)

	// Already there: returns at once.
	p, err := r.WaitForPlugin(ctx, PluginTypeCSINode, "p")
	must.NoError(t, err)
	must.Eq(t, "a1", p.AllocID)
}

func TestRegistry_WaitForPluginEndsWithContext(t *testing.T) {
	r, err := New(nil, nil)
	must.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = r.WaitForPlugin(ctx, PluginTypeCSINode, "missing")
	must.ErrorIs(t, err, ErrPluginNotFound)
	must.ErrorIs(t, err, context.Canceled)
}

func TestRegistry_SubscribeDeliversChangesUntilCancelled(t *testing.T) {
	r, err := New(nil, nil)
	must.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	events := r.Subscribe(ctx)

	must.NoError(t, r.Register(plugin("p", PluginTypeCSINode, "a1")))
	must.NoError(t, r.Deregister(PluginTypeCSINode, "p", "a1"))
	ev := <-events
	must.Eq(t, EventRegistered, ev.Type)
	must.Eq(t, "a1", ev.Plugin.AllocID)
	ev = <-events
	must.Eq(t, EventDeregistered, ev.Type)
	must.Eq(t, "p", ev.Name)

	cancel()
	for range events { // closed once the subscription is gone
	}
	// Changes after that reach nobody and block nothing.
	must.NoError(t, r.Register(plugin("p", PluginTypeCSINode, "a2")))
}

func TestRegistry_SlowSubscriberDoesNotBlockRegistrations(t *testing.T) {
	r, err := New(nil, nil)
	must.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := r.Subscribe(ctx)
	for i := 0; i < subscriberBuffer*2; i++ {
		must.NoError(t, r.Register(plugin("p", PluginTypeCSINode, "a1")))
	}
	must.Eq(t, subscriberBuffer, len(events))
}
