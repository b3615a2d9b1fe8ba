package stream

import (
	"maps"
	"slices"

	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// FromChanges turns one committed write's changes into the events of its
// Raft index, in the order of the changes. Tables without events (ACLs,
// indexes) are skipped: ACL objects carry secrets and are not Nomad
// stream topics Berth serves.
func FromChanges(index uint64, changes memdb.Changes) Batch {
	b := Batch{Index: index}
	add := func(e Event) {
		e.Index = index
		b.Events = append(b.Events, e)
	}
	instances := changedInstances(changes)
	for _, ch := range changes {
		switch ch.Table {
		case state.TableJobs:
			if j, ok := after[*structs.Job](ch); ok {
				add(Event{Topic: TopicJob, Type: TypeJobRegistered, Key: j.ID, Namespace: j.Namespace, Payload: j})
			} else if j, ok := before[*structs.Job](ch); ok {
				add(Event{Topic: TopicJob, Type: TypeJobDeregistered, Key: j.ID, Namespace: j.Namespace, Payload: j})
			}
		case state.TableAllocs:
			if a, ok := after[*structs.Allocation](ch); ok {
				add(Event{Topic: TopicAllocation, Type: TypeAllocationUpdated, Key: a.ID, Namespace: a.Namespace,
					FilterKeys: []string{a.JobID, a.NodeID}, Payload: a})
			} else if a, ok := before[*structs.Allocation](ch); ok {
				add(Event{Topic: TopicAllocation, Type: TypeAllocationDeleted, Key: a.ID, Namespace: a.Namespace,
					FilterKeys: []string{a.JobID, a.NodeID}, Payload: a})
			}
		case state.TableEvals:
			if e, ok := after[*structs.Evaluation](ch); ok {
				add(Event{Topic: TopicEvaluation, Type: TypeEvaluationUpdated, Key: e.ID, Namespace: e.Namespace,
					FilterKeys: []string{e.JobID}, Payload: e})
			} else if e, ok := before[*structs.Evaluation](ch); ok {
				add(Event{Topic: TopicEvaluation, Type: TypeEvaluationDeleted, Key: e.ID, Namespace: e.Namespace,
					FilterKeys: []string{e.JobID}, Payload: e})
			}
		case state.TableNodes:
			n, ok := after[*structs.Node](ch)
			old, hadOld := before[*structs.Node](ch)
			switch {
			case !ok && hadOld:
				add(Event{Topic: TopicNode, Type: TypeNodeDeregistration, Key: old.ID, Payload: old})
			case ok && !hadOld:
				add(Event{Topic: TopicNode, Type: TypeNodeRegistration, Key: n.ID, Payload: n})
			case ok:
				typ := TypeNodeEvent
				if (old.DrainStrategy == nil) != (n.DrainStrategy == nil) {
					typ = TypeNodeDrain
				} else if old.SchedulingEligibility != n.SchedulingEligibility {
					typ = TypeNodeEligibility
				}
				add(Event{Topic: TopicNode, Type: typ, Key: n.ID, Payload: n})
			}
		case state.TableCSIPlugins:
			if p, ok := after[*structs.CSIPlugin](ch); ok {
				add(Event{Topic: TopicCSIPlugin, Type: TypeCSIPluginUpdated, Key: p.ID, Payload: withInstances(p, instances[p.ID])})
			} else if p, ok := before[*structs.CSIPlugin](ch); ok {
				add(Event{Topic: TopicCSIPlugin, Type: TypeCSIPluginDeregistered, Key: p.ID, Payload: p})
			}
		case state.TableCSIVolumes:
			v, ok := after[*structs.CSIVolume](ch)
			old, hadOld := before[*structs.CSIVolume](ch)
			switch {
			case !ok && hadOld:
				add(Event{Topic: TopicCSIVolume, Type: TypeCSIVolumeDeregistered, Key: old.ID, Namespace: old.Namespace,
					FilterKeys: []string{old.PluginID}, Payload: old})
			case ok:
				claims := claimEvents(old, v)
				typ := TypeCSIVolumeRegistered
				if hadOld && len(claims) > 0 {
					typ = TypeCSIVolumeClaim
				}
				add(Event{Topic: TopicCSIVolume, Type: typ, Key: v.ID, Namespace: v.Namespace,
					FilterKeys: []string{v.PluginID}, Payload: v})
				for _, c := range claims {
					add(Event{Topic: TopicClaim, Type: TypeClaimTransition, Key: v.ID, Namespace: v.Namespace,
						FilterKeys: []string{c.AllocID, c.NodeID, c.JobID, v.PluginID}, Payload: c})
				}
			}
		}
	}
	return b
}

// changedInstances collects the plugin instance rows written (not
// removed) at this index, by plugin ID.
func changedInstances(changes memdb.Changes) map[string][]*structs.CSIPluginInstance {
	var out map[string][]*structs.CSIPluginInstance
	for _, ch := range changes {
		if ch.Table != state.TableCSIPluginInstances {
			continue
		}
		if in, ok := after[*structs.CSIPluginInstance](ch); ok {
			if out == nil {
				out = map[string][]*structs.CSIPluginInstance{}
			}
			out[in.PluginID] = append(out[in.PluginID], in)
		}
	}
	return out
}

// withInstances is the payload of a CSIPlugin event: the plugin's counts
// and flags, and in its Controllers and Nodes the instances this write
// set (not every node's: the store keeps them apart, and filling in
// every one would make each node write cost as many as there are nodes).
// An instance this write removed is in neither map.
func withInstances(p *structs.CSIPlugin, changed []*structs.CSIPluginInstance) *structs.CSIPlugin {
	if len(changed) == 0 {
		return p
	}
	out := *p
	for _, in := range changed {
		if in.Controller != nil {
			if out.Controllers == nil {
				out.Controllers = map[string]*structs.CSIInfo{}
			}
			out.Controllers[in.NodeID] = in.Controller
		}
		if in.Node != nil {
			if out.Nodes == nil {
				out.Nodes = map[string]*structs.CSIInfo{}
			}
			out.Nodes[in.NodeID] = in.Node
		}
	}
	return &out
}

func after[T any](ch memdb.Change) (T, bool) {
	v, ok := ch.After.(T)
	return v, ok && ch.After != nil
}

func before[T any](ch memdb.Change) (T, bool) {
	v, ok := ch.Before.(T)
	return v, ok && ch.Before != nil
}

// claimEvents are the claim transitions between two versions of a volume
// (old nil: a new volume), sorted by alloc ID: each live claim whose step,
// error or attempts changed, and each claim that moved to the past claims
// (freed) in this write.
func claimEvents(old, v *structs.CSIVolume) []*Claim {
	var out []*Claim
	prev := func(allocID string) *structs.CSIVolumeClaim {
		if old == nil {
			return nil
		}
		return old.Claims[allocID]
	}
	mk := func(c, p *structs.CSIVolumeClaim) *Claim {
		e := &Claim{VolumeID: v.ID, Namespace: v.Namespace, PluginID: v.PluginID, AllocID: c.AllocID,
			NodeID: c.NodeID, JobID: c.JobID, To: c.Step, Error: c.LastError, Attempts: c.Attempts,
			Reason: c.ReleaseReason, Time: c.ModifyTime}
		if p != nil {
			e.From = p.Step
		}
		return e
	}
	for _, id := range slices.Sorted(maps.Keys(v.Claims)) {
		c, p := v.Claims[id], prev(id)
		if p != nil && p.Step == c.Step && p.LastError == c.LastError && p.Attempts == c.Attempts {
			continue
		}
		out = append(out, mk(c, p))
	}
	// Freed in this write: live before, gone now, and newly in PastClaims.
	if old != nil {
		for _, c := range v.PastClaims {
			if p := old.Claims[c.AllocID]; p != nil && v.Claims[c.AllocID] == nil {
				out = append(out, mk(c, p))
			}
		}
	}
	return out
}
