package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

func (r *result) print(out io.Writer, o *options) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	defer w.Flush()
	server := "in-process"
	if o.address != "" {
		server = o.address
	}
	fmt.Fprintf(w, "berth-nodesim\tnodes=%d allocs=%d server=%s client-state=%s raft=%s gogc=%d\n", o.nodes, o.allocs, server, o.state, raftMode(o), gcPercent())
	fmt.Fprintf(w, "nodes started\t%d in %s\n", r.nodesStarted, round(r.startTime))
	fmt.Fprintf(w, "nodes ready / plugin healthy\t%d / %d\n", r.nodesReady, r.pluginHealthy)
	if r.settle > 0 {
		fmt.Fprintf(w, "nodes ready throughout %s (TTL %s)\t%d of %d\n", round(r.settle), r.heartbeatTTL, r.nodesReadyAfterSettle, o.nodes)
	}
	if r.volumes > 0 {
		fmt.Fprintf(w, "volumes registered\t%d in %s (%s)\n", r.volumes, round(r.registerTime), rate(r.volumes, r.registerTime))
	}
	if r.placeTime > 0 {
		fmt.Fprintf(w, "allocs placed\t%d in %s (%s)\n", r.placed, round(r.placeTime), rate(r.placed, r.placeTime))
	} else if r.placed > 0 {
		fmt.Fprintf(w, "allocs placed\t%d (not all)\n", r.placed)
	}
	if r.publishTime > 0 {
		fmt.Fprintf(w, "volumes claimed and published\t%d in %s (%s)\n", r.published, round(r.publishTime), rate(r.published, r.publishTime))
		if r.publishWindow > 0 {
			fmt.Fprintf(w, "  first → last published\t%s (%s)\n", round(r.publishWindow), rate(r.published, r.publishWindow))
		}
	} else if r.published > 0 {
		fmt.Fprintf(w, "volumes claimed and published\t%d (not all)\n", r.published)
	}
	if len(r.createToPublished) > 0 {
		fmt.Fprintf(w, "alloc created → published p50 / p99\t%s / %s\n", pct(r.createToPublished, 50), pct(r.createToPublished, 99))
	}
	if len(r.claimToPublished) > 0 {
		fmt.Fprintf(w, "claim taken → published p50 / p99\t%s / %s\n", pct(r.claimToPublished, 50), pct(r.claimToPublished, 99))
	}
	if r.unpublished > 0 || r.freeTime > 0 {
		fmt.Fprintf(w, "stop → all unpublished\t%d in %s (%s)\n", r.unpublished, round(r.unpublishTime), rate(r.unpublished, r.unpublishTime))
		fmt.Fprintf(w, "stop → all claims freed (seen by a 200ms poll)\t%d in %s\n", r.freed, round(r.freeTime))
	}
	if r.claimEntries > 0 {
		fmt.Fprintf(w, "raft entries while placing and claiming\t%d (%.2f per alloc: %s)\n", r.claimEntries, float64(r.claimEntries)/float64(o.allocs), r.claimEntryKinds)
	}
	if r.claimCPU > 0 && r.published > 0 {
		fmt.Fprintf(w, "CPU while placing and claiming, this process\t%s (%s per claimed alloc)\n", round(r.claimCPU), round(r.claimCPU/time.Duration(r.published)))
	}
	if r.claimServerCPU > 0 && r.published > 0 {
		fmt.Fprintf(w, "CPU while placing and claiming, server (pid %d)\t%s (%s per claimed alloc)\n", o.pid, round(r.claimServerCPU), round(r.claimServerCPU/time.Duration(r.published)))
	}
	for _, t := range r.claimTrace {
		fmt.Fprintf(w, "  while claiming: %s\t%s\n", t.name, t)
	}
	if r.releaseEntries > 0 {
		fmt.Fprintf(w, "raft entries while releasing\t%d (%.2f per alloc: %s)\n", r.releaseEntries, float64(r.releaseEntries)/float64(o.allocs), r.releaseEntryKinds)
	}
	if r.rssWhose != "" {
		fmt.Fprintf(w, "RSS of %s\t%s\n", r.rssWhose, rssLine(r, o))
	}
}

func raftMode(o *options) string {
	switch {
	case o.address != "":
		return "(the agent's)"
	case o.raftMem:
		return "memory"
	}
	return "disk"
}

func rssLine(r *result, o *options) string {
	var parts []string
	for _, p := range []string{"start", "nodes", "volumes", "claims"} {
		if v, ok := r.rss[p]; ok {
			parts = append(parts, fmt.Sprintf("%s %d MB", p, v>>20))
		}
	}
	if a, b := r.rss["start"], r.rss["nodes"]; a > 0 && b > 0 {
		parts = append(parts, fmt.Sprintf("%d KB/node", (b-a)/int64(o.nodes)>>10))
	}
	if a, b := r.rss["nodes"], r.rss["claims"]; a > 0 && b > 0 && r.volumes > 0 {
		parts = append(parts, fmt.Sprintf("%d KB per volume+claimed alloc", (b-a)/int64(r.volumes)>>10))
	}
	return strings.Join(parts, ", ")
}

func rate(n int, d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f/s", float64(n)/d.Seconds())
}

func round(d time.Duration) time.Duration {
	if d > time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(10 * time.Microsecond)
}

// pct is the p-th percentile of sorted durations.
func pct(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	return round(sorted[max(0, min(len(sorted)-1, i-1))])
}

// readRSS is a process's resident set in bytes, or 0.
func readRSS(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// gcPercent is this process's GOGC as the runtime has it (-gogc, else the
// environment's, else 100; -1 is off).
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// readCPU is a process's user and system CPU time so far, or 0 (no such
// process, pid 0).
func readCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// count the fields after its closing one. utime and stime are
	// fields 14 and 15, in clock ticks (USER_HZ, 100 on Linux).
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(utime+stime) * (time.Second / 100)
}
