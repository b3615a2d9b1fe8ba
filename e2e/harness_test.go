package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"golang.org/x/sys/unix"

	"github.com/berth-io/berth/testutil"
)

// markerEnv is set, to the harness's Root, in the environment of every
// agent a harness starts; the executors the agents start inherit it, and
// the jobs of jobs_test.go put it in their tasks' env. Cleanup finds what
// a test left running by it.
const markerEnv = "BERTH_E2E_ROOT"

// keepEnv, when set, keeps each test's directory (logs, configs, data
// dirs) after the test for a look; processes and mounts are cleaned up all
// the same.
const keepEnv = "BERTH_E2E_KEEP"

// Timeouts. Generous: CI has two shared cores and the test binary runs
// under -race (the agents do not).
const (
	agentStartTimeout = 30 * time.Second
	agentStopTimeout  = 45 * time.Second // the agent gives up on its own after 30s
	cleanupTimeout    = 15 * time.Second
	cliTimeout        = 2 * time.Minute
)

// Harness is one end-to-end test's world: the berth binary, one short
// temporary directory holding everything the test makes (agent data dirs,
// configs, logs, the hostpath plugin's root), and the agents started in
// it. Its cleanup (registered by NewHarness) leaves the machine as it was:
// see cleanup.
type Harness struct {
	t *testing.T
	// Root is the test's directory. Short on purpose: plugin sockets live
	// below the clients' data dirs and must fit in a unix socket path.
	Root string
	// Berth is the absolute path of the built berth binary.
	Berth string

	// lock guards agents.
	lock   sync.Mutex
	agents []*Agent
}

// NewHarness skips the test unless it runs as root on Linux, builds berth
// (once per test process) and makes the test's directory.
func NewHarness(t *testing.T) *Harness {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("end-to-end tests need Linux: bind mounts, exec's chroot and /proc")
	}
	if os.Geteuid() != 0 {
		t.Skip("end-to-end tests need root: the hostpath plugin makes bind mounts and the exec driver builds a chroot")
	}
	start := time.Now()
	bin := testutil.BuildBerth(t) // once per test process: only the first test pays
	if d := time.Since(start); d > time.Second {
		t.Logf("building berth took %v", d.Round(time.Millisecond))
	}
	base := os.TempDir()
	if len(base) > 32 {
		base = "/tmp" // keep plugin socket paths well under 107 bytes
	}
	root, err := os.MkdirTemp(base, "e2e")
	must.NoError(t, err)
	// EvalSymlinks: mountinfo and /proc show resolved paths.
	root, err = filepath.EvalSymlinks(root)
	must.NoError(t, err)
	h := &Harness{t: t, Root: root, Berth: bin}
	t.Cleanup(h.cleanup)
	t.Logf("e2e root %s, berth %s", root, bin)
	return h
}

// Path returns a path under Root.
func (h *Harness) Path(elem ...string) string {
	return filepath.Join(append([]string{h.Root}, elem...)...)
}

