package sim

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// leftovers is what a process holds that a finished schedule could leave
// behind: goroutines, open file descriptors and the node dirs start makes
// under the temp dir.
type leftovers struct {
	goroutines, fds, dirs int
}

func measure(t *testing.T) leftovers {
	fds, err := os.ReadDir("/proc/self/fd")
	must.NoError(t, err)
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix()+"*"))
	must.NoError(t, err)
	return leftovers{goroutines: runtime.NumGoroutine(), fds: len(fds), dirs: len(dirs)}
}

// TestSim_FinishedScheduleLeavesNothing: after schedules end (their
// subtests' cleanups have run), the process is back to the goroutines,
// file descriptors and temp dirs it had before, so one process can run
// 10,000 of them. Before the servers' Raft layer closed the connections
// it handed to Raft, each three-server schedule left ~7 goroutines
// (raft's handleConn, each holding a whole stopped server's Raft and
// state) and ~14 fds: 4.5 GB after 2,000 schedules.
func TestSim_FinishedScheduleLeavesNothing(t *testing.T) {
	// Two three-server schedules (one with a leader restart, so a server
	// is stopped and started while its peers run) and a one-server one.
	var scheds []*Schedule
	for seed := uint64(40000); len(scheds) < 3 && seed < 40200; seed++ {
		s := Generate(seed, DefaultGen)
		if s.Servers >= 3 && len(scheds) < 2 || s.Servers == 1 && len(scheds) == 2 {
			scheds = append(scheds, s)
		}
	}
	must.Len(t, 3, scheds)
	processStalls() // the process's meter runs for good: not a leftover
	before := measure(t)
	for _, s := range scheds {
		runOne(t, s)
	}
	// What a cluster's shutdown closes ends shortly after (a goroutine
	// returning from a read on a closed conn): waited for, with a margin
	// of two for the runtime's and the testing package's own.
	const margin = 2
	var now leftovers
	err := waitFor(30*time.Second, func() error {
		now = measure(t)
		if now.goroutines > before.goroutines+margin || now.fds > before.fds+margin || now.dirs > before.dirs {
			return fmt.Errorf("before %+v, after %d schedules %+v", before, len(scheds), now)
		}
		return nil
	})
	if err != nil {
		var b bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
		t.Fatalf("%v; goroutines now:\n%s", err, b.String())
	}
}
