package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/berth-io/berth/nomad/structs"
)

// Profile is what the CSI plugin of a schedule advertises.
type Profile struct {
	// Controller: the plugin runs a controller service on every node (a
	// monolith); false is a node-only plugin.
	Controller bool
	// PublishUnpublish and PublishReadOnly are the controller's
	// PUBLISH_UNPUBLISH_VOLUME and PUBLISH_READONLY.
	PublishUnpublish bool
	PublishReadOnly  bool
	// StageUnstage is the node service's STAGE_UNSTAGE_VOLUME.
	StageUnstage bool
}

func (p Profile) String() string {
	s := "node-only"
	if p.Controller {
		s = "ctrl-nopub"
		if p.PublishUnpublish {
			s = "ctrl-pub"
		}
		if p.PublishReadOnly {
			s += "+ro"
		}
	}
	if p.StageUnstage {
		s += "+stage"
	}
	return s
}

// Volume is one registered volume of a schedule. A per_alloc volume
// family is registered as Name[0], Name[1].
type Volume struct {
	ID       string
	Mode     structs.CSIVolumeAccessMode
	PerAlloc bool
}

// Kind names an operation or a fault.
type Kind string

// The operations and faults of a schedule.
const (
	OpRunJob      Kind = "run"        // Job, Vol, ReadOnly, Batch
	OpStopJob     Kind = "stop"       // Job
	OpPurgeJob    Kind = "stop-purge" // Job
	OpDrain       Kind = "drain"      // Node
	OpIneligible  Kind = "ineligible" // Node
	OpEligible    Kind = "eligible"   // Node: also ends a drain
	OpDetach      Kind = "detach"     // Vol, Node, Force
	OpGC          Kind = "gc"
	OpWait        Kind = "wait" // Wait
	OpExitTasks   Kind = "exit-tasks"
	FaultKill     Kind = "kill-client"      // Node
	FaultRestart  Kind = "restart-client"   // Node (heals FaultKill)
	FaultNode     Kind = "node-plugin"      // Node, Method, Code / Hang
	FaultSlow     Kind = "slow-node-plugin" // Node, Method, Wait: each call takes Wait and outlives a caller that gives up
	FaultCtrl     Kind = "controller"       // Method, Code / Hang (every controller instance)
	FaultHealCSI  Kind = "heal-plugins"
	FaultLoseMnts Kind = "lose-mounts" // Node: client killed, and its plugin loses what it mounted
	FaultRestartS Kind = "restart-leader"
	// Partitions heal by themselves after Wait, while the schedule goes
	// on (and at the end at the latest, with every other fault).
	FaultCutNode   Kind = "partition-client" // Node, Wait: the client cut off from every server
	FaultCutServer Kind = "partition-server" // Node (-1: the leader), Wait: Raft cut off from the other servers
	FaultLossyRaft Kind = "lossy-raft"       // Drop (percent), Delay, Wait: Raft messages dropped and delayed
)

// Op is one step of a schedule.
type Op struct {
	Kind     Kind
	Job      int
	Vol      int
	Node     int
	ReadOnly bool
	Batch    bool
	Force    bool
	Method   string
	Code     codes.Code
	Hang     bool
	Wait     time.Duration
	Drop     int // percent
	Delay    time.Duration
}

func (o Op) String() string {
	switch o.Kind {
	case OpRunJob:
		return fmt.Sprintf("run j%d vol=%d ro=%t batch=%t", o.Job, o.Vol, o.ReadOnly, o.Batch)
	case OpStopJob, OpPurgeJob:
		return fmt.Sprintf("%s j%d", o.Kind, o.Job)
	case OpDrain, OpIneligible, OpEligible, FaultKill, FaultRestart, FaultLoseMnts:
		return fmt.Sprintf("%s n%d", o.Kind, o.Node)
	case OpDetach:
		return fmt.Sprintf("detach vol=%d n%d force=%t", o.Vol, o.Node, o.Force)
	case OpWait:
		return fmt.Sprintf("wait %s", o.Wait)
	case FaultNode:
		if o.Hang {
			return fmt.Sprintf("node-plugin n%d %s hang", o.Node, o.Method)
		}
		return fmt.Sprintf("node-plugin n%d %s %s", o.Node, o.Method, o.Code)
	case FaultSlow:
		return fmt.Sprintf("%s n%d %s %s", o.Kind, o.Node, o.Method, o.Wait)
	case FaultCutNode:
		return fmt.Sprintf("%s n%d for %s", o.Kind, o.Node, o.Wait)
	case FaultCutServer:
		if o.Node < 0 {
			return fmt.Sprintf("%s leader for %s", o.Kind, o.Wait)
		}
		return fmt.Sprintf("%s s%d for %s", o.Kind, o.Node, o.Wait)
	case FaultLossyRaft:
		return fmt.Sprintf("%s drop=%d%% delay<%s for %s", o.Kind, o.Drop, o.Delay, o.Wait)
	case FaultCtrl:
		if o.Hang {
			return fmt.Sprintf("controller %s hang", o.Method)
		}
		return fmt.Sprintf("controller %s %s", o.Method, o.Code)
	}
	return string(o.Kind)
}

