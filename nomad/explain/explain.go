// Package explain says in plain words why a job cannot get a CSI volume,
// or why a release has not finished, and the exact next action
// (`berth volume explain`, GET /v1/volume/csi/:id/explain). It never
// decides anything itself: each claim's story is what nomad/claims' Next
// (and, for what an operator may do, Detach) says the servers will do, so
// the explanation cannot disagree with them.
package explain

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/berth-io/berth/nomad/claims"
	"github.com/berth-io/berth/nomad/structs"
)

// Input is what the servers hold about one volume.
type Input struct {
	Volume *structs.CSIVolume
	// Plugin is the volume's plugin, nil when no node runs it.
	Plugin *structs.CSIPlugin
	// Allocs and Nodes are the claims' allocs and nodes by ID, as in
	// state; missing ones are gone.
	Allocs map[string]*structs.Allocation
	Nodes  map[string]*structs.Node
	// PluginJobs maps a plugin alloc ID to its job ID, to name the job
	// to check when the plugin's instances are unhealthy.
	PluginJobs map[string]string
	// DefaultDisconnect is the servers' default disconnect deadline
	// (claims.WithDeadline).
	DefaultDisconnect time.Duration
	// NodeDetachGrace is the servers' wait for a client's own unpublish
	// (zero: claims.DefaultNodeDetachGrace).
	NodeDetachGrace time.Duration
	Now             time.Time
}

// Finding is one reason, about the volume or one of its claims.
type Finding struct {
	AllocID string `json:",omitempty"`
	NodeID  string `json:",omitempty"`
	Step    structs.CSIClaimStep
	// Kind: "in-use", "releasing", "waiting", "needs-operator",
	// "plugin", "volume".
	Kind string
	// Why is the situation in words; Action the exact next step for the
	// operator ("" when there is nothing to do but wait).
	Why    string
	Action string `json:",omitempty"`
}

// Explanation is the answer for one volume.
type Explanation struct {
	VolumeID  string
	Namespace string
	// Summary is one line: free, held, releasing, or stuck.
	Summary  string
	Findings []Finding
}

// Explain explains in.Volume.
func Explain(in Input) Explanation {
	v := in.Volume
	out := Explanation{VolumeID: v.ID, Namespace: v.Namespace}
	out.Findings = append(out.Findings, volumeFindings(in)...)
	prof := claims.ProfileOf(in.Plugin, true)
	var held, releasing, stuck int
	for _, c := range v.LiveClaims() {
		f := claimFinding(in, c, prof)
		switch f.Kind {
		case "in-use":
			held++
		case "needs-operator":
			stuck++
		case "waiting":
			if f.Action != "" {
				stuck++
			} else {
				releasing++
			}
		default:
			releasing++
		}
		out.Findings = append(out.Findings, f)
	}
	switch {
	case stuck > 0:
		out.Summary = fmt.Sprintf("volume %s has %d claim(s) that need an operator; see the actions below", v.ID, stuck)
	case held > 0 && single(v):
		out.Summary = fmt.Sprintf("volume %s is %s and held by %d claim(s): another writer waits until they are freed", v.ID, v.AccessMode, held)
	case releasing > 0:
		out.Summary = fmt.Sprintf("volume %s is being released (%d claim(s)); nothing to do but wait", v.ID, releasing)
	case held > 0:
		out.Summary = fmt.Sprintf("volume %s is in use by %d claim(s)", v.ID, held)
	default:
		out.Summary = fmt.Sprintf("volume %s has no live claims", v.ID)
	}
	if blocked := volumeLevel(out.Findings); blocked != nil {
		out.Summary += "; it cannot be claimed now: " + blocked.Why
	} else if len(v.Claims) == 0 {
		out.Summary += "; a job can claim it"
	}
	return out
}

// volumeLevel is the first finding about the volume or its plugin, which
// keeps any new claim from being placed, or nil.
func volumeLevel(fs []Finding) *Finding {
	for i := range fs {
		if fs[i].Kind == "plugin" || fs[i].Kind == "volume" {
			return &fs[i]
		}
	}
	return nil
}

func single(v *structs.CSIVolume) bool {
	switch v.AccessMode {
	case structs.CSIVolumeAccessModeSingleNodeWriter, structs.CSIVolumeAccessModeSingleNodeSingleWriter,
		structs.CSIVolumeAccessModeMultiNodeSingleWriter:
		return true
	}
	return false
}

// volumeFindings are the reasons no new claim can be placed, whatever the
// claims: the volume's own state and its plugin's health.
func volumeFindings(in Input) []Finding {
	v, p := in.Volume, in.Plugin
	var out []Finding
	if v.State != "" && v.State != structs.CSIVolumeStateReady {
		out = append(out, Finding{Kind: "volume", Why: fmt.Sprintf("volume %s is %s", v.ID, v.State),
			Action: fmt.Sprintf("wait for `berth volume %s` to finish, or run it again with the same spec to resume it",
				strings.TrimSuffix(string(v.State), "ing")+"e")})
	}
	if p == nil {
		return append(out, Finding{Kind: "plugin", Why: fmt.Sprintf("plugin %s is not running on any node", v.PluginID),
			Action: fmt.Sprintf("run the job of plugin %s (`berth plugin status` lists the plugins that are)", v.PluginID)})
	}
	if claims.ControllerNeeded(p) && p.ControllersHealthy == 0 {
		out = append(out, Finding{Kind: "plugin",
			Why:    fmt.Sprintf("controller plugin %s has 0 healthy instances (of %d expected)", p.ID, p.ControllersExpected),
			Action: "check " + jobsOf(in, p.Controllers, "its controller job")})
	}
	if p.NodesHealthy == 0 {
		out = append(out, Finding{Kind: "plugin",
			Why:    fmt.Sprintf("node plugin %s has 0 healthy instances (of %d expected): no node can mount the volume", p.ID, p.NodesExpected),
			Action: "check " + jobsOf(in, p.Nodes, "its node job")})
	}
	return out
}

