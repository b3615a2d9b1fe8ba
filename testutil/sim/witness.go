package sim

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi/fake"
	"github.com/berth-io/berth/plugins/drivers/mock"
)

// Check numbers the guarantees the simulator checks (package doc).
type Check int

// The checks.
const (
	CheckWriters     Check = 1 // publications at once ≤ what the access mode allows
	CheckEarlyFree   Check = 2 // no claim freed / unpublish while a task of its alloc runs
	CheckFreed       Check = 3 // terminal allocs' claims freed within the bound after healing
	CheckMounts      Check = 4 // mounts on nodes ⇔ claims of live allocs after healing
	CheckRuns        Check = 5 // every alloc that can run eventually runs
	CheckHarnessStep Check = 6 // the cluster could not be started or reached (harness)
	CheckProtocol    Check = 7 // no RPC the plugin's capabilities do not allow
	CheckStopped     Check = 8 // no task runs for an alloc the servers stopped, on a node whose client is up, after healing
)

// Violation is one broken guarantee.
type Violation struct {
	Check Check
	Msg   string
}

func (v Violation) String() string { return fmt.Sprintf("check %d: %s", v.Check, v.Msg) }

// Pub is one NodePublishVolume the witness saw succeed and not yet undone.
type Pub struct {
	Node     string
	Vol      string // external volume ID
	Alloc    string
	Target   string
	ReadOnly bool
}

// Witness watches every node's plugin: what is published where for which
// alloc, at each instant, and checks guarantees 1 and 2 as calls arrive.
type Witness struct {
	// Running reports the tasks of an alloc that run; mock.Running by
	// default (the witness of the mock driver).
	Running func(allocID string) []string
	// Profile is what the plugins advertise: an RPC outside it is a
	// violation (check 7).
	Profile Profile
	// Trace, when set (SIM_TRACE=1), sees every plugin call as a line:
	// what a violation's schedule did, call by call, to trace it.
	Trace func(format string, args ...any)

	// mu guards the fields below.
	mu         sync.Mutex
	modes      map[string]structs.CSIVolumeAccessMode // by external volume ID
	excused    map[string]string                      // volume → why (detach -force)
	pubs       map[string]Pub                         // by node + target path
	mounts     map[string]bool                        // staging and target paths in place
	attached   map[string]time.Time                   // controller-published (last ControllerPublish): external volume ID + "\x00" + external node ID
	fenced     map[string]bool                        // controller-unpublished since the last ControllerPublish: same key
	violations []Violation
	stats      Stats
	lastVolRPC time.Time // the last volume RPC (publish, stage, ...) any plugin saw
}

// NewWitness returns a witness that knows each external volume ID's
// access mode.
func NewWitness(modes map[string]structs.CSIVolumeAccessMode) *Witness {
	return &Witness{
		Running: func(a string) []string { return mock.Running(a + "/") },
		modes:   modes, excused: map[string]string{}, pubs: map[string]Pub{}, mounts: map[string]bool{}, attached: map[string]time.Time{}, fenced: map[string]bool{},
	}
}

// Excuse records that vol's guarantees 1 and 2 were lifted by the
// operator (detach -force frees claims whatever runs).
func (w *Witness) Excuse(vol, why string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.excused[vol] = why
}

// Violate records a violation found outside the witness.
func (w *Witness) Violate(c Check, format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violations = append(w.violations, Violation{Check: c, Msg: fmt.Sprintf(format, args...)})
}

// Violations returns what was found so far.
func (w *Witness) Violations() []Violation {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.violations)
}

// Stats counts what the witness saw: a schedule that published nothing
// proved nothing.
type Stats struct {
	Publishes, Unpublishes, Failed int
}

