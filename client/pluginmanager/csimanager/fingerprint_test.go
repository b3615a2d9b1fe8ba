package csimanager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/berth-io/berth/client/dynamicplugins"
	"github.com/berth-io/berth/client/internal/testlog"
	"github.com/berth-io/berth/client/state"
	"github.com/berth-io/berth/plugins/csi"
	"github.com/berth-io/berth/plugins/csi/fake"
	"github.com/berth-io/berth/plugins/csi/hostpath"
)

func TestPlainErr(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want string
	}{
		{name: "plain error", err: errors.New("unavailable"), want: "unavailable"},
		{name: "plugin status through the csi wrapper",
			err:  &csi.Error{RPC: "NodeGetInfo", Class: csi.Final, Attempts: 1, Err: status.Error(codes.FailedPrecondition, "hostpath: not running as root")},
			want: "FailedPrecondition: hostpath: not running as root"},
		{name: "wrapped again", err: fmt.Errorf("fingerprint: %w", status.Error(codes.Unavailable, "connection refused")),
			want: "Unavailable: connection refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.EqOp(t, tc.want, plainErr(tc.err))
		})
	}
}

// A hostpath plugin that cannot mount (the agent is not root) is managed,
// and its node instance is reported unhealthy with the plugin's own reason,
// which is what `berth plugin status` shows.
func TestManager_NodePluginThatCannotMountSaysWhy(t *testing.T) {
	sock := socketPath(t)
	ctx, cancel := context.WithCancel(context.Background())
	reason := errors.New("hostpath: not running as root (uid 1000): bind mounts need CAP_SYS_ADMIN")
	p, err := hostpath.New(ctx, hostpath.Config{
		NodeID: "node-1", Root: t.TempDir(), Mode: hostpath.ModeMonolith, Logger: testlog.Logger(t),
		CanMount: func() error { return reason },
	})
	must.NoError(t, err)
	lis, err := net.Listen("unix", sock)
	must.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- p.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		must.NoError(t, <-served)
		must.NoError(t, p.Close())
	})

	h := newManagerHarness(t, state.NewMemDB(), t.TempDir(), nil)
	h.register("hostpath", dynamicplugins.PluginTypeCSINode, sock, "plugin-alloc")
	h.register("hostpath", dynamicplugins.PluginTypeCSIController, sock, "plugin-alloc")

	node := h.updates.waitFor(t, "the node instance", func(u nodeUpdate) bool {
		return u.typ == dynamicplugins.PluginTypeCSINode && u.info != nil
	})
	must.False(t, node.info.Healthy)
	must.EqOp(t, "NodeGetInfo failed: FailedPrecondition: "+reason.Error(), node.info.HealthDescription)
	ctrl := h.updates.waitFor(t, "the controller instance", func(u nodeUpdate) bool {
		return u.typ == dynamicplugins.PluginTypeCSIController && u.info != nil
	})
	must.True(t, ctrl.info.Healthy, must.Sprintf("the controller mounts nothing: %s", ctrl.info.HealthDescription))
}

// A plugin whose task restarts as another version keeps its registration;
// the manager notices it was gone and reads its identity and capabilities
// again instead of keeping the old version's.
func TestManager_PluginBackAsAnotherVersionIsReadAgain(t *testing.T) {
	sock := socketPath(t)
	p := fake.Start(t, sock)
	h := newManagerHarness(t, state.NewMemDB(), t.TempDir(), func(c *Config) { c.FingerprintInterval = 20 * time.Millisecond })
	h.register("fakeplug", dynamicplugins.PluginTypeCSINode, sock, "plugin-alloc")
	first := h.updates.waitFor(t, "a healthy v1", func(u nodeUpdate) bool { return u.info != nil && u.info.Healthy })
	must.Eq(t, "1.0.0", first.info.ProviderVersion)
	must.True(t, first.info.RequiresControllerPlugin)
	must.True(t, first.info.NodeInfo.RequiresNodeStageVolume)

	p.Stop()
	h.updates.waitFor(t, "the plugin gone", func(u nodeUpdate) bool { return u.info != nil && !u.info.Healthy })
	p.Configure(func(s *fake.Settings) {
		s.Version = "2.0.0"
		s.PluginServices = nil // node-only now
		s.NodeCapabilities = nil
	})
	must.NoError(t, p.Listen(sock))
	again := h.updates.waitFor(t, "a healthy v2", func(u nodeUpdate) bool {
		return u.info != nil && u.info.Healthy && u.info.ProviderVersion == "2.0.0"
	})
	must.False(t, again.info.RequiresControllerPlugin)
	must.False(t, again.info.NodeInfo.RequiresNodeStageVolume)
}
