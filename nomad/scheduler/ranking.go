package scheduler

import (
	"container/heap"
	"strings"

	"github.com/berth-io/berth/nomad/structs"
)

// A ranking keeps, for one group and one CSI shape (the plugins, access
// modes and topologies its volumes ask for), the candidates that could
// take its allocs in a heap ordered by score, best first. A placement pops
// nodes until it has found structs.MaxScoreMetaData that fit (the best of
// them wins; the rest are the alloc's score metadata), and pushes back
// those that may fit a later placement. So a placement looks at a few
// nodes, not all of them: placing 10,000 per_alloc claims over 5,000 nodes
// was 50 million node checks, and is now tens of thousands.
//
// It chooses what a scan of every candidate would (TestRanking_SameAsScan):
//   - Nodes outside the ranking could never take the shape: static
//     constraints fail, or a volume's plugin is missing, unhealthy or
//     lacks the access mode's capability there, or the node is outside
//     the volume's topology. These depend on the node and the shape only.
//   - A node popped and filtered for good (static, distinct_hosts,
//     resources exhausted) is dropped: a plan's placements only add usage,
//     and a stop or update made afterwards discards every ranking.
//   - Every other node popped goes back, and the node a placement chose
//     is moved to its new score.
//   - Unpopped nodes score worse than each of the nodes found, so none of
//     them could be the best or among the best shown.
type ranking struct {
	ask   *structs.Resources
	items []ranked
	pos   []int // candidate position → index in items, -1 when absent
}

type ranked struct {
	i int   // candidate position
	s score // without avoid: that is per placement
}

func (r *ranking) Len() int           { return len(r.items) }
func (r *ranking) Less(a, b int) bool { return r.items[a].s.less(r.items[b].s) }
func (r *ranking) Swap(a, b int) {
	r.items[a], r.items[b] = r.items[b], r.items[a]
	r.pos[r.items[a].i] = a
	r.pos[r.items[b].i] = b
}
func (r *ranking) Push(x any) {
	it := x.(ranked)
	r.pos[it.i] = len(r.items)
	r.items = append(r.items, it)
}
func (r *ranking) Pop() any {
	it := r.items[len(r.items)-1]
	r.items = r.items[:len(r.items)-1]
	r.pos[it.i] = -1
	return it
}

// rankKey names a group's CSI shape for asks: the plugin, access mode and
// topologies of each volume, which are all csiNodeServes reads.
func rankKey(tg *structs.TaskGroup, asks []csiAsk) string {
	var b strings.Builder
	b.WriteString(tg.Name)
	for _, a := range asks {
		b.WriteByte(0)
		b.WriteString(a.vol.PluginID)
		b.WriteByte(0)
		b.WriteString(string(a.req.AccessMode))
		for _, t := range a.vol.Topologies {
			b.WriteByte(0)
			b.WriteString(t.String())
		}
	}
	return b.String()
}

// baseScore is candidate i's score for a placement asking ask, without
// avoid. Its usage must have been read.
func (p *placer) baseScore(i int, ask *structs.Resources) score {
	node, u := p.candidates[i], p.candUse[i]
	return score{jobAllocs: u.jobAllocs, load: load(node, u.cpu+ask.CPU, u.mem+ask.MemoryMB), id: node.ID}
}

// maxRankings bounds the rankings of one plan. Each costs a pass over the
// candidates and memory per candidate, which pays off when its shape is
// placed again and again; when volumes are each pinned to their own
// topology (a node-local driver), every placement is a new shape, and a
// scan costs the same without keeping anything.
const maxRankings = 32

// ranking returns the ranking of req's group and asks' shape, building it
// on first use: one pass over the candidates per group and shape. It
// returns nil when the plan already has maxRankings others.
func (p *placer) ranking(req placeRequest, asks []csiAsk) (*ranking, error) {
	key := rankKey(req.tg, asks)
	if r := p.rankings[key]; r != nil {
		return r, nil
	}
	if len(p.rankings) >= maxRankings {
		return nil, nil
	}
	r := &ranking{ask: groupResources(req.tg), pos: make([]int, len(p.candidates))}
	static := p.staticReasons(req.tg)
	for i, node := range p.candidates {
		r.pos[i] = -1
		if static.get(p, req.tg, i) != "" || !csiNodeServes(node, asks) {
			continue
		}
		if _, err := p.candidateUsage(i); err != nil {
			return nil, err
		}
		r.pos[i] = len(r.items)
		r.items = append(r.items, ranked{i: i, s: p.baseScore(i, r.ask)})
	}
	heap.Init(r)
	if p.rankings == nil {
		p.rankings = map[string]*ranking{}
	}
	p.rankings[key] = r
	return r, nil
}

// rank chooses a node for req from its ranking. It returns nil when asks
// rule out every node (the caller scans, for the metric) or there is no
// ranking for it, and a choice with best -1 when no ranked node fits.
func (p *placer) rank(pl *placement) (*choice, error) {
	for _, a := range pl.asks {
		if a.why != "" {
			return nil, nil
		}
	}
	r, err := p.ranking(pl.req, pl.asks)
	if err != nil || r == nil {
		return nil, err
	}
	c := &choice{best: -1, metric: p.newMetric()}
	var bestScore score
	var back []ranked
	defer func() {
		for _, it := range back {
			heap.Push(r, it)
		}
	}()
	for found := 0; r.Len() > 0 && found < structs.MaxScoreMetaData; {
		it := heap.Pop(r).(ranked)
		s, v, err := p.check(pl, it.i, c.metric)
		if err != nil {
			back = append(back, it)
			return nil, err
		}
		switch v {
		case filteredForGood:
			continue
		case filteredNow:
			back = append(back, it)
			continue
		}
		back = append(back, it)
		if c.best < 0 || s.less(bestScore) {
			c.best, bestScore = it.i, s
		}
		c.top = keepTop(c.top, s)
		if s.avoid == 0 {
			found++
		}
	}
	return c, nil
}

// reranked moves candidate i, whose usage a placement just changed, to
// its new place in every ranking.
func (p *placer) reranked(i int) {
	for _, r := range p.rankings {
		if at := r.pos[i]; at >= 0 {
			r.items[at].s = p.baseScore(i, r.ask)
			heap.Fix(r, at)
		}
	}
}
