package main

import (
	"bytes"
	"context"
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
	o := &options{nodes: 3, allocs: 6, state: "mem", settle: 100 * time.Millisecond, raftMem: true, pluginSocket: pluginSocket,
		startConcurrency: 3, logger: hclog.NewNullLogger(), progress: hclog.NewNullLogger()}
	must.NoError(t, o.validate())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, cleanup, err := run(ctx, o)
	defer cleanup(context.Background())
	must.NoError(t, err)
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
}

func TestValidate_RefusesARemoteAddress(t *testing.T) {
	o := &options{nodes: 1, state: "mem", address: "192.0.2.1:4647"}
	err := o.validate()
	must.ErrorContains(t, err, "not a loopback address")
	o = &options{nodes: 0, state: "disk"}
	err = o.validate()
	must.ErrorContains(t, err, "-nodes 0")
	must.ErrorContains(t, err, "-client-state \"disk\"")
}