// jobsOf names the jobs of a plugin's instances, e.g. "job `ebs-controller`".
func jobsOf(in Input, infos map[string]*structs.CSIInfo, fallback string) string {
	var jobs []string
	for _, info := range infos {
		if j := in.PluginJobs[info.AllocID]; j != "" && !slices.Contains(jobs, j) {
			jobs = append(jobs, j)
		}
	}
	slices.Sort(jobs)
	if len(jobs) == 0 {
		return fallback
	}
	return "job `" + strings.Join(jobs, "`, `") + "`"
}

// claimFinding is one live claim's story: what claims.Next says happens
// next, and what an operator can do about it (claims.Detach).
func claimFinding(in Input, c *structs.CSIVolumeClaim, prof claims.Profile) Finding {
	v := in.Volume
	alloc := in.Allocs[c.AllocID]
	node := in.Nodes[c.NodeID]
	if node != nil {
		node = claims.WithDeadline(node, in.DefaultDisconnect)
	}
	act := claims.Next(v, c, alloc, node, prof, in.NodeDetachGrace, in.Now)
	f := Finding{AllocID: c.AllocID, NodeID: c.NodeID, Step: c.Step}
	short, nodeShort := shortID(c.AllocID), shortID(c.NodeID)

	if c.Step == structs.CSIClaimNeedsOperator {
		f.Kind = "needs-operator"
		f.Why = fmt.Sprintf("claim of alloc %s stopped at needs-operator: step %s failed: %s", short, c.BlockedStep, c.LastError)
		d := claims.Detach(v, c, alloc, node, prof, false, in.NodeDetachGrace, in.Now)
		switch {
		case d.Kind == claims.DetachBlocked:
			f.Action = d.Reason
		case c.Unsupported:
			f.Action = fmt.Sprintf("the plugin does not implement that step: `berth volume detach %s %s` skips it and frees the claim", v.ID, c.NodeID)
		default:
			f.Action = fmt.Sprintf("fix what the error says in plugin %s, then `berth volume detach %s %s` retries the step", v.PluginID, v.ID, c.NodeID)
		}
		return f
	}

	switch act.Kind {
	case claims.None:
		f.Kind = "in-use"
		if c.Step == structs.CSIClaimReserved {
			f.Why = fmt.Sprintf("reserved for alloc %s on node %s, which has not claimed the volume yet", short, nodeShort)
			f.Action = "wait: its client claims the volume when the alloc starts; stop the job to give the volume up"
			return f
		}
		job := c.JobID
		if alloc != nil {
			job = alloc.JobID
		}
		f.Why = fmt.Sprintf("alloc %s is still running on node %s", short, nodeShort)
		f.Action = fmt.Sprintf("stop it (`berth job stop %s`), or wait; release will follow", job)
	case claims.Wait:
		f.Kind = "waiting"
		f.Why = act.Reason
		if node != nil && node.Status == structs.NodeStatusDown {
			if node.DisconnectDeadline <= 0 || node.StatusUpdatedAt == 0 {
				f.Why = fmt.Sprintf("node %s is down and promised no disconnect deadline; alloc %s's claim waits for it", nodeShort, short)
				if claims.Detach(v, c, alloc, node, prof, true, in.NodeDetachGrace, in.Now).Kind != claims.DetachBlocked {
					f.Action = fmt.Sprintf("`berth volume detach -force %s %s` after you confirm the node is fenced (powered off or cut from the storage)", v.ID, c.NodeID)
				}
			} else {
				f.Why = fmt.Sprintf("node %s is down; alloc %s's claim is freed when its disconnect deadline passes at %s",
					nodeShort, short, act.At.UTC().Format(time.RFC3339))
			}
		}
	case claims.RetryAfter:
		f.Kind = "releasing"
		f.Why = act.Reason
		if c.LastError != "" {
			f.Why = fmt.Sprintf("release of alloc %s's claim failed %d time(s) (last: %s); retrying at %s",
				short, c.Attempts, c.LastError, act.At.UTC().Format(time.RFC3339))
		}
		if p := in.Plugin; p != nil && prof.ControllerPublish && p.ControllersHealthy == 0 {
			f.Action = fmt.Sprintf("controller plugin %s has 0 healthy instances — check %s", p.ID, jobsOf(in, p.Controllers, "its controller job"))
		}
	default: // the servers are releasing it now
		f.Kind = "releasing"
		f.Why = act.Reason
		if p := in.Plugin; act.Kind == claims.ControllerUnpublish && p != nil && p.ControllersHealthy == 0 {
			f.Action = fmt.Sprintf("controller plugin %s has 0 healthy instances — check %s", p.ID, jobsOf(in, p.Controllers, "its controller job"))
		}
	}
	return f
}

func shortID(id string) string {
	if len(id) > 8 && strings.Count(id, "-") == 4 {
		return id[:8]
	}
	return id
}

// Text renders an explanation for a terminal.
func (e Explanation) Text() string {
	var b strings.Builder
	b.WriteString(e.Summary + "\n")
	for _, f := range e.Findings {
		b.WriteString("\n- " + f.Why + "\n")
		if f.Action != "" {
			b.WriteString("  next: " + f.Action + "\n")
		}
	}
	return b.String()
}
