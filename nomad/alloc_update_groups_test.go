package nomad_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

// Alloc updates of several nodes committed together go out as ONE Raft
// entry, and each caller's allocs get exactly what it reported.
func TestNode_UpdateAllocGroupCommitIsOneEntry(t *testing.T) {
	s := schedServer(t, time.Minute)
	for i := range 2 {
		joinNode(t, s, schedNode(i))
	}
	submitJob(t, s, schedJob("web", 3))
	allocs := waitLive(t, s, "web", 3)

	var reqs []*structs.AllocUpdateRequest
	for i, a := range allocs {
		reqs = append(reqs, &structs.AllocUpdateRequest{Alloc: []*structs.Allocation{{
			ID: a.ID, ClientStatus: structs.AllocClientStatusRunning, ClientDescription: fmt.Sprintf("caller %d", i),
		}}})
	}
	before := s.Applied(structs.AllocClientUpdateRequestType)
	res := s.CommitAllocUpdatesForTest(reqs)
	must.SliceLen(t, 3, res)
	must.Eq(t, before+1, s.Applied(structs.AllocClientUpdateRequestType), must.Sprint("three callers, one entry"))
	for i, a := range allocs {
		must.NoError(t, res[i].Err)
		must.Eq(t, res[0].Index, res[i].Index)
		got, err := s.State().AllocByID(nil, a.ID)
		must.NoError(t, err)
		must.Eq(t, structs.AllocClientStatusRunning, got.ClientStatus)
		must.Eq(t, fmt.Sprintf("caller %d", i), got.ClientDescription)
		must.Eq(t, res[i].Index, got.ModifyIndex)
	}
}

// Concurrent Node.UpdateAlloc calls through the group commit are each
// applied before their caller is answered, in however many entries.
func TestNode_UpdateAllocConcurrentCallers(t *testing.T) {
	s := schedServer(t, time.Minute)
	for i := range 2 {
		joinNode(t, s, schedNode(i))
	}
	const n = 12
	submitJob(t, s, schedJob("web", n))
	allocs := waitLive(t, s, "web", n)

	before := s.Applied(structs.AllocClientUpdateRequestType)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, a := range allocs {
		wg.Go(func() {
			req := &structs.AllocUpdateRequest{Alloc: []*structs.Allocation{{
				ID: a.ID, NodeID: a.NodeID, ClientStatus: structs.AllocClientStatusRunning, ClientDescription: fmt.Sprintf("caller %d", i),
			}}}
			req.AuthToken = nodeSecret(s, a.NodeID)
			var reply structs.GenericResponse
			if errs[i] = s.RPC("Node.UpdateAlloc", req, &reply); errs[i] != nil {
				return
			}
			// Answered only once applied.
			got, err := s.State().AllocByID(nil, a.ID)
			switch {
			case err != nil:
				errs[i] = err
			case got.ClientDescription != fmt.Sprintf("caller %d", i):
				errs[i] = fmt.Errorf("alloc %s answered at index %d before its update was applied: %q",
					a.ID, reply.Index, got.ClientDescription)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		must.NoError(t, err)
	}
	entries := s.Applied(structs.AllocClientUpdateRequestType) - before
	must.Between(t, 1, entries, n)
}
