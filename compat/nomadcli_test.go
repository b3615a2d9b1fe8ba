package compat

import (
	"fmt"
	"testing"

	nomad "github.com/hashicorp/nomad/api"
	"github.com/hashicorp/nomad/api/contexts"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/testutil"
)

// sleepJob is a one-group raw_exec job the -dev agent's client runs.
func sleepJob(id string, count int) *nomad.Job {
	job := nomad.NewServiceJob(id, id, "global", 50)
	job.Datacenters = []string{"dc1"}
	tg := nomad.NewTaskGroup("web", count)
	tg.AddTask(nomad.NewTask("web", "raw_exec").
		SetConfig("command", "/bin/sh").SetConfig("args", []string{"-c", "sleep 300"}))
	job.AddTaskGroup(tg)
	return job
}

// runningAlloc registers job and waits until one of its allocs runs.
func runningAlloc(t *testing.T, client *nomad.Client, job *nomad.Job) *nomad.AllocationListStub {
	t.Helper()
	_, _, err := client.Jobs().Register(job, nil)
	must.NoError(t, err)
	var running *nomad.AllocationListStub
	testutil.WaitForResult(t, func() (bool, error) {
		allocs, _, err := client.Jobs().Allocations(*job.ID, false, nil)
		if err != nil {
			return false, err
		}
		for _, a := range allocs {
			if a.ClientStatus == "running" {
				running = a
				return true, nil
			}
		}
		for _, a := range allocs {
			return false, fmt.Errorf("alloc %s: %s %s %+v", a.ID, a.ClientStatus, a.ClientDescription, a.TaskStates)
		}
		return false, fmt.Errorf("no alloc yet")
	})
	return running
}

// TestCompat_NomadCLIShapes asserts, through the upstream client, the
// fields Nomad's CLI dereferences without a nil check: JobSummary on job
// stubs (job status <id>, job stop), Job on a node's allocs (node status,
// node drain -ignore-system), Metrics on an alloc (alloc status -verbose),
// Diff on a plan (job plan), and node NodePool and Version.
func TestCompat_NomadCLIShapes(t *testing.T) {
	_, client := testAgent(t)
	alloc := runningAlloc(t, client, sleepJob("web", 1))

	// JobSummary counts the running alloc.
	testutil.WaitForResult(t, func() (bool, error) {
		stubs, _, err := client.Jobs().List(nil)
		if err != nil || len(stubs) != 1 {
			return false, fmt.Errorf("jobs %d, %v", len(stubs), err)
		}
		s := stubs[0].JobSummary
		if s == nil {
			return false, fmt.Errorf("job stub has no JobSummary")
		}
		return s.Summary["web"].Running == 1, fmt.Errorf("summary %+v", s.Summary)
	})
	sum, _, err := client.Jobs().Summary("web", nil)
	must.NoError(t, err)
	must.Eq(t, "web", sum.JobID)
	must.Eq(t, 1, sum.Summary["web"].Running)
	must.NotNil(t, sum.Children)
	_, _, err = client.Jobs().Summary("we", nil)
	must.ErrorContains(t, err, "404", must.Sprint("a summary is read by exact ID"))

	// The alloc says how it was placed.
	full, _, err := client.Allocations().Info(alloc.ID, nil)
	must.NoError(t, err)
	must.NotNil(t, full.Metrics)
	must.Positive(t, full.Metrics.NodesEvaluated)
	must.Positive(t, full.Metrics.AllocationTime)
	must.SliceNotEmpty(t, full.Metrics.ScoreMetaData)
	must.Eq(t, alloc.NodeID, full.Metrics.ScoreMetaData[0].NodeID, must.Sprint("the chosen node scores best"))
	must.MapContainsKey(t, full.Metrics.ScoreMetaData[0].Scores, "load")

	// A node's allocs carry their job.
	nodeAllocs, _, err := client.Nodes().Allocations(alloc.NodeID, nil)
	must.NoError(t, err)
	must.SliceLen(t, 1, nodeAllocs)
	must.NotNil(t, nodeAllocs[0].Job)
	must.Eq(t, "service", *nodeAllocs[0].Job.Type)
	must.NotNil(t, nodeAllocs[0].Metrics)

	node, _, err := client.Nodes().Info(alloc.NodeID, nil)
	must.NoError(t, err)
	must.Eq(t, "default", node.NodePool)
	nodes, _, err := client.Nodes().List(nil)
	must.NoError(t, err)
	must.SliceLen(t, 1, nodes)
	must.Eq(t, helper.Version, nodes[0].Version)
	must.Eq(t, "default", nodes[0].NodePool)

	// Plans diff against the registered job.
	plan, _, err := client.Jobs().Plan(sleepJob("web", 2), true, nil)
	must.NoError(t, err)
	must.NotNil(t, plan.Diff)
	must.Eq(t, "Edited", plan.Diff.Type)
	must.SliceLen(t, 1, plan.Diff.TaskGroups)
	tg := plan.Diff.TaskGroups[0]
	must.Eq(t, "Edited", tg.Type)
	var count *nomad.FieldDiff
	for _, f := range tg.Fields {
		if f.Name == "Count" {
			count = f
		}
	}
	must.NotNil(t, count)
	must.Eq(t, nomad.FieldDiff{Type: "Edited", Name: "Count", Old: "1", New: "2"}, *count)
	must.Eq(t, uint64(1), tg.Updates["create"])
	must.Eq(t, uint64(1), tg.Updates["ignore"]+tg.Updates["in-place update"], must.Sprintf("updates %v", tg.Updates))

	same, _, err := client.Jobs().Plan(sleepJob("web", 1), true, nil)
	must.NoError(t, err)
	must.Eq(t, "None", same.Diff.Type)
	fresh, _, err := client.Jobs().Plan(sleepJob("other", 1), true, nil)
	must.NoError(t, err)
	must.Eq(t, "Added", fresh.Diff.Type)
	must.Eq(t, "Added", fresh.Diff.TaskGroups[0].Type)
	noDiff, _, err := client.Jobs().Plan(sleepJob("web", 2), false, nil)
	must.NoError(t, err)
	must.Nil(t, noDiff.Diff)

	versions, diffs, _, err := client.Jobs().Versions("web", true, nil)
	must.NoError(t, err)
	must.SliceLen(t, 1, versions)
	must.Eq(t, "web", *versions[0].ID)
	must.SliceEmpty(t, diffs)
	deps, _, err := client.Jobs().Deployments("web", false, nil)
	must.NoError(t, err)
	must.SliceEmpty(t, deps)
	_, _, err = client.Jobs().Deployments("nope", false, nil)
	must.ErrorContains(t, err, "404")
}

