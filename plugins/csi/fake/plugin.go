// Package fake is a scriptable CSI plugin: a real gRPC server with the
// Identity, Controller and Node services, listening on a unix socket. Tests
// of anything that talks to CSI plugins (plugins/csi, csimanager, the
// csi_hook, the server's volume endpoints) run against it.
//
// It keeps no volume state: every RPC succeeds with a plausible answer built
// from Settings and the request, unless a test has scripted otherwise:
//
//	p := fake.Start(t, filepath.Join(t.TempDir(), "csi.sock"))
//	p.Configure(func(s *fake.Settings) { s.NodeID = "node-1" })
//	p.NextErr("NodePublishVolume", codes.Unavailable, codes.Unavailable) // then OK
//	p.SetHang("NodeUnpublishVolume", true) // block until the caller gives up
//	p.SetSlow("NodePublishVolume", time.Second) // answer late, even to a caller that gave up
//	... code under test ...
//	p.Calls("NodePublishVolume")                                               // 3
//	p.LastRequest("NodePublishVolume").(*csipb.NodePublishVolumeRequest)
//
// Methods are named by their gRPC wire names ("NodePublishVolume",
// "CreateVolume", "GetPluginInfo"); an unknown name panics, so a typo cannot
// make a test pass silently. All methods are safe for concurrent use.
package fake

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Plugin is a fake CSI plugin. Create it with New or Start.
type Plugin struct {
	csipb.UnimplementedIdentityServer
	csipb.UnimplementedControllerServer
	csipb.UnimplementedNodeServer

	// mu guards every field below.
	mu        sync.Mutex
	settings  Settings
	nextErrs  map[string][]codes.Code
	hang      map[string]bool
	slow      map[string]time.Duration
	responses map[string]proto.Message
	calls     map[string]int
	last      map[string]proto.Message
	observer  func(Call)
	changed   chan struct{} // closed and replaced whenever calls change
	server    *grpc.Server  // nil when not serving
	stopping  chan struct{} // closed by Stop to release hung calls
	served    chan struct{} // closed when the Serve goroutine returns
}

// New returns a plugin with DefaultSettings that is not yet serving.
func New() *Plugin {
	return &Plugin{
		settings:  DefaultSettings(),
		nextErrs:  map[string][]codes.Code{},
		hang:      map[string]bool{},
		slow:      map[string]time.Duration{},
		responses: map[string]proto.Message{},
		calls:     map[string]int{},
		last:      map[string]proto.Message{},
		changed:   make(chan struct{}),
	}
}

// Start returns a plugin serving on socketPath; it stops when tb's test
// ends. It fails the test if it cannot listen.
func Start(tb testing.TB, socketPath string) *Plugin {
	tb.Helper()
	p := New()
	if err := p.Listen(socketPath); err != nil {
		tb.Fatalf("starting fake csi plugin: %v", err)
	}
	tb.Cleanup(p.Stop)
	return p
}

// Listen starts serving on a unix socket at socketPath, replacing a stale
// socket file there. It returns once the socket accepts connections; the
// goroutine serving it belongs to p and ends in Stop. A stopped plugin may
// Listen again: scripts, settings and counters are kept, as when a real
// plugin restarts (well, almost: a real one forgets).
func (p *Plugin) Listen(socketPath string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.server != nil {
		return errors.New("fake csi plugin is already serving")
	}
	if err := os.Remove(socketPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing stale socket %q: %w", socketPath, err)
	}
	lis, err := net.Listen("unix", socketPath)
	if err != nil {
		return fmt.Errorf("listening on %q: %w", socketPath, err)
	}
	return p.serveLocked(lis)
}

// Serve serves the plugin on lis instead of a unix socket (berth-nodesim
// serves thousands in one process over in-memory listeners, which cost no
// file descriptors); otherwise as Listen. Stop closes lis.
func (p *Plugin) Serve(lis net.Listener) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.server != nil {
		return errors.New("fake csi plugin is already serving")
	}
	return p.serveLocked(lis)
}

func (p *Plugin) serveLocked(lis net.Listener) error {
	// WaitForHandlers makes Stop wait for running handlers, so no handler
	// outlives the plugin.
	srv := grpc.NewServer(grpc.WaitForHandlers(true))
	csipb.RegisterIdentityServer(srv, p)
	csipb.RegisterControllerServer(srv, p)
	csipb.RegisterNodeServer(srv, p)
	p.server = srv
	p.stopping = make(chan struct{})
	p.served = make(chan struct{})
	go func(served chan struct{}) {
		defer close(served)
		_ = srv.Serve(lis) // returns when Stop closes the listener
	}(p.served)
	return nil
}

// Stop stops serving: hung calls return Unavailable, open connections
// close, the socket file is removed. It waits for everything Listen
// started. Stopping a plugin that is not serving does nothing.
func (p *Plugin) Stop() {
	p.mu.Lock()
	srv, stopping, served := p.server, p.stopping, p.served
	p.server = nil
	p.mu.Unlock()
	if srv == nil {
		return
	}
	close(stopping)
	srv.Stop() // closes the listener, which removes the socket file
	<-served
}

// Configure changes the plugin's settings under its lock.
func (p *Plugin) Configure(f func(*Settings)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&p.settings)
}

// NextErr queues errors for method: each of its next len(codes) calls fails
// with the next code (codes.OK lets that call succeed). Calls succeed again
// when the queue is empty. Successive NextErr calls append.
func (p *Plugin) NextErr(method string, cs ...codes.Code) {
	mustKnow(method)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nextErrs[method] = append(p.nextErrs[method], cs...)
}