// Schedule is one seeded run: a cluster, its volumes and a list of
// operations and faults. Every fault is healed after the last op.
type Schedule struct {
	Seed    uint64
	Nodes   int
	Servers int
	Profile Profile
	Volumes []Volume
	Jobs    int
	Ops     []Op
	// DisconnectDeadline is every client's promise
	// (client.Config.DisconnectDeadline); zero promises nothing.
	DisconnectDeadline time.Duration
}

func (s *Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed=%d servers=%d nodes=%d profile=%s disconnect_deadline=%s\n", s.Seed, s.Servers, s.Nodes, s.Profile, s.DisconnectDeadline)
	for i, v := range s.Volumes {
		fmt.Fprintf(&b, "  vol %d: %s %s per_alloc=%t\n", i, v.ID, v.Mode, v.PerAlloc)
	}
	for i, o := range s.Ops {
		fmt.Fprintf(&b, "  %2d %s\n", i, o)
	}
	return b.String()
}

// modes are the access modes a schedule's volumes draw from.
var modes = []structs.CSIVolumeAccessMode{
	structs.CSIVolumeAccessModeSingleNodeWriter,
	structs.CSIVolumeAccessModeSingleNodeReader,
	structs.CSIVolumeAccessModeMultiNodeReader,
	structs.CSIVolumeAccessModeMultiNodeSingleWriter,
	structs.CSIVolumeAccessModeMultiNodeMultiWriter,
}

// errorCodes are the fault codes, one of each class the claim protocol
// distinguishes (plugins/csi classifies them).
var errorCodes = []codes.Code{
	codes.Unavailable, codes.DeadlineExceeded, codes.Unimplemented,
	codes.InvalidArgument, codes.NotFound, codes.FailedPrecondition,
}

// finalCodes are the codes plugins/csi treats as final on some RPC.
func isFinal(c codes.Code) bool {
	return c == codes.Unimplemented || c == codes.InvalidArgument || c == codes.NotFound || c == codes.FailedPrecondition
}

var nodeMethods = []string{"NodePublishVolume", "NodeUnpublishVolume", "NodeStageVolume", "NodeUnstageVolume"}
var ctrlMethods = []string{"ControllerPublishVolume", "ControllerUnpublishVolume"}

// GenConfig bounds what Generate draws.
type GenConfig struct {
	Ops     int // operations and faults per schedule
	Nodes   int
	Servers int
	// Faults turns faults off (false) for the fault-free baseline.
	NoFaults bool
	// NoPartitions leaves out partitions and lossy Raft (and the
	// disconnect deadline that only they exercise).
	NoPartitions bool
	// NoSlow leaves out slow node-plugin calls (addSlow).
	NoSlow bool
}

// DefaultGen is what `make sim` and the tests generate.
var DefaultGen = GenConfig{Ops: 14, Nodes: 2, Servers: 3}