// Stats returns the counts so far.
func (w *Witness) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// attach records a ControllerPublish and checks that a single-node
// volume is attached to one node at a time (the controller is what fences
// a volume from a node that is down).
func (w *Witness) attach(vol, node string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.attached[vol+"\x00"+node] = time.Now()
	delete(w.fenced, vol+"\x00"+node)
	if _, ok := w.excused[vol]; ok || !w.modes[vol].SingleNode() {
		return
	}
	var nodes []string
	for k := range w.attached {
		if v, n, _ := strings.Cut(k, "\x00"); v == vol {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) > 1 {
		slices.Sort(nodes)
		w.violations = append(w.violations, Violation{Check: CheckWriters, Msg: fmt.Sprintf(
			"volume %s (%s) is controller-published to %d nodes at once: %v", vol, w.modes[vol], len(nodes), nodes)})
	}
}

// detach records a ControllerUnpublish: the volume is detached from the
// node, which fences it there, so whatever that node still has published
// of it no longer reaches the volume and stops counting against the
// access mode. (Publications are per node: plugin node IDs are
// "ext-<node>", see Profile.settings.)
func (w *Witness) detach(vol, extNode string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.attached, vol+"\x00"+extNode)
	w.fenced[vol+"\x00"+extNode] = true
	for k, p := range w.pubs {
		if p.Vol == vol && extNodeID(p.Node) == extNode {
			delete(w.pubs, k)
		}
	}
}

// extNodeID is the plugin's node ID of a simulated node.
func extNodeID(node string) string { return "ext-" + node }

// Attachment is a controller attachment in place: the external volume
// and node IDs, and when the last ControllerPublish of the pair
// succeeded.
type Attachment struct {
	Vol, Node string
	Since     time.Time
}

// Attached returns the controller attachments in place.
func (w *Witness) Attached() []Attachment {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Attachment
	for k, at := range w.attached {
		v, n, _ := strings.Cut(k, "\x00")
		out = append(out, Attachment{Vol: v, Node: n, Since: at})
	}
	return out
}

func (w *Witness) setMount(path string, on bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if on {
		w.mounts[path] = true
	} else {
		delete(w.mounts, path)
	}
}

// IsMountpoint answers the clients' mount point checks (client.CSIConfig)
// from what the fake plugins staged and published: the fake mounts
// nothing, so the witness is the node's mount table. Paths are unique
// across nodes (each has its own data dir).
func (w *Witness) IsMountpoint(path string) (bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mounts[path], nil
}

// LoseMounts forgets every mount and publication of node (whose paths are
// under dir), as when its plugin restarts and what it mounted dies with
// it.
func (w *Witness) LoseMounts(node, dir string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, p := range w.pubs {
		if p.Node == node {
			delete(w.pubs, k)
		}
	}
	for path := range w.mounts {
		if strings.HasPrefix(path, dir+"/") {
			delete(w.mounts, path)
		}
	}
}

// Quiet reports whether no plugin saw a volume RPC for d.
func (w *Witness) Quiet(d time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return time.Since(w.lastVolRPC) >= d
}

// Pubs returns the publications in place now.
func (w *Witness) Pubs() []Pub {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Pub, 0, len(w.pubs))
	for _, p := range w.pubs {
		out = append(out, p)
	}
	return out
}

// allocOf reads the alloc ID from a publish target path
// (.../per-alloc/<alloc>/<volume>/<usage>, DESIGN §4).
func allocOf(target string) string {
	parts := strings.Split(filepath.ToSlash(target), "/")
	for i, p := range parts {
		if p == "per-alloc" && i+1 < len(parts) {
			return parts[i+1]
		}
	}
	return ""
}

