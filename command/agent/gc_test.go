package agent

import (
	"math"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// fakeRuntime records what applyGCPolicy sets instead of changing the
// test process's collector.
type fakeRuntime struct {
	percent int
	limit   int64
	sets    int
}

func (f *fakeRuntime) setPercent(p int) int {
	old := f.percent
	f.percent = p
	f.sets++
	return old
}

func (f *fakeRuntime) setLimit(l int64) int64 {
	old := f.limit
	if l >= 0 {
		f.limit = l
	}
	return old
}

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestGCPolicy_ServerDefault(t *testing.T) {
	rt := &fakeRuntime{percent: 100, limit: math.MaxInt64}
	p := applyGCPolicy(true, envOf(nil), func() uint64 { return 8 << 30 }, rt.setPercent, rt.setLimit)
	must.Eq(t, serverGCPercent, rt.percent)
	must.Eq(t, int64(4<<30), rt.limit)
	must.Eq(t, serverGCPercent, p.GCPercent)
	must.Eq(t, int64(4<<30), p.MemoryLimit)
	must.StrContains(t, p.String(), "GOGC=200, memory limit 4096 MiB")
}

func TestGCPolicy_OperatorEnvironmentWins(t *testing.T) {
	for _, env := range []map[string]string{{"GOGC": "50"}, {"GOMEMLIMIT": "1GiB"}, {"GOGC": "off"}} {
		// The runtime applied the environment at start: 50, or a limit.
		rt := &fakeRuntime{percent: 50, limit: 1 << 30}
		p := applyGCPolicy(true, envOf(env), func() uint64 { return 8 << 30 }, rt.setPercent, rt.setLimit)
		must.Eq(t, 50, rt.percent, must.Sprint(env))
		must.Eq(t, int64(1<<30), rt.limit, must.Sprint(env))
		must.Eq(t, 50, p.GCPercent)
		must.True(t, strings.Contains(p.Source, "environment"), must.Sprint(p))
	}
}

func TestGCPolicy_ClientOnlyKeepsDefaults(t *testing.T) {
	rt := &fakeRuntime{percent: 100, limit: math.MaxInt64}
	p := applyGCPolicy(false, envOf(nil), func() uint64 { return 8 << 30 }, rt.setPercent, rt.setLimit)
	must.Eq(t, 100, rt.percent)
	must.Eq(t, int64(math.MaxInt64), rt.limit)
	must.StrContains(t, p.String(), "GOGC=100, memory limit none")
}

func TestGCPolicy_UnknownMemorySetsNoLimit(t *testing.T) {
	rt := &fakeRuntime{percent: 100, limit: math.MaxInt64}
	p := applyGCPolicy(true, envOf(nil), func() uint64 { return 0 }, rt.setPercent, rt.setLimit)
	must.Eq(t, serverGCPercent, rt.percent)
	must.Eq(t, int64(math.MaxInt64), rt.limit)
	must.Eq(t, int64(math.MaxInt64), p.MemoryLimit)
}

func TestMemTotal(t *testing.T) {
	must.Eq(t, uint64(24683948*1024), memTotal("MemTotal:       24683948 kB\nMemFree:        20297612 kB\n"))
	must.Eq(t, uint64(0), memTotal("MemFree: 1 kB\n"))
	must.Eq(t, uint64(0), memTotal("MemTotal: lots kB\n"))
	must.Positive(t, agentMemory()) // this machine has a /proc/meminfo
}