// TestCompat_NomadCLIEndpoints drives the endpoints Nomad's CLI reaches
// for (job run's monitor, server members, status <prefix>, node status,
// alloc status) with the upstream client and checks real values come
// back.
func TestCompat_NomadCLIEndpoints(t *testing.T) {
	a, client := testAgent(t)
	job := sleepJob("web", 1)
	alloc := runningAlloc(t, client, job)

	evalAllocs, _, err := client.Evaluations().Allocations(alloc.EvalID, nil)
	must.NoError(t, err)
	must.SliceLen(t, 1, evalAllocs)
	must.Eq(t, alloc.ID, evalAllocs[0].ID)

	parsed, err := client.Jobs().ParseHCL(`job "parsed" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
}`, true)
	must.NoError(t, err)
	must.Eq(t, "parsed", *parsed.ID)
	must.Eq(t, "service", *parsed.Type)
	must.Eq(t, "t", parsed.TaskGroups[0].Tasks[0].Name)
	_, err = client.Jobs().ParseHCL(`job "bad" { group "g" { nope = 1 } }`, true)
	must.ErrorContains(t, err, "nope")

	members, err := client.Agent().Members()
	must.NoError(t, err)
	must.SliceLen(t, 1, members.Members)
	must.Eq(t, "alive", members.Members[0].Status)
	must.Eq(t, "true", members.Members[0].Tags["leader"])
	must.Eq(t, a.Server().ID(), members.Members[0].Tags["id"])

	found, _, err := client.Search().PrefixSearch(alloc.ID[:5], contexts.All, nil)
	must.NoError(t, err)
	must.SliceContains(t, found.Matches[contexts.Allocs], alloc.ID)
	found, _, err = client.Search().PrefixSearch("we", contexts.Jobs, nil)
	must.NoError(t, err)
	must.Eq(t, []string{"web"}, found.Matches[contexts.Jobs])
	must.False(t, found.Truncations[contexts.Jobs])
	fuzzy, _, err := client.Search().FuzzySearch("eb", contexts.All, nil)
	must.NoError(t, err)
	must.SliceNotEmpty(t, fuzzy.Matches[contexts.Jobs])
	must.Eq(t, "web", fuzzy.Matches[contexts.Jobs][0].ID)

	host, err := client.Nodes().Stats(alloc.NodeID, nil)
	must.NoError(t, err)
	must.NotNil(t, host.Memory)
	must.Positive(t, host.Memory.Total)
	must.SliceNotEmpty(t, host.CPU)
	must.Positive(t, host.Uptime)
	must.NotNil(t, host.AllocDirStats)
	must.Positive(t, host.AllocDirStats.Size)

	full, _, err := client.Allocations().Info(alloc.ID, nil)
	must.NoError(t, err)
	usage, err := client.Allocations().Stats(full, nil)
	must.NoError(t, err)
	must.MapContainsKey(t, usage.Tasks, "web")
	must.Positive(t, usage.Tasks["web"].ResourceUsage.MemoryStats.RSS)
	must.Positive(t, usage.ResourceUsage.MemoryStats.RSS)
}
