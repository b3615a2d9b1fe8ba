package acl

import (
	"slices"
	"strings"
)

// level orders the coarse node/agent/operator/plugin dispositions. deny is
// kept apart: it wins over any grant when policies merge.
type level int

const (
	levelNone level = iota
	levelList
	levelRead
	levelWrite
)

func levelOf(policy string) level {
	switch policy {
	case PolicyList:
		return levelList
	case PolicyRead:
		return levelRead
	case PolicyWrite:
		return levelWrite
	}
	return levelNone
}

// coarse is a merged coarse rule.
type coarse struct {
	denied bool
	level  level
}

func (c *coarse) merge(policy string) {
	if policy == "" {
		return
	}
	if policy == PolicyDeny {
		c.denied = true
		return
	}
	c.level = max(c.level, levelOf(policy))
}

func (c coarse) allows(l level) bool { return !c.denied && c.level >= l }

// capSet is the merged capabilities for one namespace name or glob.
type capSet map[string]bool

func (c capSet) allows(capability string) bool { return !c[CapDeny] && c[capability] }

// ACL is the compiled form of a token's policies. The zero value allows
// nothing; use New or Management.
type ACL struct {
	management bool

	// exact and globs map a namespace name (or glob with "*") to what
	// the merged policies grant there.
	exact map[string]capSet
	globs map[string]capSet

	hvExact map[string]capSet
	hvGlobs map[string]capSet

	node, agent, operator, plugin coarse
}

var management = &ACL{management: true}

// Management is the ACL of a management token: everything is allowed.
func Management() *ACL { return management }

// Deny is the ACL that allows nothing (a client token with no policies).
func Deny() *ACL { return New() }

// New merges policies into one ACL: capabilities are unioned per
// namespace name or glob, coarse rules take the highest grant, and a deny
// anywhere wins for that rule.
func New(policies ...*Policy) *ACL {
	a := &ACL{
		exact: map[string]capSet{}, globs: map[string]capSet{},
		hvExact: map[string]capSet{}, hvGlobs: map[string]capSet{},
	}
	add := func(exact, globs map[string]capSet, r *NamespaceRule, expand func(string) []string) {
		m := exact
		if strings.Contains(r.Name, "*") {
			m = globs
		}
		set := m[r.Name]
		if set == nil {
			set = capSet{}
			m[r.Name] = set
		}
		for _, c := range r.expanded(expand) {
			set[c] = true
		}
	}
	for _, p := range policies {
		if p == nil {
			continue
		}
		for _, r := range p.Namespaces {
			add(a.exact, a.globs, r, expandNamespacePolicy)
		}
		for _, r := range p.HostVolumes {
			add(a.hvExact, a.hvGlobs, r, expandHostVolumePolicy)
		}
		a.node.merge(p.Node)
		a.agent.merge(p.Agent)
		a.operator.merge(p.Operator)
		a.plugin.merge(p.Plugin)
	}
	return a
}

// IsManagement reports whether this is a management ACL.
func (a *ACL) IsManagement() bool { return a != nil && a.management }

// lookup finds the rule that governs name: an exact rule if there is one,
// otherwise the glob that matches with the fewest characters left to its
// wildcards (the closest match), ties broken by the glob's text so the
// answer does not depend on map order.
func lookup(exact, globs map[string]capSet, name string) capSet {
	if c, ok := exact[name]; ok {
		return c
	}
	var best capSet
	bestGlob, bestSlack := "", -1
	for g, c := range globs {
		if !globMatch(g, name) {
			continue
		}
		slack := len(name) - (len(g) - strings.Count(g, "*"))
		if best == nil || slack < bestSlack || (slack == bestSlack && g < bestGlob) {
			best, bestGlob, bestSlack = c, g, slack
		}
	}
	return best
}

// globMatch matches name against a pattern where "*" stands for any run
// of characters (including none).
func globMatch(pattern, name string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == name
	}
	if !strings.HasPrefix(name, parts[0]) {
		return false
	}
	name = name[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(name, p)
		if i < 0 {
			return false
		}
		name = name[i+len(p):]
	}
	return strings.HasSuffix(name, last)
}

// AllowNamespaceOperation reports whether the token holds capability in
// namespace ns.
func (a *ACL) AllowNamespaceOperation(ns, capability string) bool {
	if a == nil {
		return false
	}
	if a.management {
		return true
	}
	return lookup(a.exact, a.globs, ns).allows(capability)
}

// AllowNamespace reports whether the token holds any capability in ns (so
// the namespace is visible to it at all).
func (a *ACL) AllowNamespace(ns string) bool {
	if a == nil {
		return false
	}
	if a.management {
		return true
	}
	c := lookup(a.exact, a.globs, ns)
	return len(c) > 0 && !c[CapDeny]
}

// AllowNamespaceInAny reports whether capability is granted in at least
// one namespace name or glob: enough to ask for a list across all
// namespaces, which is then filtered per object.
func (a *ACL) AllowNamespaceInAny(capability string) bool {
	if a == nil {
		return false
	}
	if a.management {
		return true
	}
	for _, m := range []map[string]capSet{a.exact, a.globs} {
		for _, c := range m {
			if c.allows(capability) {
				return true
			}
		}
	}
	return false
}

// AllowHostVolumeOperation reports whether the token holds capability on
// the host volume called name.
func (a *ACL) AllowHostVolumeOperation(name, capability string) bool {
	if a == nil {
		return false
	}
	if a.management {
		return true
	}
	return lookup(a.hvExact, a.hvGlobs, name).allows(capability)
}

func (a *ACL) allowCoarse(c coarse, l level) bool {
	if a == nil {
		return false
	}
	return a.management || c.allows(l)
}

func (a *ACL) AllowNodeRead() bool      { return a.allowCoarse(a.node, levelRead) }
func (a *ACL) AllowNodeWrite() bool     { return a.allowCoarse(a.node, levelWrite) }
func (a *ACL) AllowAgentRead() bool     { return a.allowCoarse(a.agent, levelRead) }
func (a *ACL) AllowAgentWrite() bool    { return a.allowCoarse(a.agent, levelWrite) }
func (a *ACL) AllowOperatorRead() bool  { return a.allowCoarse(a.operator, levelRead) }
func (a *ACL) AllowOperatorWrite() bool { return a.allowCoarse(a.operator, levelWrite) }
func (a *ACL) AllowPluginList() bool    { return a.allowCoarse(a.plugin, levelList) }
func (a *ACL) AllowPluginRead() bool    { return a.allowCoarse(a.plugin, levelRead) }

// Capabilities lists what the token holds in ns, sorted; for showing a
// token's effective rights.
func (a *ACL) Capabilities(ns string) []string {
	if a.IsManagement() {
		return NamespaceCapabilities()
	}
	var out []string
	for c := range lookup(a.exact, a.globs, ns) {
		if a.AllowNamespaceOperation(ns, c) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}
