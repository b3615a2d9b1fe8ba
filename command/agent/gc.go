package agent

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Garbage collector policy of a server agent (DESIGN §7, "GC policy").
//
// A server's work is bursts of short-lived garbage around a live heap
// that changes slowly (the state store): a 1,000-volume register
// allocates ~25 MB that is dead once answered. Go's default (GOGC=100:
// collect when the heap has grown by the live heap) runs a whole mark
// phase several times per such request on a small cluster. A server
// therefore runs with GOGC=serverGCPercent, bounded by a soft memory
// limit of a fraction of the memory the agent may use, so that a big
// live heap falls back to collecting by the limit instead of growing to
// three times itself. 200, not more: 400 answered the 1,000-volume
// register no faster than 200 but peaked at 1.7 times the RSS of
// GOGC=100 under 3,000 simulated nodes, 200 at 1.2 times (DESIGN §7).
// The operator's GOGC or GOMEMLIMIT, when set, is kept as is: the
// runtime has applied it already.
const (
	// serverGCPercent is the server's GOGC: the heap may grow by two
	// live heaps before a collection.
	serverGCPercent = 200
	// serverMemLimitFraction of the memory the agent may use (the
	// machine's, or its cgroup limit when lower) is the soft limit.
	serverMemLimitFraction = 0.5
)

// GCPolicy is what ApplyGCPolicy decided, for the agent's banner.
type GCPolicy struct {
	// GCPercent is the GOGC in force; -1 when collection is off.
	GCPercent int
	// MemoryLimit is the soft limit in bytes; math.MaxInt64 for none.
	MemoryLimit int64
	// Source says where the two come from.
	Source string
}

func (p GCPolicy) String() string {
	gogc := "off"
	if p.GCPercent >= 0 {
		gogc = strconv.Itoa(p.GCPercent)
	}
	limit := "none"
	if p.MemoryLimit != math.MaxInt64 {
		limit = fmt.Sprintf("%d MiB", p.MemoryLimit>>20)
	}
	return fmt.Sprintf("GOGC=%s, memory limit %s (%s)", gogc, limit, p.Source)
}

// ApplyGCPolicy sets the garbage collector of a server agent's process
// (see serverGCPercent) unless the operator's environment set GOGC or
// GOMEMLIMIT, and returns what is in force. A client-only agent keeps
// Go's defaults: its heap is small and its bursts few.
func ApplyGCPolicy(cfg *Config) GCPolicy {
	return applyGCPolicy(cfg.ServerEnabled(), os.LookupEnv, agentMemory, debug.SetGCPercent, debug.SetMemoryLimit)
}

// applyGCPolicy is ApplyGCPolicy with its inputs and the runtime's
// setters passed in, so a test can see what it decides without changing
// the test process's collector.
func applyGCPolicy(server bool, env func(string) (string, bool), memory func() uint64,
	setPercent func(int) int, setLimit func(int64) int64) GCPolicy {
	current := GCPolicy{GCPercent: currentGCPercent(setPercent), MemoryLimit: setLimit(-1)}
	_, gogc := env("GOGC")
	_, memlimit := env("GOMEMLIMIT")
	switch {
	case gogc || memlimit:
		current.Source = "the GOGC/GOMEMLIMIT environment"
		return current
	case !server:
		current.Source = "Go's defaults: no server in this agent"
		return current
	}
	mem := memory()
	if mem == 0 {
		setPercent(serverGCPercent)
		return GCPolicy{GCPercent: serverGCPercent, MemoryLimit: current.MemoryLimit,
			Source: "server default; the agent's memory is unknown, so no limit"}
	}
	limit := int64(float64(mem) * serverMemLimitFraction)
	setPercent(serverGCPercent)
	setLimit(limit)
	return GCPolicy{GCPercent: serverGCPercent, MemoryLimit: limit,
		Source: fmt.Sprintf("server default: half of %d MiB; set GOGC or GOMEMLIMIT to override", mem>>20)}
}

// currentGCPercent reads GOGC as the runtime has it (SetGCPercent
// returns the old value; it is put back at once).
func currentGCPercent(setPercent func(int) int) int {
	p := setPercent(100)
	setPercent(p)
	return p
}

// agentMemory is the memory this process may use: the machine's
// (MemTotal), or its cgroup's limit when that is lower. 0 when unknown.
func agentMemory() uint64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	mem := memTotal(string(b))
	for _, path := range []string{
		"/sys/fs/cgroup/memory.max",                   // cgroup v2
		"/sys/fs/cgroup/memory/memory.limit_in_bytes", // cgroup v1
	} {
		if b, err := os.ReadFile(path); err == nil {
			if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 && (mem == 0 || n < mem) {
				mem = n // "max" (v2) or a huge v1 value means no limit
			}
		}
	}
	return mem
}

// memTotal is MemTotal in bytes from /proc/meminfo's text, 0 if absent.
func memTotal(meminfo string) uint64 {
	for line := range strings.Lines(meminfo) {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return n * 1024
		}
	}
	return 0
}
