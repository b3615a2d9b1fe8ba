package scheduler

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berth-io/berth/nomad/structs"
)

// placer builds one plan for one job: it applies stops and updates, and
// places new allocs on the best feasible node, keeping a proposed view of
// every node's usage and every volume's claims as the plan grows, so each
// placement sees the ones before it.
type placer struct {
	st    State
	eval  *structs.Evaluation
	job   *structs.Job
	plan  *structs.Plan
	newID func() string
	// now, when set, times each placement (AllocMetric.AllocationTime).
	now func() time.Time

	// candidates are the nodes new allocs may go to (sorted by ID), with
	// their position in candIndex and the count per datacenter.
	candidates []*structs.Node
	candIndex  map[string]int
	available  map[string]int

	res    regexpCache
	static map[string]staticCache // by group

	usage   map[string]*nodeUsage            // node → proposed usage, computed on first use
	candUse []*nodeUsage                     // the same, by candidate position
	stopped map[string]bool                  // alloc IDs the plan stops
	updated map[string]*structs.Allocation   // alloc ID → its new version in the plan
	placed  map[string][]*structs.Allocation // node → new allocs in the plan

	vols     map[volKey]*structs.CSIVolume         // proposed volumes (nil: not found)
	ownVols  map[volKey]bool                       // vols entries that are this plan's copies
	nodeVols map[string]map[string]map[volKey]bool // node → plugin → volumes with a claim there
}

type volKey struct{ ns, id string }

// nodeUsage is what a node has committed, as proposed by the plan so far.
type nodeUsage struct {
	cpu, mem    int64
	jobAllocs   int            // live allocs of the job being planned
	groupAllocs map[string]int // of those, per group
}

func newPlacer(st State, eval *structs.Evaluation, job *structs.Job, nodes map[string]*structs.Node, newID func() string) *placer {
	p := &placer{
		st:      st,
		eval:    eval,
		job:     job,
		newID:   newID,
		plan:    &structs.Plan{EvalID: eval.ID, Priority: eval.Priority, Job: job},
		res:     regexpCache{},
		static:  map[string]staticCache{},
		usage:   map[string]*nodeUsage{},
		stopped: map[string]bool{},
		updated: map[string]*structs.Allocation{},
		placed:  map[string][]*structs.Allocation{},
		vols:    map[volKey]*structs.CSIVolume{},
		ownVols: map[volKey]bool{},

		nodeVols: map[string]map[string]map[volKey]bool{},
	}
	if job != nil {
		p.candidates, p.available = candidateNodes(job, nodes)
	}
	p.candUse = make([]*nodeUsage, len(p.candidates))
	p.candIndex = make(map[string]int, len(p.candidates))
	for i, n := range p.candidates {
		p.candIndex[n.ID] = i
	}
	return p
}

// stop adds a stop of a to the plan.
func (p *placer) stop(a *structs.Allocation, desc, clientStatus string) {
	if p.stopped[a.ID] {
		return
	}
	p.plan.AppendStop(a.NodeID, &structs.AllocStopUpdate{
		AllocID:            a.ID,
		DesiredStatus:      structs.AllocDesiredStatusStop,
		DesiredDescription: desc,
		ClientStatus:       clientStatus,
	})
	if u := p.usage[a.NodeID]; u != nil {
		if upd := p.updated[a.ID]; upd != nil {
			p.sub(u, upd)
		} else if !a.TerminalStatus() {
			p.sub(u, a)
		}
	}
	p.stopped[a.ID] = true
}

// update adds a new version of an existing alloc to the plan.
func (p *placer) update(old, updated *structs.Allocation) {
	p.plan.AppendAlloc(updated, nil)
	if u := p.usage[old.NodeID]; u != nil {
		if !old.TerminalStatus() {
			p.sub(u, old)
		}
		if !updated.TerminalStatus() {
			p.add(u, updated)
		}
	}
	p.updated[old.ID] = updated
}

