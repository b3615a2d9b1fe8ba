package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
)

// TestRun_SmallClusterClaimsPublishesAndFrees runs the whole simulation
// with a few nodes against the in-process server: every node registers
// with a healthy plugin, every alloc's volume is claimed, published,
// unpublished and freed, and the table says so; with the plugins in
// memory (the default) and on unix sockets.
func TestRun_SmallClusterClaimsPublishesAndFrees(t *testing.T) {
	t.Run("in memory", func(t *testing.T) { testSmallCluster(t, false) })
	t.Run("unix socket", func(t *testing.T) { testSmallCluster(t, true) })
}

func testSmallCluster(t *testing.T, pluginSocket bool) {
	// Not t.TempDir(): a plugin's socket path (even one served in
	// memory, which the client checks all the same) must fit in 108 bytes.
	clientDir, err := os.MkdirTemp("", "ns")
	must.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(clientDir) })
	o := &options{nodes: 3, allocs: 6, state: "mem", settle: 100 * time.Millisecond, raftMem: true, pluginSocket: pluginSocket,
		clientDir: clientDir, startConcurrency: 3, logger: hclog.NewNullLogger(), progress: hclog.NewNullLogger()}
	must.NoError(t, o.validate())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, cleanup, err := run(ctx, o)
	defer cleanup(context.Background())
	must.NoError(t, err)
	// The nodes' dirs went under -client-dir.
	nodeDirs, err := filepath.Glob(filepath.Join(clientDir, "nodesim*", "sim-*"))
	must.NoError(t, err)
	must.Len(t, 3, nodeDirs)
	must.Eq(t, 3, res.nodesReady)
	must.Eq(t, 3, res.pluginHealthy)
	must.Eq(t, 3, res.nodesReadyAfterSettle)
	must.Eq(t, 6, res.volumes)
	must.Eq(t, 6, res.placed)
	must.Eq(t, 6, res.published)
	must.Len(t, 6, res.claimToPublished)
	must.Eq(t, 6, res.unpublished)
	must.Eq(t, 6, res.freed)
	must.Positive(t, res.claimEntries)
	must.Positive(t, res.releaseEntries)
	must.StrContains(t, res.claimEntryKinds, "claims ")
	must.SliceNotEmpty(t, res.claimTrace)
	var out bytes.Buffer
	res.print(&out, o)
	must.StrContains(t, out.String(), "volumes claimed and published")
	must.True(t, strings.Contains(out.String(), "6 in"), must.Sprint(out.String()))
	must.StrContains(t, out.String(), "raft entries while releasing")
	must.Positive(t, res.claimCPU)
	must.Positive(t, res.publishWindow)
	must.Less(t, res.publishTime, res.publishWindow)
	must.StrContains(t, out.String(), "first → last published")
	must.StrContains(t, out.String(), "CPU while placing and claiming, this process")
	must.StrContains(t, out.String(), " gogc=")
}

func TestValidate_RefusesARemoteAddress(t *testing.T) {
	o := &options{nodes: 1, state: "mem", address: "192.0.2.1:4647"}
	err := o.validate()
	must.ErrorContains(t, err, "not a loopback address")
	o = &options{nodes: 0, state: "disk"}
	err = o.validate()
	must.ErrorContains(t, err, "-nodes 0")
	must.ErrorContains(t, err, "-client-state \"disk\"")
	o = &options{nodes: 1, state: "mem", gogc: -2, clientDir: filepath.Join(t.TempDir(), "missing")}
	err = o.validate()
	must.ErrorContains(t, err, "-gogc -2")
	must.ErrorContains(t, err, "-client-dir")
	o = &options{nodes: 1, state: "mem", clientDir: t.TempDir() + "/" + strings.Repeat("x", 100)}
	must.NoError(t, os.Mkdir(o.clientDir, 0o700))
	must.ErrorContains(t, o.validate(), "pick a shorter dir")
}

// readCPU reads this process's CPU time, which grows as it works, and
// says 0 for no process.
func TestReadCPU(t *testing.T) {
	before := readCPU(os.Getpid())
	must.Positive(t, before+1) // read at all: not an error path
	deadline := time.Now().Add(30 * time.Second)
	x := 0
	for readCPU(os.Getpid()) <= before {
		for i := range 1_000_000 {
			x += i
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU time stayed at %s after 30 s of work", before)
		}
	}
	must.Eq(t, 0, readCPU(0))
	_ = x
}
