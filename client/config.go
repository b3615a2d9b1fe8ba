package client

import (
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/client/allocrunner"
	"github.com/berth-io/berth/client/allocrunner/taskrunner"
	"github.com/berth-io/berth/client/dynamicplugins"
	"github.com/berth-io/berth/client/logs"
	"github.com/berth-io/berth/client/state"
	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi"
	"github.com/berth-io/berth/plugins/drivers"
)

// Config configures a Client. Zero durations take the defaults below.
type Config struct {
	// DataDir holds the client state (DataDir/client/state.db) and the
	// alloc dirs (DataDir/alloc/<id>). Empty is allowed only in DevMode:
	// the client then uses a temporary dir and removes it on Shutdown.
	DataDir string
	// Node is the template of this node: Name, Datacenter, NodeClass,
	// Meta, HTTPAddr. ID and SecretID come from the client state.
	Node *structs.Node
	// RPC reaches the servers.
	RPC RPCer
	// Drivers by name.
	Drivers map[string]drivers.Driver
	// DriverFactory builds the drivers when Drivers is nil, given the dir
	// for their state (<data_dir>/client/drivers), which survives client
	// restarts like the rest of the data dir.
	DriverFactory func(stateDir string) map[string]drivers.Driver
	Logger        hclog.Logger
	// DevMode stops every task on Shutdown.
	DevMode bool
	// NetworkIP overrides the unique.network.ip-address fingerprint.
	NetworkIP string

	// AllocHooks and TaskHooks are added to every alloc and task (CSI).
	AllocHooks []allocrunner.HookFactory
	TaskHooks  []taskrunner.HookFactory

	// AllocRunnerFactory builds the alloc runners (default
	// allocrunner.NewRunner; berth-nodesim uses allocrunner.NewMinimal).
	AllocRunnerFactory allocrunner.Factory

	// StateDB replaces the bbolt store (tests); the client closes it.
	StateDB state.DB

	// HeartbeatTTL applies until the servers return one.
	HeartbeatTTL time.Duration
	// AllocWatchWait is the blocking query's MaxQueryTime.
	AllocWatchWait time.Duration
	// UpdateBatchWindow is how long alloc status changes gather before
	// one Node.UpdateAlloc sends them all.
	UpdateBatchWindow time.Duration
	// RetryBackoff paces retries of failed RPCs.
	RetryBackoff helper.Backoff
	// ShutdownTimeout bounds Shutdown (beyond kill timeouts in DevMode).
	ShutdownTimeout time.Duration
	// FingerprintInterval is how often drivers are fingerprinted again.
	FingerprintInterval time.Duration
	// KillGrace: see taskrunner.Config.
	KillGrace time.Duration
	// DisconnectDeadline is this client's promise to the servers, sent
	// with its node (Node.DisconnectDeadline): once it has heard nothing
	// from them for this long, every alloc it ran that uses CSI volumes
	// has stopped and released them. The servers may then free the CSI
	// claims of the down node's allocs without fencing. The client keeps
	// it by stopping those allocs a little before (see disconnect.go);
	// allocs without CSI volumes keep running, as the promise is only
	// about claims and a long server outage must not take down stateless
	// work. Zero, the default here, promises nothing: allocs keep running
	// however long the servers are gone, and a down node's claims wait
	// for fencing or an operator.
	DisconnectDeadline time.Duration
	// disconnectStopsAll makes the deadline stop every alloc, for tests
	// whose fake allocs use no volumes.
	disconnectStopsAll bool
	// Logs configures task log rotation.
	Logs logs.Config
	// CSI tunes CSI plugins and volumes; zero values take the defaults of
	// allocrunner.CSIHookConfig, taskrunner.PluginSupervisorConfig and
	// csimanager.Config.
	CSI CSIConfig
}

// CSIConfig tunes the client's CSI machinery.
type CSIConfig struct {
	// PluginWait bounds how long an alloc waits for its node plugin.
	PluginWait time.Duration
	// RetryBackoff paces claim and release retries.
	RetryBackoff helper.Backoff
	// PostrunWait is how long one postrun waits for volume releases before
	// reporting them pending (the alloc runner then retries it).
	PostrunWait time.Duration
	// PluginProbeInterval is how often a healthy plugin task is probed.
	PluginProbeInterval time.Duration
	// FingerprintInterval is how often plugins are fingerprinted.
	FingerprintInterval time.Duration
	// StatsInterval is how often published volumes' usage is sampled and
	// reported (default 15s, at most 30s).
	StatsInterval time.Duration
	// IsMountpoint replaces the mount point check (tests).
	IsMountpoint func(path string) (bool, error)
	// ClientOptions configure the CSI plugin clients (timeouts, retries).
	ClientOptions []csi.Option
	// Plugins are registered at start as if plugin tasks had registered
	// them: for in-process tests (testutil/sim) whose plugins are not tasks.
	Plugins []*dynamicplugins.PluginInfo
}

// Defaults.
const (
	DefaultHeartbeatTTL        = 10 * time.Second
	DefaultAllocWatchWait      = 5 * time.Minute
	DefaultUpdateBatchWindow   = 25 * time.Millisecond
	DefaultShutdownTimeout     = 5 * time.Second
	DefaultFingerprintInterval = 30 * time.Second
)

// DefaultRetryBackoff paces RPC retries: 500ms doubling to 30s, jittered.
var DefaultRetryBackoff = helper.Backoff{Base: 500 * time.Millisecond, Max: 30 * time.Second}

func (c *Config) withDefaults() *Config {
	out := *c
	if out.Logger == nil {
		out.Logger = hclog.NewNullLogger()
	}
	if out.Node == nil {
		out.Node = &structs.Node{}
	}
	if out.HeartbeatTTL <= 0 {
		out.HeartbeatTTL = DefaultHeartbeatTTL
	}
	if out.AllocWatchWait <= 0 {
		out.AllocWatchWait = DefaultAllocWatchWait
	}
	if out.UpdateBatchWindow <= 0 {
		out.UpdateBatchWindow = DefaultUpdateBatchWindow
	}
	if out.RetryBackoff.Base <= 0 {
		out.RetryBackoff = DefaultRetryBackoff
	}
	if out.ShutdownTimeout <= 0 {
		out.ShutdownTimeout = DefaultShutdownTimeout
	}
	if out.FingerprintInterval <= 0 {
		out.FingerprintInterval = DefaultFingerprintInterval
	}
	if out.AllocRunnerFactory == nil {
		out.AllocRunnerFactory = allocrunner.NewRunner
	}
	out.DisconnectDeadline = max(out.DisconnectDeadline, 0)
	return &out
}