// nodeUsage returns the proposed usage of a node, reading it on first use.
func (p *placer) nodeUsage(nodeID string) (*nodeUsage, error) {
	if u := p.usage[nodeID]; u != nil {
		return u, nil
	}
	allocs, err := p.st.AllocsByNode(nil, nodeID)
	if err != nil {
		return nil, fmt.Errorf("reading allocs of node %s: %w", nodeID, err)
	}
	u := &nodeUsage{groupAllocs: map[string]int{}}
	for _, a := range allocs {
		if p.stopped[a.ID] {
			continue
		}
		if upd := p.updated[a.ID]; upd != nil {
			a = upd
		}
		if !a.TerminalStatus() {
			p.add(u, a)
		}
	}
	for _, a := range p.placed[nodeID] {
		p.add(u, a)
	}
	p.usage[nodeID] = u
	return u, nil
}

func (p *placer) add(u *nodeUsage, a *structs.Allocation) { p.account(u, a, 1) }
func (p *placer) sub(u *nodeUsage, a *structs.Allocation) { p.account(u, a, -1) }

func (p *placer) account(u *nodeUsage, a *structs.Allocation, sign int) {
	if r := a.Resources; r != nil {
		u.cpu += int64(sign) * r.CPU
		u.mem += int64(sign) * r.MemoryMB
	}
	if p.job != nil && a.JobID == p.job.ID && a.Namespace == p.job.Namespace {
		u.jobAllocs += sign
		u.groupAllocs[a.TaskGroup] += sign
	}
}

// staticReason returns why tg cannot run on candidate i ("" if it can),
// computing it once per eval.
func (p *placer) staticReason(tg *structs.TaskGroup, i int) string {
	return p.staticReasons(tg).get(p, tg, i)
}

// staticCache holds, per candidate, nil (unchecked), "" (feasible) or why
// not, for one group.
type staticCache []*string

func (p *placer) staticReasons(tg *structs.TaskGroup) staticCache {
	cache := p.static[tg.Name]
	if cache == nil {
		cache = make(staticCache, len(p.candidates))
		p.static[tg.Name] = cache
	}
	return cache
}

func (c staticCache) get(p *placer, tg *structs.TaskGroup, i int) string {
	if c[i] == nil {
		r := staticInfeasible(p.job, tg, p.candidates[i], p.res)
		c[i] = &r
	}
	return *c[i]
}

// candidateUsage is nodeUsage for candidate i.
func (p *placer) candidateUsage(i int) (*nodeUsage, error) {
	if u := p.candUse[i]; u != nil {
		return u, nil
	}
	u, err := p.nodeUsage(p.candidates[i].ID)
	if err != nil {
		return nil, err
	}
	p.candUse[i] = u
	return u, nil
}

// fitsInPlace reports whether alloc a, on its node, can take version
// p.job of its group: the node is still a candidate, the group's drivers
// and constraints still hold there, and its new resources fit.
func (p *placer) fitsInPlace(a *structs.Allocation, tg *structs.TaskGroup) (bool, error) {
	i, ok := p.candIndex[a.NodeID]
	if !ok || p.staticReason(tg, i) != "" {
		return false, nil
	}
	u, err := p.nodeUsage(a.NodeID)
	if err != nil {
		return false, err
	}
	ask := groupResources(tg)
	var cpu, mem int64
	if r := a.Resources; r != nil {
		cpu, mem = r.CPU, r.MemoryMB
	}
	return fits(p.candidates[i], u.cpu-cpu+ask.CPU, u.mem-mem+ask.MemoryMB) == "", nil
}

// fits says which dimension a node would exceed at usage cpu/mem, or "".
func fits(node *structs.Node, cpu, mem int64) string {
	var capCPU, capMem int64
	if r := node.NodeResources; r != nil {
		capCPU, capMem = r.CPU, r.MemoryMB
	}
	switch {
	case cpu > capCPU:
		return dimensionCPU
	case mem > capMem:
		return dimensionMemory
	}
	return ""
}

