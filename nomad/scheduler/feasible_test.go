package scheduler

import (
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

func TestGlobMatch(t *testing.T) {
	cases := []struct {
		pattern, s string
		want       bool
	}{
		{"dc1", "dc1", true},
		{"dc1", "dc10", false},
		{"*", "anything", true},
		{"*", "", true},
		{"dc*", "dc1", true},
		{"dc*", "xdc1", false},
		{"*-1", "us-east-1", true},
		{"us-*-1", "us-east-1", true},
		{"us-*-1", "us-east-2", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "acb", false},
	}
	for _, tc := range cases {
		t.Run(tc.pattern+" "+tc.s, func(t *testing.T) {
			must.Eq(t, tc.want, globMatch(tc.pattern, tc.s))
		})
	}
}

func TestMeetsConstraint(t *testing.T) {
	node := testNode(1)
	node.NodeClass = "big"
	node.Attributes["os.version"] = "22.04"
	node.Attributes["cpu.numcores"] = "8"
	node.Meta["tags"] = "ssd,gpu"
	cases := []struct {
		name string
		c    structs.Constraint
		want bool
	}{
		{"attr equal", structs.Constraint{LTarget: "${attr.kernel.name}", Operand: "=", RTarget: "linux"}, true},
		{"empty operand is equal", structs.Constraint{LTarget: "${attr.kernel.name}", RTarget: "linux"}, true},
		{"attr not equal", structs.Constraint{LTarget: "${attr.kernel.name}", Operand: "!=", RTarget: "linux"}, false},
		{"missing attr not equal", structs.Constraint{LTarget: "${attr.nope}", Operand: "!=", RTarget: "x"}, true},
		{"missing attr equal", structs.Constraint{LTarget: "${attr.nope}", Operand: "=", RTarget: ""}, false},
		{"datacenter", structs.Constraint{LTarget: "${node.datacenter}", Operand: "=", RTarget: "dc1"}, true},
		{"unique id", structs.Constraint{LTarget: "${node.unique.id}", Operand: "=", RTarget: node.ID}, true},
		{"unique name", structs.Constraint{LTarget: "${node.unique.name}", Operand: "=", RTarget: "node-1"}, true},
		{"class", structs.Constraint{LTarget: "${node.class}", Operand: "=", RTarget: "big"}, true},
		{"meta", structs.Constraint{LTarget: "${meta.rack}", Operand: "=", RTarget: "r1"}, true},
		{"regexp", structs.Constraint{LTarget: "${attr.os.version}", Operand: "regexp", RTarget: `^22\.`}, true},
		{"regexp no match", structs.Constraint{LTarget: "${attr.os.version}", Operand: "regexp", RTarget: `^20\.`}, false},
		{"bad regexp", structs.Constraint{LTarget: "${attr.os.version}", Operand: "regexp", RTarget: `(`}, false},
		{"is_set", structs.Constraint{LTarget: "${meta.rack}", Operand: "is_set"}, true},
		{"is_set missing", structs.Constraint{LTarget: "${meta.zone}", Operand: "is_set"}, false},
		{"is_not_set", structs.Constraint{LTarget: "${meta.zone}", Operand: "is_not_set"}, true},
		{"numeric greater", structs.Constraint{LTarget: "${attr.cpu.numcores}", Operand: ">=", RTarget: "4"}, true},
		{"numeric less", structs.Constraint{LTarget: "${attr.cpu.numcores}", Operand: "<", RTarget: "10"}, true},
		{"set_contains", structs.Constraint{LTarget: "${meta.tags}", Operand: "set_contains", RTarget: "gpu"}, true},
		{"set_contains all", structs.Constraint{LTarget: "${meta.tags}", Operand: "set_contains", RTarget: "gpu,nvme"}, false},
		{"set_contains_any", structs.Constraint{LTarget: "${meta.tags}", Operand: "set_contains_any", RTarget: "gpu,nvme"}, true},
		{"distinct_hosts is not a node check", structs.Constraint{Operand: "distinct_hosts"}, true},
		{"unsupported operand", structs.Constraint{LTarget: "${attr.os.version}", Operand: "version", RTarget: ">= 20"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, tc.want, meetsConstraint(&tc.c, node, regexpCache{}))
		})
	}
}