// Generate makes the schedule of seed. The same seed and config always
// give the same schedule.
func Generate(seed uint64, cfg GenConfig) *Schedule {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := &Schedule{Seed: seed, Nodes: cfg.Nodes, Servers: 1}
	// A third of the schedules run 3 servers, whose leader may be killed
	// and restarted.
	if cfg.Servers >= 3 && r.IntN(3) == 0 {
		s.Servers = 3
	}
	s.Profile.Controller = r.IntN(3) > 0
	s.Profile.PublishUnpublish = s.Profile.Controller && r.IntN(2) == 0
	s.Profile.PublishReadOnly = s.Profile.PublishUnpublish && r.IntN(2) == 0
	s.Profile.StageUnstage = r.IntN(2) == 0
	nv := 2 + r.IntN(2)
	for i := range nv {
		v := Volume{ID: fmt.Sprintf("v%d", i), Mode: modes[r.IntN(len(modes))]}
		v.PerAlloc = r.IntN(5) == 0
		s.Volumes = append(s.Volumes, v)
	}
	s.Jobs = 0
	killed := map[int]bool{}
	for range cfg.Ops {
		var o Op
		switch n := r.IntN(100); {
		case n < 24 || s.Jobs == 0:
			o = Op{Kind: OpRunJob, Job: s.Jobs, Vol: r.IntN(nv), Batch: r.IntN(4) == 0}
			o.ReadOnly = s.Volumes[o.Vol].Mode.ReadOnly() || r.IntN(4) == 0
			s.Jobs++
		case n < 34:
			o = Op{Kind: OpStopJob, Job: r.IntN(s.Jobs)}
		case n < 40:
			o = Op{Kind: OpPurgeJob, Job: r.IntN(s.Jobs)}
		case n < 45:
			o = Op{Kind: OpDrain, Node: r.IntN(cfg.Nodes)}
		case n < 48:
			o = Op{Kind: OpIneligible, Node: r.IntN(cfg.Nodes)}
		case n < 51:
			o = Op{Kind: OpEligible, Node: r.IntN(cfg.Nodes)}
		case n < 54:
			o = Op{Kind: OpDetach, Vol: r.IntN(nv), Node: r.IntN(cfg.Nodes), Force: r.IntN(3) == 0}
		case n < 57:
			o = Op{Kind: OpGC}
		case n < 60:
			o = Op{Kind: OpExitTasks}
		case n < 73 || cfg.NoFaults:
			o = Op{Kind: OpWait, Wait: time.Duration(100+r.IntN(700)) * time.Millisecond}
		case n < 80:
			node := r.IntN(cfg.Nodes)
			if killed[node] {
				o = Op{Kind: FaultRestart, Node: node}
			} else {
				o = Op{Kind: FaultKill, Node: node}
			}
			killed[node] = !killed[node]
		case n < 91:
			o = Op{Kind: FaultNode, Node: r.IntN(cfg.Nodes), Method: nodeMethods[r.IntN(len(nodeMethods))]}
			if r.IntN(5) == 0 {
				o.Hang = true
			} else {
				o.Code = errorCodes[r.IntN(len(errorCodes))]
			}
		case n < 95 && s.Profile.Controller:
			o = Op{Kind: FaultCtrl, Method: ctrlMethods[r.IntN(len(ctrlMethods))]}
			if r.IntN(5) == 0 {
				o.Hang = true
			} else {
				o.Code = errorCodes[r.IntN(len(errorCodes))]
			}
		case n < 97 && s.Servers > 1:
			o = Op{Kind: FaultRestartS}
		case n < 98:
			o = Op{Kind: FaultLoseMnts, Node: r.IntN(cfg.Nodes)}
		default:
			o = Op{Kind: FaultHealCSI}
		}
		s.Ops = append(s.Ops, o)
	}
	if !cfg.NoFaults && !cfg.NoPartitions {
		addPartitions(s, seed, cfg)
	}
	if !cfg.NoFaults && !cfg.NoSlow {
		addSlow(s, seed, cfg)
	}
	if !cfg.NoFaults {
		addCapsFaults(s, seed, cfg)
	}
	return s
}

// capsMethods are the fingerprint's calls a plugin may fail to answer:
// the servers then see an unhealthy instance whose capabilities are
// unknown, not one that lost them (seed 6719).
var capsMethods = []string{"ControllerGetCapabilities", "NodeGetCapabilities"}

// addCapsFaults makes the plugins' capability calls fail in a quarter of
// the schedules: once (Unavailable or DeadlineExceeded, one fingerprint
// pass) or until healed (a hang, each pass timing out), on every
// controller or on one node's plugin. It is drawn from a stream of its
// own, after slow calls, so that the rest of a seed's schedule is what it
// was before (seed 6719 found it only through an 8.8 s stall of the
// process that timed out every fingerprint).
func addCapsFaults(s *Schedule, seed uint64, cfg GenConfig) {
	r := rand.New(rand.NewPCG(seed^0x3c6ef372fe94f82b, seed+0xa54ff53a5f1d36f1))
	if r.IntN(4) > 0 {
		return
	}
	m := capsMethods[r.IntN(len(capsMethods))]
	if !s.Profile.Controller {
		m = "NodeGetCapabilities"
	}
	o := Op{Kind: FaultCtrl, Method: m}
	if m == "NodeGetCapabilities" {
		o = Op{Kind: FaultNode, Node: r.IntN(cfg.Nodes), Method: m}
	}
	if r.IntN(3) == 0 {
		o.Hang = true
	} else {
		o.Code = []codes.Code{codes.Unavailable, codes.DeadlineExceeded}[r.IntN(2)]
	}
	s.Ops = slices.Insert(s.Ops, r.IntN(len(s.Ops)+1), o)
}

