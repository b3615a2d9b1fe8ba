package agent

import (
	"maps"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/nomad/structs"
)

// Allocs and evals: structs → api.

func allocToAPI(a *structs.Allocation, region string) *api.Allocation {
	if a == nil {
		return nil
	}
	return &api.Allocation{
		ID: a.ID, Namespace: a.Namespace, EvalID: a.EvalID, Name: a.Name,
		NodeID: a.NodeID, NodeName: a.NodeName, JobID: a.JobID, Job: jobToAPI(a.Job, region),
		TaskGroup: a.TaskGroup, DesiredStatus: a.DesiredStatus, DesiredDescription: a.DesiredDescription,
		ClientStatus: a.ClientStatus, ClientDescription: a.ClientDescription,
		TaskStates:         taskStatesToAPI(a.TaskStates),
		PreviousAllocation: a.PreviousAllocation, NextAllocation: a.NextAllocation,
		FollowupEvalID: a.FollowupEvalID,
		CreateIndex:    a.CreateIndex, ModifyIndex: a.ModifyIndex, AllocModifyIndex: a.AllocModifyIndex,
		CreateTime: a.CreateTime, ModifyTime: a.ModifyTime,
		Metrics: metricToAPI(a.Metrics),
	}
}

// metricToAPI converts a placement metric. An alloc placed before Berth
// kept metrics gets an empty one, not null: Nomad's CLI reads its fields.
func metricToAPI(m *structs.AllocMetric) *api.AllocationMetric {
	if m == nil {
		return &api.AllocationMetric{}
	}
	out := &api.AllocationMetric{
		NodesEvaluated: m.NodesEvaluated, NodesFiltered: m.NodesFiltered,
		NodesAvailable: maps.Clone(m.NodesAvailable), ClassFiltered: maps.Clone(m.ClassFiltered),
		ConstraintFiltered: maps.Clone(m.ConstraintFiltered), NodesExhausted: m.NodesExhausted,
		DimensionExhausted: maps.Clone(m.DimensionExhausted), CoalescedFailures: m.CoalescedFailures,
		AllocationTime: m.AllocationTime,
	}
	for _, sm := range m.ScoreMetaData {
		out.ScoreMetaData = append(out.ScoreMetaData, &api.NodeScoreMeta{
			NodeID: sm.NodeID, Scores: maps.Clone(sm.Scores), NormScore: sm.NormScore,
		})
	}
	return out
}

func allocStubToAPI(a *structs.AllocListStub) *api.AllocationListStub {
	return &api.AllocationListStub{
		ID: a.ID, EvalID: a.EvalID, Name: a.Name, Namespace: a.Namespace,
		NodeID: a.NodeID, NodeName: a.NodeName, JobID: a.JobID, TaskGroup: a.TaskGroup,
		DesiredStatus: a.DesiredStatus, DesiredDescription: a.DesiredDescription,
		ClientStatus: a.ClientStatus, ClientDescription: a.ClientDescription,
		TaskStates: taskStatesToAPI(a.TaskStates), FollowupEvalID: a.FollowupEvalID,
		CreateIndex: a.CreateIndex, ModifyIndex: a.ModifyIndex, CreateTime: a.CreateTime, ModifyTime: a.ModifyTime,
	}
}

func allocStubsToAPI(stubs []*structs.AllocListStub) []*api.AllocationListStub {
	return list(stubs, allocStubToAPI)
}

func taskStatesToAPI(in map[string]*structs.TaskState) map[string]*api.TaskState {
	if in == nil {
		return nil
	}
	out := make(map[string]*api.TaskState, len(in))
	for name, ts := range in {
		s := &api.TaskState{
			State: ts.State, Failed: ts.Failed, Restarts: ts.Restarts,
			LastRestart: nsTime(ts.LastRestart), StartedAt: nsTime(ts.StartedAt), FinishedAt: nsTime(ts.FinishedAt),
		}
		for _, e := range ts.Events {
			s.Events = append(s.Events, &api.TaskEvent{
				Type: e.Type, Time: e.Time, Message: e.Message, DisplayMessage: e.DisplayMessage,
				ExitCode: e.ExitCode, Signal: e.Signal, FailsTask: e.FailsTask, Details: maps.Clone(e.Details),
			})
		}
		out[name] = s
	}
	return out
}

func evalToAPI(e *structs.Evaluation) *api.Evaluation {
	if e == nil {
		return nil
	}
	out := &api.Evaluation{
		ID: e.ID, Priority: e.Priority, Type: e.Type, TriggeredBy: e.TriggeredBy, Namespace: e.Namespace,
		JobID: e.JobID, JobModifyIndex: e.JobModifyIndex, NodeID: e.NodeID,
		Status: e.Status, StatusDescription: e.StatusDescription, WaitUntil: nsTime(e.WaitUntil),
		NextEval: e.NextEval, PreviousEval: e.PreviousEval, BlockedEval: e.BlockedEval,
		QueuedAllocations: maps.Clone(e.QueuedAllocations),
		CreateIndex:       e.CreateIndex, ModifyIndex: e.ModifyIndex, CreateTime: e.CreateTime, ModifyTime: e.ModifyTime,
	}
	if e.FailedTGAllocs != nil {
		out.FailedTGAllocs = make(map[string]*api.AllocationMetric, len(e.FailedTGAllocs))
		for tg, m := range e.FailedTGAllocs {
			out.FailedTGAllocs[tg] = metricToAPI(m)
		}
	}
	return out
}

func evalsToAPI(evals []*structs.Evaluation) []*api.Evaluation {
	return list(evals, evalToAPI)
}