// placeRequest is one alloc to place.
type placeRequest struct {
	tg    *structs.TaskGroup
	name  string
	index int
	// prev is the alloc this one replaces; tracker its reschedule history.
	prev    *structs.Allocation
	tracker *structs.RescheduleTracker
	// avoid is a node to use only when no other fits (the node a failed
	// alloc ran on).
	avoid string
}

// score orders feasible nodes: lower is better.
type score struct {
	avoid     int
	jobAllocs int
	load      float64
	id        string
}

func (a score) less(b score) bool {
	if a.avoid != b.avoid {
		return a.avoid < b.avoid
	}
	if a.jobAllocs != b.jobAllocs {
		return a.jobAllocs < b.jobAllocs
	}
	if a.load != b.load {
		return a.load < b.load
	}
	return a.id < b.id
}

// place puts one alloc on the best feasible node among the candidates at
// positions only (all candidates when only is nil) and adds it to the
// plan. It returns the alloc, or nil and the metric explaining why no node
// fits.
func (p *placer) place(req placeRequest, only []int) (*structs.Allocation, *structs.AllocMetric, error) {
	var start time.Time
	if p.now != nil {
		start = p.now()
	}
	metric := &structs.AllocMetric{
		NodesAvailable:     cloneCounts(p.available),
		ConstraintFiltered: map[string]int{},
		DimensionExhausted: map[string]int{},
	}
	var top []score // the best feasible nodes, best first
	ask := groupResources(req.tg)
	allocID := p.newID()
	jobWide, groupWide := distinctHostsScope(p.job, req.tg)

	var (
		best       *structs.Node
		bestScore  score
		bestClaims []*structs.CSIVolumeClaimUpdate
	)
	static := p.staticReasons(req.tg)
	consider := func(i int) error {
		node := p.candidates[i]
		metric.NodesEvaluated++
		if reason := static.get(p, req.tg, i); reason != "" {
			metric.NodesFiltered++
			metric.ConstraintFiltered[reason]++
			return nil
		}
		u, err := p.candidateUsage(i)
		if err != nil {
			return err
		}
		if (jobWide && u.jobAllocs > 0) || (groupWide && u.groupAllocs[req.tg.Name] > 0) {
			metric.NodesFiltered++
			metric.ConstraintFiltered[filterDistinctHosts]++
			return nil
		}
		claims, reason, err := p.csiClaims(node, req.tg, req.index, allocID)
		if err != nil {
			return err
		}
		if reason != "" {
			metric.NodesFiltered++
			metric.ConstraintFiltered[reason]++
			return nil
		}
		if dim := fits(node, u.cpu+ask.CPU, u.mem+ask.MemoryMB); dim != "" {
			metric.NodesExhausted++
			metric.DimensionExhausted[dim]++
			return nil
		}
		s := score{jobAllocs: u.jobAllocs, load: load(node, u.cpu+ask.CPU, u.mem+ask.MemoryMB), id: node.ID}
		if node.ID == req.avoid {
			s.avoid = 1
		}
		if best == nil || s.less(bestScore) {
			best, bestScore, bestClaims = node, s, claims
		}
		top = keepTop(top, s)
		return nil
	}
	if only == nil {
		for i := range p.candidates {
			if err := consider(i); err != nil {
				return nil, nil, err
			}
		}
	} else {
		for _, i := range only {
			if err := consider(i); err != nil {
				return nil, nil, err
			}
		}
	}
	if best == nil {
		return nil, metric, nil
	}

	for _, s := range top {
		metric.ScoreMetaData = append(metric.ScoreMetaData, s.meta())
	}
	if p.now != nil {
		metric.AllocationTime = p.now().Sub(start)
	}
	alloc := &structs.Allocation{
		Metrics:           trimMetric(metric),
		ID:                allocID,
		Namespace:         p.job.Namespace,
		EvalID:            p.eval.ID,
		Name:              req.name,
		NodeID:            best.ID,
		NodeName:          best.Name,
		JobID:             p.job.ID,
		Job:               p.job,
		TaskGroup:         req.tg.Name,
		Resources:         ask,
		DesiredStatus:     structs.AllocDesiredStatusRun,
		ClientStatus:      structs.AllocClientStatusPending,
		RescheduleTracker: req.tracker,
	}
	if req.prev != nil {
		alloc.PreviousAllocation = req.prev.ID
	}
	p.plan.AppendAlloc(alloc, bestClaims)
	p.placed[best.ID] = append(p.placed[best.ID], alloc)
	p.add(p.usage[best.ID], alloc)
	p.reserve(best.ID, bestClaims)
	return alloc, nil, nil
}