// SetHang makes every call of method block until its caller gives up or the
// plugin stops (hang true), or answer normally again (hang false). A hung
// call is counted and recorded before it blocks.
func (p *Plugin) SetHang(method string, hang bool) {
	mustKnow(method)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hang[method] = hang
}

// SetSlow makes every call of method take d before the plugin answers it
// (0: answer at once again), and go on to its end even when its caller
// gives up meanwhile: a plugin that does not watch its call's context,
// whose NodeStage or NodePublish lands after the CO stopped waiting. The
// call is counted and recorded when it arrives; an observer sees it done
// after d, with its normal outcome (a scripted NextErr included). A
// stopping plugin ends it with Unavailable.
func (p *Plugin) SetSlow(method string, d time.Duration) {
	mustKnow(method)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.slow[method] = d
}

// ClearFaults drops every queued NextErr, SetHang and SetSlow: the plugin
// answers normally again (a fault healed). Slow calls already under way
// finish as they began.
func (p *Plugin) ClearFaults() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.nextErrs)
	clear(p.hang)
	clear(p.slow)
}

// SetResponse makes method answer with a copy of resp (which must be the
// method's response type, e.g. *csipb.NodeGetInfoResponse) instead of the
// default answer; nil restores the default.
func (p *Plugin) SetResponse(method string, resp proto.Message) {
	mustKnow(method)
	p.mu.Lock()
	defer p.mu.Unlock()
	if resp == nil {
		delete(p.responses, method)
		return
	}
	p.responses[method] = proto.Clone(resp)
}

// Calls returns how many times method was called, failed calls included.
func (p *Plugin) Calls(method string) int {
	mustKnow(method)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[method]
}

// LastRequest returns a copy of the last request method received (e.g. a
// *csipb.NodePublishVolumeRequest), or nil if it was never called.
func (p *Plugin) LastRequest(method string) proto.Message {
	mustKnow(method)
	p.mu.Lock()
	defer p.mu.Unlock()
	if m, ok := p.last[method]; ok {
		return proto.Clone(m)
	}
	return nil
}

// WaitForCalls blocks until method has been called at least n times, or
// returns ctx.Err().
func (p *Plugin) WaitForCalls(ctx context.Context, method string, n int) error {
	mustKnow(method)
	for {
		p.mu.Lock()
		calls, changed := p.calls[method], p.changed
		p.mu.Unlock()
		if calls >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// Call is one RPC as an observer sees it: once when it arrives (Done
// false), once when its outcome is decided (Done true, Err nil when the
// plugin answers normally).
type Call struct {
	Method string
	Req    proto.Message
	Done   bool
	Err    error
}

// SetObserver makes f see every call (see Call), synchronously and
// outside the plugin's lock: a witness of what the plugin was asked and
// did, for checkers (testutil/sim). nil removes it.
func (p *Plugin) SetObserver(f func(Call)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.observer = f
}

func (p *Plugin) observe(c Call) {
	p.mu.Lock()
	f := p.observer
	p.mu.Unlock()
	if f != nil {
		f(c)
	}
}

// begin records a call and applies the scripts for method: it returns the
// error the call must fail with, or nil to answer normally, and whether
// the call was slowed (SetSlow: it goes on past its caller's context). A
// hung call leaves the NextErr queue alone.
func (p *Plugin) begin(ctx context.Context, method string, req proto.Message) (outlives bool, err error) {
	p.mu.Lock()
	p.calls[method]++
	p.last[method] = proto.Clone(req)
	close(p.changed)
	p.changed = make(chan struct{})
	if p.hang[method] {
		stopping := p.stopping
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return false, status.FromContextError(ctx.Err()).Err()
		case <-stopping:
			return false, status.Error(codes.Unavailable, "fake csi plugin stopping")
		}
	}
	if d := p.slow[method]; d > 0 {
		stopping := p.stopping
		p.mu.Unlock()
		// Not the caller's ctx: the point is a call that outlives it.
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-stopping:
			t.Stop()
			return false, status.Error(codes.Unavailable, "fake csi plugin stopping")
		}
		p.mu.Lock()
		outlives = true
	}
	code := codes.OK
	if q := p.nextErrs[method]; len(q) > 0 {
		code, p.nextErrs[method] = q[0], q[1:]
	}
	p.mu.Unlock()

	if code != codes.OK {
		return outlives, status.Errorf(code, "fake csi plugin: scripted %s for %s", code, method)
	}
	return outlives, nil
}

// reply returns the response set with SetResponse for method, or def.
func reply[T proto.Message](p *Plugin, method string, def T) (T, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.responses[method]; ok {
		if t, ok := proto.Clone(r).(T); ok {
			return t, nil
		}
		var zero T
		return zero, status.Errorf(codes.Internal, "fake csi plugin: response set for %s is a %T, not a %T", method, r, def)
	}
	return def, nil
}

// settingsCopy returns the settings under the lock.
func (p *Plugin) settingsCopy() Settings {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.settings.clone()
}

// knownMethods are the RPCs the fake serves, by wire name.
var knownMethods = func() map[string]bool {
	m := map[string]bool{}
	for _, desc := range []grpc.ServiceDesc{csipb.Identity_ServiceDesc, csipb.Controller_ServiceDesc, csipb.Node_ServiceDesc} {
		for _, md := range desc.Methods {
			m[md.MethodName] = true
		}
	}
	return m
}()

func mustKnow(method string) {
	if !knownMethods[method] {
		panic(fmt.Sprintf("fake csi plugin: unknown method %q (use the gRPC name, e.g. \"NodePublishVolume\")", method))
	}
}
