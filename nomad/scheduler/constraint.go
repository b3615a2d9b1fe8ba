package scheduler

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/berth-io/berth/nomad/structs"
)

// Constraint operands. distinct_hosts is checked against the proposed
// allocs (distinctHosts); every other operand only against the node.
const (
	opDistinctHosts  = "distinct_hosts"
	opRegexp         = "regexp"
	opIsSet          = "is_set"
	opIsNotSet       = "is_not_set"
	opSetContains    = "set_contains"
	opSetContainsAll = "set_contains_all"
	opSetContainsAny = "set_contains_any"
)

// constraintKey is how a constraint is named in AllocMetric.ConstraintFiltered.
func constraintKey(c *structs.Constraint) string {
	return strings.TrimSpace(fmt.Sprintf("%s %s %s", c.LTarget, c.Operand, c.RTarget))
}

// resolveTarget interpolates one side of a constraint against node:
// ${node.unique.id}, ${node.unique.name}, ${node.datacenter},
// ${node.class}, ${attr.<key>}, ${meta.<key>}; anything else is a literal.
// The bool is false when the node does not have the value.
func resolveTarget(target string, node *structs.Node) (string, bool) {
	if !strings.HasPrefix(target, "${") || !strings.HasSuffix(target, "}") {
		return target, true
	}
	key := target[2 : len(target)-1]
	switch key {
	case "node.unique.id":
		return node.ID, true
	case "node.unique.name":
		return node.Name, true
	case "node.datacenter":
		return node.Datacenter, true
	case "node.class":
		return node.NodeClass, node.NodeClass != ""
	}
	if attr, ok := strings.CutPrefix(key, "attr."); ok {
		v, found := node.Attributes[attr]
		return v, found
	}
	if meta, ok := strings.CutPrefix(key, "meta."); ok {
		v, found := node.Meta[meta]
		return v, found
	}
	return "", false
}

// regexpCache compiles each constraint pattern once per eval.
type regexpCache map[string]*regexp.Regexp

func (c regexpCache) get(pattern string) *regexp.Regexp {
	if re, ok := c[pattern]; ok {
		return re
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		re = nil // an invalid pattern matches nothing
	}
	c[pattern] = re
	return re
}

// meetsConstraint reports whether node satisfies c. distinct_hosts is
// always met here: it depends on the other placements, not the node.
func meetsConstraint(c *structs.Constraint, node *structs.Node, res regexpCache) bool {
	op := c.Operand
	if op == opDistinctHosts {
		return true
	}
	l, lok := resolveTarget(c.LTarget, node)
	r, rok := resolveTarget(c.RTarget, node)
	switch op {
	case "", "=", "==", "is":
		return lok && rok && l == r
	case "!=", "not":
		return !(lok && rok && l == r)
	case "<", "<=", ">", ">=":
		return lok && rok && compareOrdered(op, l, r)
	case opRegexp:
		if !lok || !rok {
			return false
		}
		re := res.get(r)
		return re != nil && re.MatchString(l)
	case opIsSet:
		return lok
	case opIsNotSet:
		return !lok
	case opSetContains, opSetContainsAll:
		return lok && rok && setContains(l, r, true)
	case opSetContainsAny:
		return lok && rok && setContains(l, r, false)
	}
	return false // unknown operand (version, semver, ...): never met
}

// compareOrdered compares numerically when both sides are numbers, else
// lexically.
func compareOrdered(op, l, r string) bool {
	lf, lerr := strconv.ParseFloat(l, 64)
	rf, rerr := strconv.ParseFloat(r, 64)
	var cmp int
	if lerr == nil && rerr == nil {
		switch {
		case lf < rf:
			cmp = -1
		case lf > rf:
			cmp = 1
		}
	} else {
		cmp = strings.Compare(l, r)
	}
	switch op {
	case "<":
		return cmp < 0
	case "<=":
		return cmp <= 0
	case ">":
		return cmp > 0
	}
	return cmp >= 0
}

// setContains reports whether the comma-separated set have holds all (or
// any) of the comma-separated want.
func setContains(have, want string, all bool) bool {
	set := map[string]bool{}
	for _, v := range strings.Split(have, ",") {
		set[strings.TrimSpace(v)] = true
	}
	for _, v := range strings.Split(want, ",") {
		found := set[strings.TrimSpace(v)]
		if all && !found {
			return false
		}
		if !all && found {
			return true
		}
	}
	return all
}

// distinctHostsScope says whether a group must not share a node with
// other allocs of its job (job-level constraint) or of its group.
func distinctHostsScope(job *structs.Job, tg *structs.TaskGroup) (jobWide, groupWide bool) {
	on := func(cs []*structs.Constraint) bool {
		for _, c := range cs {
			if c.Operand == opDistinctHosts && c.RTarget != "false" {
				return true
			}
		}
		return false
	}
	return on(job.Constraints), on(tg.Constraints)
}
