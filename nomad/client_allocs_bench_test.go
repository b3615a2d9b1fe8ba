package nomad

import (
	"fmt"
	"testing"

	"github.com/berth-io/berth/nomad/structs"
)

// BenchmarkClientAllocs is one wake of a client's alloc query on a node
// holding one live alloc and 40 stopped ones kept until GC (the claim
// bench's node after 40 runs): "full" is a client starting over (and
// what every wake cost before stubs), "stubs" a client that has the
// stopped ones.
func BenchmarkClientAllocs(b *testing.B) {
	job := &structs.Job{ID: "bench-claim", Namespace: structs.DefaultNamespace, Name: "bench-claim",
		TaskGroups: []*structs.TaskGroup{{Name: "work", Count: 1, Tasks: []*structs.Task{{Name: "work", Driver: "exec",
			Config: map[string]any{"command": "/bin/sleep", "args": []any{"3600"}}}}}}}
	var allocs []*structs.Allocation
	for i := range 41 {
		a := &structs.Allocation{ID: fmt.Sprintf("alloc-%02d", i), Namespace: job.Namespace, JobID: job.ID, Job: job,
			Name: "bench-claim.work[0]", NodeID: "node", TaskGroup: "work",
			DesiredStatus: structs.AllocDesiredStatusStop, ClientStatus: structs.AllocClientStatusComplete,
			CreateIndex: uint64(10 * i), AllocModifyIndex: uint64(10*i + 5), ModifyIndex: uint64(10*i + 6),
			Metrics:    &structs.AllocMetric{NodesEvaluated: 1, ScoreMetaData: []*structs.NodeScoreMeta{{NodeID: "node", NormScore: 1}}},
			TaskStates: map[string]*structs.TaskState{"work": {State: structs.TaskStateDead}},
		}
		for e := range 10 {
			a.TaskStates["work"].Events = append(a.TaskStates["work"].Events,
				&structs.TaskEvent{Type: "CSI Volume", Time: int64(e), Message: "Volume \"bench-claim\" mounted", Details: map[string]string{"volume": "bench-claim"}})
		}
		if i == 40 {
			a.DesiredStatus, a.ClientStatus = structs.AllocDesiredStatusRun, structs.AllocClientStatusPending
		}
		allocs = append(allocs, a)
	}
	for _, c := range []struct {
		name  string
		since uint64
	}{{"full", 0}, {"stubs", 395}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				out, _ := clientAllocs(allocs, c.since)
				if len(out) != len(allocs) {
					b.Fatal(len(out))
				}
			}
		})
	}
}