// Observer returns the fake.Plugin observer of node's plugin.
func (w *Witness) Observer(node string) func(fake.Call) {
	return func(c fake.Call) {
		if w.Trace != nil && !strings.HasPrefix(c.Method, "Probe") && !strings.HasPrefix(c.Method, "Get") {
			if c.Done {
				w.Trace("%s %s done err=%v %s", node, c.Method, c.Err, traceReq(c.Req))
			} else {
				w.Trace("%s %s begin %s", node, c.Method, traceReq(c.Req))
			}
		}
		w.mu.Lock()
		if c.Done && c.Err != nil {
			w.stats.Failed++
		}
		if strings.Contains(c.Method, "Volume") {
			w.lastVolRPC = time.Now()
		}
		if !c.Done {
			if msg := w.Profile.forbids(c); msg != "" {
				w.violations = append(w.violations, Violation{Check: CheckProtocol, Msg: fmt.Sprintf("%s on %s: %s", c.Method, node, msg)})
			}
		}
		w.mu.Unlock()
		switch req := c.Req.(type) {
		case *csipb.NodePublishVolumeRequest:
			if c.Done && c.Err == nil {
				w.published(node, req)
			}
		case *csipb.ControllerPublishVolumeRequest:
			if c.Done && c.Err == nil {
				w.attach(req.GetVolumeId(), req.GetNodeId())
			}
		case *csipb.ControllerUnpublishVolumeRequest:
			if c.Done && (c.Err == nil || status.Code(c.Err) == codes.NotFound) {
				w.detach(req.GetVolumeId(), req.GetNodeId())
			}
		case *csipb.NodeStageVolumeRequest:
			if c.Done && c.Err == nil {
				w.setMount(req.GetStagingTargetPath(), true)
			}
		case *csipb.NodeUnstageVolumeRequest:
			if c.Done && (c.Err == nil || status.Code(c.Err) == codes.NotFound) {
				w.setMount(req.GetStagingTargetPath(), false)
			}
		case *csipb.NodeUnpublishVolumeRequest:
			if !c.Done {
				w.unpublishing(node, req)
			} else if c.Err == nil || status.Code(c.Err) == codes.NotFound {
				w.mu.Lock()
				w.stats.Unpublishes++
				delete(w.pubs, node+"\x00"+req.GetTargetPath())
				delete(w.mounts, req.GetTargetPath())
				w.mu.Unlock()
			}
		}
	}
}

func (w *Witness) published(node string, req *csipb.NodePublishVolumeRequest) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := Pub{Node: node, Vol: req.GetVolumeId(), Alloc: allocOf(req.GetTargetPath()), Target: req.GetTargetPath(), ReadOnly: req.GetReadonly()}
	w.pubs[node+"\x00"+p.Target] = p
	w.mounts[p.Target] = true
	w.stats.Publishes++
	if _, ok := w.excused[p.Vol]; ok {
		return
	}
	nodes, writers := map[string]bool{}, map[string]bool{}
	var who []string
	for _, o := range w.pubs {
		if o.Vol != p.Vol {
			continue
		}
		if w.fenced[o.Vol+"\x00"+extNodeID(o.Node)] {
			// The controller detached the volume from that node (the
			// servers fenced it) and has not attached it again: a
			// publish that lands there afterwards — one in flight when
			// the node was fenced, as after a stall of seed 2875's
			// process — has no device to write to. It still counts as a
			// mount to clean up (check 4).
			continue
		}
		nodes[o.Node] = true
		if !o.ReadOnly {
			writers[o.Alloc] = true
		}
		who = append(who, fmt.Sprintf("%s/%s ro=%t", o.Node, o.Alloc, o.ReadOnly))
	}
	slices.Sort(who)
	if msg := exceeds(w.modes[p.Vol], len(nodes), len(writers)); msg != "" {
		w.violations = append(w.violations, Violation{Check: CheckWriters,
			Msg: fmt.Sprintf("volume %s (%s) %s: published as %s", p.Vol, w.modes[p.Vol], msg, strings.Join(who, ", "))})
	}
}

