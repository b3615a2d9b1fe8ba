package csiendpoint

import (
	"context"
	"fmt"
	"net/rpc"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/client/pluginmanager/csimanager"
	"github.com/berth-io/berth/plugins/csi"
)

// CallTimeout bounds one plugin call made for the servers; the servers'
// own timeout does not cross the session.
const CallTimeout = 2 * time.Minute

// Plugins finds this node's CSI plugins; *csimanager.Manager is one.
type Plugins interface {
	// ControllerClient returns the controller plugin's client, or an error
	// naming why it cannot be used here.
	ControllerClient(pluginID string) (csi.Client, error)
	// NodePlugin returns the node plugin's volume manager, if it runs here
	// and is ready.
	NodePlugin(pluginID string) (csimanager.VolumeManager, bool)
}

// Config is what the endpoints need of the client.
type Config struct {
	// NodeID names this node in errors.
	NodeID  string
	Plugins Plugins
	// TasksRunning reports whether this client runs allocID and not every
	// task of it has exited (its tasks may still use its volumes).
	TasksRunning func(allocID string) bool
	Logger       hclog.Logger
}

// session is what both endpoints hold: the node session's ctx, which
// bounds their plugin calls, and the client's Config.
type session struct {
	ctx context.Context
	cfg Config
}

// callCtx is the ctx of one plugin call.
func (s session) callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.ctx, CallTimeout)
}

// Register adds the CSIController and CSINode endpoints to srv. Their
// plugin calls run under ctx, the session's lifetime.
func Register(ctx context.Context, srv *rpc.Server, cfg Config) error {
	if err := srv.RegisterName("CSIController", NewController(ctx, cfg)); err != nil {
		return fmt.Errorf("registering CSIController: %w", err)
	}
	if err := srv.RegisterName("CSINode", NewNode(ctx, cfg)); err != nil {
		return fmt.Errorf("registering CSINode: %w", err)
	}
	return nil
}