// keepTop inserts s into top, which stays sorted best first and at most
// structs.MaxScoreMetaData long.
func keepTop(top []score, s score) []score {
	i := sort.Search(len(top), func(i int) bool { return s.less(top[i]) })
	if i >= structs.MaxScoreMetaData {
		return top
	}
	top = slices.Insert(top, i, s)
	if len(top) > structs.MaxScoreMetaData {
		top = top[:structs.MaxScoreMetaData]
	}
	return top
}

// meta is the score as Nomad's API shows one: its parts, and a whole in
// which higher is better and that orders nodes as less does. The parts
// are ordered lexicographically, so each weighs more than every later
// one can (load is below 2: placement refuses a node it would overfill).
func (s score) meta() *structs.NodeScoreMeta {
	return &structs.NodeScoreMeta{
		NodeID: s.id,
		Scores: map[string]float64{
			"avoid-previous-node": -float64(s.avoid),
			"job-anti-affinity":   -float64(s.jobAllocs),
			"load":                -s.load,
		},
		NormScore: -(float64(s.avoid)*1e6 + float64(s.jobAllocs)*2 + s.load),
	}
}

// load is how full a node would be: the sum of its CPU and memory
// fractions in use.
func load(node *structs.Node, cpu, mem int64) float64 {
	var l float64
	if r := node.NodeResources; r != nil {
		if r.CPU > 0 {
			l += float64(cpu) / float64(r.CPU)
		}
		if r.MemoryMB > 0 {
			l += float64(mem) / float64(r.MemoryMB)
		}
	}
	return l
}

func cloneCounts(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// mergeMetric folds the metric of another failed placement of the same
// group into m: counted once (CoalescedFailures), but every distinct
// reason is kept, so per_alloc volume messages all show.
func mergeMetric(m, other *structs.AllocMetric) {
	m.CoalescedFailures++
	for k := range other.ConstraintFiltered {
		if _, ok := m.ConstraintFiltered[k]; !ok {
			m.ConstraintFiltered[k] = other.ConstraintFiltered[k]
		}
	}
	for k := range other.DimensionExhausted {
		if _, ok := m.DimensionExhausted[k]; !ok {
			m.DimensionExhausted[k] = other.DimensionExhausted[k]
		}
	}
}

// trimMetric drops empty maps so stored evals stay small.
func trimMetric(m *structs.AllocMetric) *structs.AllocMetric {
	if len(m.ConstraintFiltered) == 0 {
		m.ConstraintFiltered = nil
	}
	if len(m.DimensionExhausted) == 0 {
		m.DimensionExhausted = nil
	}
	return m
}

// allocName is "job.group[index]".
func allocName(jobID, group string, index int) string {
	var b strings.Builder
	b.Grow(len(jobID) + len(group) + 8)
	b.WriteString(jobID)
	b.WriteByte('.')
	b.WriteString(group)
	b.WriteByte('[')
	b.WriteString(strconv.Itoa(index))
	b.WriteByte(']')
	return b.String()
}
