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
	plugins  map[string]*structs.CSIPlugin         // read once per eval (nil: none)

	// rankings order, per group and CSI shape, the candidates that may
	// take the group's allocs (see ranking); scanAll turns them off, so
	// that every placement checks every candidate.
	rankings map[string]*ranking
	scanAll  bool
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
		plugins: map[string]*structs.CSIPlugin{},

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
	p.rankings = nil // usage falls: a dropped node may fit again
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
	p.rankings = nil
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
//
// With only nil, it asks the group's ranking for the best nodes first,
// which looks at a handful of nodes instead of all; the alloc's metric
// then counts the nodes looked at, as Nomad's does. When the ranking finds
// no node, every candidate is checked, so a failed placement's metric
// names every node's reason.
func (p *placer) place(req placeRequest, only []int) (*structs.Allocation, *structs.AllocMetric, error) {
	var start time.Time
	if p.now != nil {
		start = p.now()
	}
	allocID := p.newID()
	asks, err := p.csiAsks(req.tg, req.index)
	if err != nil {
		return nil, nil, err
	}
	pl := &placement{req: req, asks: asks, allocID: allocID, ask: groupResources(req.tg), static: p.staticReasons(req.tg)}
	pl.jobWide, pl.groupWide = distinctHostsScope(p.job, req.tg)
	var c *choice
	if only == nil && !p.scanAll {
		if c, err = p.rank(pl); err != nil {
			return nil, nil, err
		}
	}
	if c == nil || c.best < 0 {
		if c, err = p.scan(pl, only); err != nil {
			return nil, nil, err
		}
	}
	if c.best < 0 {
		return nil, c.metric, nil
	}
	best := p.candidates[c.best]
	metric := c.metric
	for _, s := range c.top {
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
		Resources:         pl.ask,
		DesiredStatus:     structs.AllocDesiredStatusRun,
		ClientStatus:      structs.AllocClientStatusPending,
		RescheduleTracker: req.tracker,
	}
	if req.prev != nil {
		alloc.PreviousAllocation = req.prev.ID
	}
	claims := p.csiClaimUpdates(best.ID, asks, allocID)
	p.plan.AppendAlloc(alloc, claims)
	p.placed[best.ID] = append(p.placed[best.ID], alloc)
	p.add(p.usage[best.ID], alloc)
	p.reserve(best.ID, claims)
	p.reranked(c.best)
	return alloc, nil, nil
}

// placement is one alloc being placed, with what its checks need.
type placement struct {
	req                placeRequest
	asks               []csiAsk
	allocID            string
	ask                *structs.Resources
	jobWide, groupWide bool // distinct_hosts
	static             staticCache
}

// choice is where one placement goes: the candidate position of the best
// node (-1: none fits), the best nodes' scores, and the metric.
type choice struct {
	best   int
	top    []score
	metric *structs.AllocMetric
}

func (p *placer) newMetric() *structs.AllocMetric {
	return &structs.AllocMetric{
		NodesAvailable:     cloneCounts(p.available),
		ConstraintFiltered: map[string]int{},
		DimensionExhausted: map[string]int{},
	}
}

// verdict is what one candidate makes of one placement.
type verdict int

const (
	feasible verdict = iota
	// filteredNow: the node cannot take this placement, but may take a
	// later one of the group (its volume is claimed, its plugin is at
	// MaxVolumes, or the placement asks for other volumes).
	filteredNow
	// filteredForGood: the node can take no later placement of the group
	// in this plan either (static constraints, distinct_hosts, resources
	// exhausted: a plan's placements only add usage).
	filteredForGood
)

// check runs every check of one placement on candidate i, counting a
// failure in metric, and scores the node when it fits.
func (p *placer) check(pl *placement, i int, metric *structs.AllocMetric) (score, verdict, error) {
	node := p.candidates[i]
	metric.NodesEvaluated++
	if reason := pl.static.get(p, pl.req.tg, i); reason != "" {
		metric.NodesFiltered++
		metric.ConstraintFiltered[reason]++
		return score{}, filteredForGood, nil
	}
	u, err := p.candidateUsage(i)
	if err != nil {
		return score{}, 0, err
	}
	if (pl.jobWide && u.jobAllocs > 0) || (pl.groupWide && u.groupAllocs[pl.req.tg.Name] > 0) {
		metric.NodesFiltered++
		metric.ConstraintFiltered[filterDistinctHosts]++
		return score{}, filteredForGood, nil
	}
	reason, err := p.csiNodeReason(node, pl.asks, pl.allocID)
	if err != nil {
		return score{}, 0, err
	}
	if reason != "" {
		metric.NodesFiltered++
		metric.ConstraintFiltered[reason]++
		return score{}, filteredNow, nil
	}
	ask := pl.ask
	if dim := fits(node, u.cpu+ask.CPU, u.mem+ask.MemoryMB); dim != "" {
		metric.NodesExhausted++
		metric.DimensionExhausted[dim]++
		return score{}, filteredForGood, nil
	}
	s := score{jobAllocs: u.jobAllocs, load: load(node, u.cpu+ask.CPU, u.mem+ask.MemoryMB), id: node.ID}
	if node.ID == pl.req.avoid {
		s.avoid = 1
	}
	return s, feasible, nil
}

// scan checks every candidate at positions only (all when nil) and
// chooses the best.
func (p *placer) scan(pl *placement, only []int) (*choice, error) {
	c := &choice{best: -1, metric: p.newMetric()}
	var bestScore score
	consider := func(i int) error {
		s, v, err := p.check(pl, i, c.metric)
		if err != nil || v != feasible {
			return err
		}
		if c.best < 0 || s.less(bestScore) {
			c.best, bestScore = i, s
		}
		c.top = keepTop(c.top, s)
		return nil
	}
	if only == nil {
		for i := range p.candidates {
			if err := consider(i); err != nil {
				return nil, err
			}
		}
	} else {
		for _, i := range only {
			if err := consider(i); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
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