// exceeds says how publications on nodes by writers exceed what mode
// allows, or "".
func exceeds(mode structs.CSIVolumeAccessMode, nodes, writers int) string {
	switch mode {
	case structs.CSIVolumeAccessModeSingleNodeReader, structs.CSIVolumeAccessModeSingleNodeWriter,
		structs.CSIVolumeAccessModeSingleNodeMultiWriter:
		if nodes > 1 {
			return fmt.Sprintf("is published on %d nodes", nodes)
		}
	case structs.CSIVolumeAccessModeSingleNodeSingleWriter:
		if nodes > 1 || writers > 1 {
			return fmt.Sprintf("is published on %d nodes with %d writers", nodes, writers)
		}
	}
	switch mode {
	case structs.CSIVolumeAccessModeSingleNodeReader, structs.CSIVolumeAccessModeMultiNodeReader:
		if writers > 0 {
			return fmt.Sprintf("is read-only but has %d writers", writers)
		}
	case structs.CSIVolumeAccessModeMultiNodeSingleWriter:
		if writers > 1 {
			return fmt.Sprintf("has %d writers", writers)
		}
	}
	return ""
}

func (w *Witness) unpublishing(node string, req *csipb.NodeUnpublishVolumeRequest) {
	// The plugin knows the volume at that target by the ID it was
	// published with; another (say the CO's own volume ID) may be
	// answered NotFound, which the CO takes for "already unpublished",
	// and the mount stays (seed 28, a restored alloc's release).
	w.mu.Lock()
	if p, ok := w.pubs[node+"\x00"+req.GetTargetPath()]; ok && p.Vol != req.GetVolumeId() {
		w.violations = append(w.violations, Violation{Check: CheckProtocol, Msg: fmt.Sprintf(
			"NodeUnpublishVolume on %s of %s names volume %q, but %q is published there", node, req.GetTargetPath(), req.GetVolumeId(), p.Vol)})
	}
	w.mu.Unlock()
	alloc := allocOf(req.GetTargetPath())
	running := w.Running(alloc)
	if len(running) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.excused[req.GetVolumeId()]; ok {
		return
	}
	w.violations = append(w.violations, Violation{Check: CheckEarlyFree,
		Msg: fmt.Sprintf("NodeUnpublishVolume of volume %s on %s for alloc %s while its tasks %v run", req.GetVolumeId(), node, alloc, running)})
}

// forbids says why the CSI spec forbids a CO to make call to a plugin of
// profile p, or "".
func (p Profile) forbids(c fake.Call) string {
	switch req := c.Req.(type) {
	case *csipb.ControllerPublishVolumeRequest:
		if !p.PublishUnpublish {
			return "the controller does not advertise PUBLISH_UNPUBLISH_VOLUME"
		}
		if req.GetReadonly() && !p.PublishReadOnly {
			return "readonly=true, but the controller does not advertise PUBLISH_READONLY"
		}
	case *csipb.ControllerUnpublishVolumeRequest:
		if !p.PublishUnpublish {
			return "the controller does not advertise PUBLISH_UNPUBLISH_VOLUME"
		}
	case *csipb.NodeStageVolumeRequest, *csipb.NodeUnstageVolumeRequest:
		if !p.StageUnstage {
			return "the node plugin does not advertise STAGE_UNSTAGE_VOLUME"
		}
	}
	return ""
}

// traceReq is the part of a CSI request a trace line shows.
func traceReq(m any) string {
	switch r := m.(type) {
	case *csipb.NodePublishVolumeRequest:
		return fmt.Sprintf("vol=%s alloc=%s ro=%t", r.GetVolumeId(), allocOf(r.GetTargetPath()), r.GetReadonly())
	case *csipb.NodeUnpublishVolumeRequest:
		return fmt.Sprintf("vol=%s alloc=%s", r.GetVolumeId(), allocOf(r.GetTargetPath()))
	case *csipb.NodeStageVolumeRequest:
		return fmt.Sprintf("vol=%s", r.GetVolumeId())
	case *csipb.NodeUnstageVolumeRequest:
		return fmt.Sprintf("vol=%s", r.GetVolumeId())
	case *csipb.ControllerPublishVolumeRequest:
		return fmt.Sprintf("vol=%s node=%s ro=%t", r.GetVolumeId(), r.GetNodeId(), r.GetReadonly())
	case *csipb.ControllerUnpublishVolumeRequest:
		return fmt.Sprintf("vol=%s node=%s", r.GetVolumeId(), r.GetNodeId())
	}
	return ""
}
