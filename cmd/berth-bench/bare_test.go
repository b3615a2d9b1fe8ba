package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

// TestMain lets floorRegister start this test binary as its bare server,
// as it starts berth-bench itself.
func TestMain(m *testing.M) {
	if code, ok := bareMain(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// The register floor is what its name says only if each call it times is
// one whole register body appended to a raft-wal: read the WAL back.
func TestFloorRegister_AppendsEachCallToTheWAL(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	samples, times, err := floorRegister(ctx, dir, 3)
	must.NoError(t, err)
	must.Len(t, 3, samples)
	must.MapLen(t, 3, times)

	// Each timed call's legs, as the agent's register is split.
	tr, err := readTrace(filepath.Join(dir, bareTraceName))
	must.NoError(t, err)
	steps := breakdownOf("bare", bareRegisterPath, registerMarks(times, tr))
	must.Len(t, len(bareRegisterPath)-1, steps)
	for i, s := range steps {
		must.Eq(t, bareRegisterPath[i], s.From)
		must.Eq(t, 3, s.N)
		must.Positive(t, s.P50)
	}

	// floorRegister returns once the server has exited: the WAL is free.
	wal, err := raftwal.Open(dir)
	must.NoError(t, err)
	defer wal.Close()
	last, err := wal.LastIndex()
	must.NoError(t, err)
	must.Eq(t, uint64(bareWarmup+3), last)
	var l raft.Log
	must.NoError(t, wal.GetLog(last, &l))
	var body api.CSIVolumeRegisterRequest
	must.NoError(t, json.Unmarshal(l.Data, &body))
	must.Len(t, 1, body.Volumes)
	must.Eq(t, "bench-floor-0022", body.Volumes[0].ID)
}