// addSlow makes a node plugin's NodePublish or NodeStage slow in a third
// of the schedules: each call takes 0.3-1.5 s, under the clients' 2 s
// per-attempt timeout, and goes on to its end after its caller gave up
// (its alloc stopped), as a plugin that does not watch its context does;
// the mount lands late. It is drawn from a stream of its own, after
// partitions, so that the rest of a seed's schedule is what it was before
// slow calls existed.
//
// Never on a node whose client the schedule kills: the client's fence of
// a plugin call (csimanager's fenced) lives in its memory, so a call that
// outlives the client process can race the restarted client's calls on
// that volume. CSI leaves that case to the plugin (ABORTED for a second
// call in flight on a volume); DESIGN §5 states the assumption.
func addSlow(s *Schedule, seed uint64, cfg GenConfig) {
	r := rand.New(rand.NewPCG(seed^0x5bd1e9955bd1e995, seed+0x27d4eb2f165667c5))
	if r.IntN(3) > 0 {
		return
	}
	o := Op{Kind: FaultSlow, Node: r.IntN(cfg.Nodes), Method: "NodePublishVolume",
		Wait: time.Duration(300+r.IntN(1200)) * time.Millisecond}
	if slices.ContainsFunc(s.Ops, func(k Op) bool { return (k.Kind == FaultKill || k.Kind == FaultLoseMnts) && k.Node == o.Node }) {
		return
	}
	if r.IntN(2) == 0 && s.Profile.StageUnstage {
		o.Method = "NodeStageVolume"
	}
	// Before the run of a job the schedule stops later, when there is
	// one: a slow call matters most to an alloc stopped meanwhile.
	at := r.IntN(len(s.Ops) + 1)
	var runs []int
	for i, op := range s.Ops {
		if op.Kind == OpRunJob && slices.ContainsFunc(s.Ops[i:], func(k Op) bool {
			return (k.Kind == OpStopJob || k.Kind == OpPurgeJob) && k.Job == op.Job
		}) {
			runs = append(runs, i)
		}
	}
	if len(runs) > 0 {
		at = runs[r.IntN(len(runs))]
	}
	s.Ops = slices.Insert(s.Ops, at, o)
}

// partitionDeadline is the disconnect deadline of the schedules whose
// clients promise one: long enough that a client cut off keeps its allocs
// a while (the servers mark its node down after about half a second), short
// enough that one cut off longer stops them (from half the deadline on)
// and the servers free their claims within the schedule.
const partitionDeadline = 4 * time.Second

// addPartitions inserts partitions and lossy Raft into half the
// schedules, drawn from a stream of their own so that the rest of a
// seed's schedule is what it was before partitions existed.
func addPartitions(s *Schedule, seed uint64, cfg GenConfig) {
	r := rand.New(rand.NewPCG(seed^0xa5a5a5a5a5a5a5a5, seed+0x2545f4914f6cdd1d))
	if r.IntN(2) == 0 {
		return
	}
	if r.IntN(4) > 0 {
		s.DisconnectDeadline = partitionDeadline
	}
	for range 1 + r.IntN(2) {
		o := Op{Kind: FaultCutNode, Node: r.IntN(cfg.Nodes), Wait: time.Duration(500+r.IntN(4500)) * time.Millisecond}
		if s.Servers > 1 {
			switch r.IntN(3) {
			case 0:
				o = Op{Kind: FaultCutServer, Node: r.IntN(s.Servers+1) - 1, Wait: time.Duration(200+r.IntN(2000)) * time.Millisecond}
			case 1:
				o = Op{Kind: FaultLossyRaft, Drop: 5 + r.IntN(40), Delay: time.Duration(1+r.IntN(30)) * time.Millisecond,
					Wait: time.Duration(300+r.IntN(2000)) * time.Millisecond}
			}
		}
		at := r.IntN(len(s.Ops) + 1)
		s.Ops = slices.Insert(s.Ops, at, o)
	}
}

// withOps returns a copy of s with only ops.
func (s *Schedule) withOps(ops []Op) *Schedule {
	c := *s
	c.Ops = ops
	return &c
}
