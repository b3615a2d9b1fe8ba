package hostpath

import (
	"fmt"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
)

// Name is the plugin name GetPluginInfo reports.
const Name = "hostpath.csi.berth.dev"

// Version is the plugin's vendor version.
const Version = "0.1.0"

// TopologyKey is the topology segment key naming the node, reported when
// Config.Topology is set.
const TopologyKey = Name + "/node"

// Mode selects the CSI services the plugin serves.
type Mode string

const (
	// ModeMonolith serves Identity, Controller and Node.
	ModeMonolith Mode = "monolith"
	// ModeNode serves Identity and Node.
	ModeNode Mode = "node"
	// ModeController serves Identity and Controller.
	ModeController Mode = "controller"
)

// ParseMode parses a mode name; "" means monolith.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "":
		return ModeMonolith, nil
	case ModeMonolith, ModeNode, ModeController:
		return m, nil
	}
	return "", fmt.Errorf("unknown mode %q: use monolith, node or controller", s)
}

func (m Mode) servesController() bool { return m == ModeMonolith || m == ModeController }
func (m Mode) servesNode() bool       { return m == ModeMonolith || m == ModeNode }

// Config configures a Plugin.
type Config struct {
	// Endpoint is where Run listens: "unix:///path", "unix:/path" or a bare
	// path. New ignores it.
	Endpoint string
	// NodeID is the node ID reported by NodeGetInfo; required when the
	// plugin serves the Node service.
	NodeID string
	// Root holds the state, volumes and snapshots; plugins that share a
	// root share their state.
	Root string
	Mode Mode
	// CapacityBytes, when positive, is the total capacity volumes may
	// reserve; 0 means unlimited (GetCapacity then reports the free space of
	// the file system under Root).
	CapacityBytes int64
	// MaxVolumesPerNode is reported by NodeGetInfo and enforced by
	// ControllerPublishVolume; 0 means no limit.
	MaxVolumesPerNode int64
	// Topology makes the plugin advertise VOLUME_ACCESSIBILITY_CONSTRAINTS
	// and report the segment TopologyKey=NodeID. Off by default.
	Topology bool
	// StaticVolumes lets the controller (monolith and controller modes)
	// publish a volume it did not create: one an operator registered with
	// the CO by an ID of their choosing. Its directory is created, empty,
	// on the first ControllerPublishVolume, as node mode does on the first
	// NodeStageVolume. Off by default: a CSI controller answers NotFound for
	// a volume it does not know.
	StaticVolumes bool
	// Stage makes the plugin advertise STAGE_UNSTAGE_VOLUME: NodeStage
	// bind-mounts the volume directory on the staging path and NodePublish
	// binds the staging path on the target. Off by default: for a volume
	// that is a directory, a stage adds nothing a publish does not (the
	// kubernetes-csi hostpath driver's NodeStage is a no-op), and it cost
	// the CO a plugin round trip per first mount on a node. NodeStage and
	// NodeUnstage are served either way, so a CO that staged while the
	// plugin did can still unstage after a restart without it.
	Stage bool
	// CanMount reports whether this process can make bind mounts; nil means
	// CheckMountPrivileges. When it cannot, the Node service still serves,
	// but NodeGetInfo fails with FailedPrecondition and the error's text, so
	// that the CO shows the node plugin unhealthy and why. (Probe stays
	// ready: a CO that waits for Probe would otherwise never ask the plugin
	// anything and could not say what is wrong.)
	CanMount func() error
	Logger   hclog.Logger
}

// validate checks the config and fills in defaults.
func (c *Config) validate() error {
	m, err := ParseMode(string(c.Mode))
	if err != nil {
		return err
	}
	c.Mode = m
	if c.Root == "" {
		return fmt.Errorf("root directory is required")
	}
	root, err := filepath.Abs(c.Root)
	if err != nil {
		return fmt.Errorf("resolving root directory %q: %w", c.Root, err)
	}
	c.Root = root
	if c.Mode.servesNode() && c.NodeID == "" {
		return fmt.Errorf("node ID is required in %s mode", c.Mode)
	}
	if c.CapacityBytes < 0 {
		return fmt.Errorf("capacity must not be negative, got %d", c.CapacityBytes)
	}
	if c.MaxVolumesPerNode < 0 {
		return fmt.Errorf("max volumes per node must not be negative, got %d", c.MaxVolumesPerNode)
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	return nil
}