// WriteFile writes a file under Root/files and returns its path.
func (h *Harness) WriteFile(t testing.TB, name, content string) string {
	t.Helper()
	p := h.Path("files", name)
	must.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

func (h *Harness) addAgent(a *Agent) {
	h.lock.Lock()
	defer h.lock.Unlock()
	h.agents = append(h.agents, a)
}

func (h *Harness) allAgents() []*Agent {
	h.lock.Lock()
	defer h.lock.Unlock()
	return slices.Clone(h.agents)
}

// cleanup runs after the test: on failure it dumps the logs; then it
// SIGKILLs the agents, kills every process they left behind (executors and
// tasks outlive their client by design), lazily unmounts everything still
// mounted below Root and removes Root. What it cannot clean up fails the
// test, so a leak is seen.
func (h *Harness) cleanup() {
	t := h.t
	if t.Failed() {
		h.dumpLogs()
	}
	for _, a := range h.allAgents() {
		a.kill()
	}
	if err := h.killLeftovers(); err != nil {
		t.Errorf("cleanup: %v", err)
	}
	if err := unmountAllUnder(h.Root); err != nil {
		t.Errorf("cleanup: %v", err)
	}
	if os.Getenv(keepEnv) != "" {
		t.Logf("%s is set: keeping %s (logs, data dirs)", keepEnv, h.Root)
		return
	}
	if err := os.RemoveAll(h.Root); err != nil {
		t.Errorf("cleanup: removing %s: %v", h.Root, err)
	}
}

// killLeftovers SIGKILLs, until none is left, every process that belongs
// to this test: whose command line mentions Root (the hostpath plugin, the
// executors), whose environment carries markerEnv=Root (agents, executors,
// and tasks of our jobs), or whose session or process group is led by such
// a process (tasks run in their executor's session).
func (h *Harness) killLeftovers() error {
	deadline := time.Now().Add(cleanupTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		procs := testProcesses(h.Root)
		if len(procs) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var desc []string
			for _, p := range procs {
				desc = append(desc, fmt.Sprintf("%d (%s)", p.PID, p.Cmdline))
			}
			return fmt.Errorf("processes still alive after SIGKILL: %s", strings.Join(desc, ", "))
		}
		for _, p := range procs {
			_ = unix.Kill(p.PID, unix.SIGKILL)
		}
		// A killed process lingers until the kernel has torn it down;
		// testProcesses skips zombies, so this waits only for that.
		<-tick.C
	}
}

// unmountAllUnder lazily unmounts every mount at or below dir, deepest
// first, until none is left (mounts may be stacked).
func unmountAllUnder(dir string) error {
	for range 20 {
		mounts, err := MountsUnder(dir)
		if err != nil {
			return err
		}
		if len(mounts) == 0 {
			return nil
		}
		sort.Slice(mounts, func(i, j int) bool { return len(mounts[i].MountPoint) > len(mounts[j].MountPoint) })
		for _, m := range mounts {
			if err := unix.Unmount(m.MountPoint, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("unmounting %s: %w", m.MountPoint, err)
			}
		}
	}
	mounts, _ := MountsUnder(dir)
	return fmt.Errorf("mounts left under %s: %v", dir, mounts)
}

// dumpLogs logs the end of every agent's log and of every task log.
func (h *Harness) dumpLogs() {
	t := h.t
	for _, a := range h.allAgents() {
		t.Logf("==== agent %s: last lines of %s ====\n%s", a.Name, a.LogPath, tailFile(a.LogPath, 24<<10))
	}
	logs, _ := filepath.Glob(h.Path("*", "alloc", "*", "alloc", "logs", "*"))
	for _, l := range logs {
		if b := tailFile(l, 4<<10); strings.TrimSpace(b) != "" {
			t.Logf("==== task log %s ====\n%s", l, b)
		}
	}
}

// tailFile returns the last max bytes of a file, starting at a line.
func tailFile(path string, max int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(unreadable: %v)", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(unreadable: %v)", err)
	}
	cut := false
	if fi.Size() > max {
		_, _ = f.Seek(-max, io.SeekEnd)
		cut = true
	}
	b, _ := io.ReadAll(f)
	if cut {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
		b = append([]byte("[...]\n"), b...)
	}
	return string(b)
}

// waitFor polls cond every 10ms until it holds or timeout passes, then
// fails the test naming what it waited for. cond runs on the test's
// goroutine, so it may call t.Fatal itself to give up early (e.g. an alloc
// that failed will never run).
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	testutil.WaitForResultUntil(t, timeout, func() (bool, error) {
		ok, err := cond()
		if !ok && err != nil {
			err = fmt.Errorf("waiting for %s: %w", what, err)
		} else if !ok {
			err = fmt.Errorf("waiting for %s", what)
		}
		return ok, err
	})
}
