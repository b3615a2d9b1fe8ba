package scheduler

import (
	"slices"
	"strings"

	"github.com/berth-io/berth/nomad/structs"
)

// Reasons a node is filtered, as keys of AllocMetric.ConstraintFiltered.
const (
	filterMissingDrivers = "missing drivers"
	// filterDriverMounts: a task mounts a volume with a driver that
	// cannot mount volumes into tasks on the node (raw_exec).
	filterDriverMounts  = "driver cannot mount volumes (use exec)"
	filterDistinctHosts = "distinct_hosts"
)

// Resource dimensions, as keys of AllocMetric.DimensionExhausted.
const (
	dimensionCPU    = "cpu"
	dimensionMemory = "memory"
)

// dcMatches reports whether datacenter dc matches one of the job's
// datacenters, each of which may hold "*" wildcards ("*" alone matches
// every datacenter, "us-*" every one starting "us-").
func dcMatches(patterns []string, dc string) bool {
	for _, p := range patterns {
		if globMatch(p, dc) {
			return true
		}
	}
	return false
}

// globMatch matches s against pattern, where "*" matches any run of
// characters (including none) and everything else matches itself.
func globMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, part := range parts[1 : len(parts)-1] {
		i := strings.Index(s, part)
		if i < 0 {
			return false
		}
		s = s[i+len(part):]
	}
	return strings.HasSuffix(s, last)
}

// schedulable reports whether node may receive new allocs at all: ready,
// eligible and not draining.
func schedulable(node *structs.Node) bool {
	return node != nil && node.Ready()
}

// candidateNodes returns the nodes new allocs of job may go to — ready,
// eligible, not draining, in one of its datacenters — sorted by ID, and
// how many there are per datacenter (AllocMetric.NodesAvailable).
func candidateNodes(job *structs.Job, nodes map[string]*structs.Node) ([]*structs.Node, map[string]int) {
	var out []*structs.Node
	available := map[string]int{}
	for _, n := range nodes {
		if !schedulable(n) || !dcMatches(job.Datacenters, n.Datacenter) {
			continue
		}
		out = append(out, n)
		available[n.Datacenter]++
	}
	slices.SortFunc(out, func(a, b *structs.Node) int { return strings.Compare(a.ID, b.ID) })
	return out, available
}

// staticInfeasible says why tg of job cannot run on node whatever else is
// placed there (drivers, constraints), or "" when it can. Job and group
// constraints are checked before task constraints; the first failure
// wins.
func staticInfeasible(job *structs.Job, tg *structs.TaskGroup, node *structs.Node, res regexpCache) string {
	for _, t := range tg.Tasks {
		d := node.Drivers[t.Driver]
		if d == nil || !d.Detected || !d.Healthy {
			return filterMissingDrivers
		}
		if len(t.VolumeMounts) > 0 && d.MountConfig == structs.MountConfigSupportNone {
			return filterDriverMounts
		}
	}
	for _, cs := range [][]*structs.Constraint{job.Constraints, tg.Constraints} {
		for _, c := range cs {
			if !meetsConstraint(c, node, res) {
				return constraintKey(c)
			}
		}
	}
	for _, t := range tg.Tasks {
		for _, c := range t.Constraints {
			if !meetsConstraint(c, node, res) {
				return constraintKey(c)
			}
		}
	}
	return ""
}

// groupResources is what one alloc of tg reserves: the sum of its tasks'
// resources. A task without resources asks for nothing.
func groupResources(tg *structs.TaskGroup) *structs.Resources {
	out := &structs.Resources{}
	for _, t := range tg.Tasks {
		if t.Resources != nil {
			out.CPU += t.Resources.CPU
			out.MemoryMB += t.Resources.MemoryMB
		}
	}
	return out
}