func TestRescheduleDelay(t *testing.T) {
	exp := &structs.ReschedulePolicy{Delay: 30 * time.Second, DelayFunction: delayExponential, MaxDelay: 5 * time.Minute}
	fib := &structs.ReschedulePolicy{Delay: 10 * time.Second, DelayFunction: delayFibonacci, MaxDelay: time.Minute}
	constant := &structs.ReschedulePolicy{Delay: 5 * time.Second, DelayFunction: delayConstant}
	cases := []struct {
		name   string
		policy *structs.ReschedulePolicy
		n      int
		want   time.Duration
	}{
		{"exponential first", exp, 0, 30 * time.Second},
		{"exponential second", exp, 1, time.Minute},
		{"exponential third", exp, 2, 2 * time.Minute},
		{"exponential capped", exp, 10, 5 * time.Minute},
		{"exponential huge n stays capped", exp, 10_000, 5 * time.Minute},
		{"fibonacci", fib, 0, 10 * time.Second},
		{"fibonacci 1", fib, 1, 10 * time.Second},
		{"fibonacci 2", fib, 2, 20 * time.Second},
		{"fibonacci 3", fib, 3, 30 * time.Second},
		{"fibonacci 4", fib, 4, 50 * time.Second},
		{"fibonacci capped", fib, 5, time.Minute},
		{"constant", constant, 7, 5 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, tc.want, rescheduleDelay(tc.policy, tc.n))
		})
	}
}

func TestDrainRules(t *testing.T) {
	start := time.Unix(1000, 0)
	hour := &structs.DrainStrategy{Deadline: time.Hour, StartedAt: start.UnixNano()}
	forced := &structs.DrainStrategy{Deadline: -1, StartedAt: start.UnixNano()}
	explicit := &structs.DrainStrategy{ForceDeadline: start.Add(time.Minute).UnixNano()}
	none := &structs.DrainStrategy{}
	ignore := &structs.DrainStrategy{Deadline: time.Hour, StartedAt: start.UnixNano(), IgnoreSystemJobs: true}
	cases := []struct {
		name          string
		d             *structs.DrainStrategy
		jobType       string
		nonSystemLeft bool
		now           time.Time
		want          bool
	}{
		{"service at once", hour, structs.JobTypeService, true, start, true},
		{"batch waits", hour, structs.JobTypeBatch, true, start, false},
		{"batch at deadline", hour, structs.JobTypeBatch, true, start.Add(time.Hour), true},
		{"batch forced", forced, structs.JobTypeBatch, true, start, true},
		{"batch explicit deadline", explicit, structs.JobTypeBatch, true, start.Add(2 * time.Minute), true},
		{"batch no deadline", none, structs.JobTypeBatch, true, start.Add(1000 * time.Hour), false},
		{"system waits for others", hour, structs.JobTypeSystem, true, start, false},
		{"system last", hour, structs.JobTypeSystem, false, start, true},
		{"system at deadline", hour, structs.JobTypeSystem, true, start.Add(time.Hour), true},
		{"system ignored", ignore, structs.JobTypeSystem, false, start.Add(2 * time.Hour), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, tc.want, MigrateOnDrain(tc.d, tc.jobType, tc.nonSystemLeft, tc.now))
		})
	}

	sys := &structs.Allocation{ID: "s", Job: &structs.Job{Type: structs.JobTypeSystem}, DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusRunning}
	svc := &structs.Allocation{ID: "v", Job: &structs.Job{Type: structs.JobTypeService}, DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusRunning}
	stopped := svc.Copy()
	stopped.DesiredStatus = structs.AllocDesiredStatusStop
	must.False(t, DrainComplete(hour, []*structs.Allocation{svc}))
	must.True(t, DrainComplete(hour, []*structs.Allocation{stopped}))
	must.False(t, DrainComplete(hour, []*structs.Allocation{sys}))
	must.True(t, DrainComplete(ignore, []*structs.Allocation{sys, stopped}))
}
