package client

import (
	"context"
	"time"

	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/structs"
)

// watchAllocs keeps the node's alloc runners in line with the servers,
// with blocking queries, until ctx ends. Errors back off; so does a server
// that answers at once without news, so the loop is never tight.
func (c *Client) watchAllocs(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-c.registered:
	}
	var index uint64
	failures := 0
	for {
		req := &structs.NodeSpecificRequest{
			NodeID:       c.NodeID(),
			SecretID:     c.nodeSecret(),
			QueryOptions: structs.QueryOptions{MinQueryIndex: index, MaxQueryTime: c.cfg.AllocWatchWait},
		}
		var resp structs.NodeAllocsResponse
		start := time.Now()
		err := c.rpc(ctx, "Node.GetClientAllocs", req, &resp)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			d := c.cfg.RetryBackoff.Delay(failures)
			failures++
			c.logger.Warn("watching allocs failed; retrying", "error", err, "retry_in", d)
			if !helper.SleepCtx(ctx, d) {
				return
			}
			continue
		}
		// The reply is the node's whole alloc list, so it is applied even
		// when the query timed out: its index can go down (the alloc with
		// the highest index was garbage collected) and the diff is
		// idempotent.
		noProgress := resp.Index <= index && time.Since(start) < c.cfg.AllocWatchWait/2
		index = resp.Index
		c.applyAllocs(resp.Allocs)
		if !noProgress {
			failures = 0
			continue
		}
		// Back so soon with nothing new: back off, so that a server that
		// does not block cannot make this a tight loop.
		d := c.cfg.RetryBackoff.Delay(failures)
		failures++
		c.logger.Debug("alloc query returned early without changes", "retry_in", d)
		if !helper.SleepCtx(ctx, d) {
			return
		}
	}
}

// allocDiff is what to do with the allocs the servers sent.
type allocDiff struct {
	added   []*structs.Allocation
	updated []*structs.Allocation
	removed []string
}

// diffAllocs compares what the client runs (alloc ID → AllocModifyIndex
// last applied) with what the servers sent. It is pure. An alloc new to
// the client that is already terminal is ignored: there is nothing to run.
// Allocs the servers no longer send were garbage collected: destroy them.
func diffAllocs(known map[string]uint64, pulled []*structs.Allocation) allocDiff {
	var d allocDiff
	seen := make(map[string]bool, len(pulled))
	for _, a := range pulled {
		seen[a.ID] = true
		idx, ok := known[a.ID]
		switch {
		case !ok && !a.TerminalStatus():
			d.added = append(d.added, a)
		case ok && a.AllocModifyIndex > idx:
			d.updated = append(d.updated, a)
		}
	}
	for id := range known {
		if !seen[id] {
			d.removed = append(d.removed, id)
		}
	}
	return d
}
