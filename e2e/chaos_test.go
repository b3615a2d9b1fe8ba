package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"golang.org/x/sys/unix"

	"github.com/berth-io/berth/api"
)

// Scenario 11: the simulator's slower companion (issue 16). TestE2E_Chaos
// runs seeded random schedules of operations and faults against real
// agents (Raft on disk), Berth's hostpath plugin making real bind mounts,
// csi-test's mock-driver failing every n-th node call through its hooks
// file, and exec tasks, and checks the machine rather than Berth's own
// view:
//
//	check 1 (continuously, a sampler on /proc/self/mountinfo): a
//	        single-node-writer volume is never mounted (staged or
//	        published) below two clients' data dirs at once; for the
//	        mock-driver's volume, which it never mounts, the same from
//	        its instances' logs of the calls, replayed in time order;
//	check 2 (continuously, the same sampler): a publish mount never goes
//	        while a task process of its alloc runs (/proc); and at the
//	        end, no task process runs for an alloc the servers hold
//	        terminal;
//	check 3 (end state): every claim of a terminal alloc is freed (API);
//	check 4 (end state): the volume mounts below each client's data dir
//	        are exactly the live claims of live allocs on that node;
//	check 5 (end state): no alloc the servers want running is still
//	        pending: the cluster settled, so check 4 compared a state
//	        with nothing half-way.
//
// The end-state checks run once every fault has healed and must hold
// within healBound; each is polled until it holds, and what it saw last is
// reported when the bound passes.
//
// A schedule is a pure function of its seed (chaosSchedule): the same seed
// gives the same cluster size, operations, faults and schedule delays. The
// delays (a random 0-1.5 s before each step, and how long a killed agent
// stays down) are part of the schedule, not synchronisation: they decide
// which operations a fault overlaps.
//
//	CHAOS_SEED=<n>        first seed (default: derived from the clock; printed)
//	CHAOS_SCHEDULES=<n>   schedules to run, seeds n, n+1, ... (default 2)

// healBound is how long after the last fault healed the end-state checks
// may take to hold: a restarted client re-syncs, a restarted plugin is
// healthy again, the claim protocol finishes its releases.
const healBound = 60 * time.Second

// chaosVolume is one volume a schedule's workloads claim. Mock volumes
// are csi-test's mock-driver's: it keeps them in memory and publishes
// without mounting, so the mountinfo checks (1 and 4) cannot see them;
// checks 2, 3 and 5 hold them all the same.
type chaosVolume struct {
	ID, AccessMode string
	Mock           bool
}

// The volumes and the workloads claiming them: two jobs compete for one
// single-node-writer volume, one has another to itself, and two read a
// multi-node-reader-only volume (they may run on both nodes at once).
var (
	chaosVolumes = []chaosVolume{
		{"sw1", SingleNodeWriter, false},
		{"sw2", SingleNodeWriter, false},
		{"ro1", "multi-node-reader-only", false},
		{"mk1", SingleNodeWriter, true},
	}
	chaosJobs = []struct{ ID, Volume string }{
		{"w1a", "sw1"}, {"w1b", "sw1"}, {"w2", "sw2"}, {"ra", "ro1"}, {"rb", "ro1"}, {"wm", "mk1"},
	}
)

// Operation kinds of a schedule step.
const (
	opRun          = "run"           // berth job run -detach <job>
	opStop         = "stop"          // berth job stop -detach <job>
	opPurge        = "purge"         // berth job stop -purge -detach <job>
	opKillClient   = "kill-client"   // kill -9 the client agent
	opStartClient  = "start-client"  // start it again from its data dir
	opKillPlugin   = "kill-plugin"   // kill -9 the plugin task on a client (its job restarts it)
	opKillLeader   = "kill-leader"   // kill -9 the leader (3 servers)
	opStartServer  = "start-server"  // start the killed server again
	opBounceServer = "bounce-server" // 1 server: kill -9, wait Down, start it again
)

// chaosStep is one step of a schedule: wait Delay (a schedule delay), then
// do Op on Target (a job ID or a client index); Down is how long a bounced
// server stays down.
type chaosStep struct {
	Delay  time.Duration
	Op     string
	Job    string
	Client int
	Down   time.Duration
}

func (s chaosStep) String() string {
	switch s.Op {
	case opRun, opStop, opPurge:
		return fmt.Sprintf("+%v %s %s", s.Delay, s.Op, s.Job)
	case opKillClient, opStartClient, opKillPlugin:
		return fmt.Sprintf("+%v %s c%d", s.Delay, s.Op, s.Client+1)
	case opBounceServer:
		return fmt.Sprintf("+%v %s (down %v)", s.Delay, s.Op, s.Down)
	default:
		return fmt.Sprintf("+%v %s", s.Delay, s.Op)
	}
}

// chaosSchedule is one seeded schedule: the cluster's size and its steps.
// Every fault heals by the last step: a killed client or server is started
// again, a killed plugin is restarted by its job.
type chaosSchedule struct {
	Seed    uint64
	Servers int
	// MockFaultEvery: the mock-driver answers Unavailable to the first
	// and then every MockFaultEvery-th call of each node RPC (stage,
	// publish, unpublish, unstage), counted per plugin instance; the
	// client must retry it.
	MockFaultEvery int
	Steps          []chaosStep
}

func (s chaosSchedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d servers, 2 clients, mock-driver fails every %d. node call, %d steps", s.Seed, s.Servers, s.MockFaultEvery, len(s.Steps))
	for i, st := range s.Steps {
		fmt.Fprintf(&b, "\n  %2d %s", i, st)
	}
	return b.String()
}

// Bounds of the generator.
const (
	chaosClients        = 2
	chaosSteps          = 10
	maxStepDelay        = 1500 * time.Millisecond
	maxServerDown       = 3 * time.Second
	maxPluginKillsPerCl = 2 // the plugin job's restart policy allows more; keep heal time bounded
)

// newChaosSchedule generates the schedule of a seed. Odd seeds run three
// servers, even seeds one, so any two consecutive seeds cover both. It
// keeps track of what is down, so it only starts what was killed, and
// appends the starts that heal whatever is still down at the end.
func newChaosSchedule(seed uint64) chaosSchedule {
	r := rand.New(rand.NewPCG(seed, 0x6368616f73)) // "chaos"
	s := chaosSchedule{Seed: seed, Servers: 1, MockFaultEvery: 2 + r.IntN(3)}
	if seed%2 == 1 {
		s.Servers = 3
	}
	clientDown := make([]bool, chaosClients)
	pluginKills := make([]int, chaosClients)
	serverDown := false
	delay := func() time.Duration {
		return time.Duration(r.IntN(int(maxStepDelay/time.Millisecond)+1)) * time.Millisecond
	}
	// registered are the jobs the servers know: only they can be
	// stopped or purged (a purge forgets the job; a run registers it,
	// again after a stop or purge).
	var registered []string
	// The first steps run jobs, so the faults have claims to hit.
	for _, j := range []int{r.IntN(len(chaosJobs)), r.IntN(len(chaosJobs))} {
		s.Steps = append(s.Steps, chaosStep{Delay: delay(), Op: opRun, Job: chaosJobs[j].ID})
		if !slices.Contains(registered, chaosJobs[j].ID) {
			registered = append(registered, chaosJobs[j].ID)
		}
	}
	for len(s.Steps) < chaosSteps {
		st := chaosStep{Delay: delay(), Client: r.IntN(chaosClients), Job: chaosJobs[r.IntN(len(chaosJobs))].ID}
		switch k := r.IntN(100); {
		case k < 30 || (k < 50 && len(registered) == 0):
			st.Op = opRun
			if !slices.Contains(registered, st.Job) {
				registered = append(registered, st.Job)
			}
		case k < 42:
			st.Op = opStop
			st.Job = registered[r.IntN(len(registered))]
		case k < 50:
			st.Op = opPurge
			i := r.IntN(len(registered))
			st.Job = registered[i]
			registered = slices.Delete(registered, i, i+1)
		case k < 65:
			if clientDown[st.Client] {
				st.Op = opStartClient
				clientDown[st.Client] = false
			} else {
				st.Op = opKillClient
				clientDown[st.Client] = true
			}
		case k < 78:
			if pluginKills[st.Client] >= maxPluginKillsPerCl {
				continue
			}
			pluginKills[st.Client]++
			st.Op = opKillPlugin
		default:
			switch {
			case s.Servers == 1:
				st.Op = opBounceServer
				st.Down = time.Duration(r.IntN(int(maxServerDown/time.Millisecond)+1)) * time.Millisecond
			case serverDown:
				st.Op = opStartServer
				serverDown = false
			default:
				st.Op = opKillLeader
				serverDown = true
			}
		}
		if st.Op != opRun && st.Op != opStop && st.Op != opPurge {
			st.Job = ""
		}
		if st.Op == opKillLeader || st.Op == opStartServer || st.Op == opBounceServer {
			st.Client = 0
		}
		s.Steps = append(s.Steps, st)
	}
	for i, down := range clientDown {
		if down {
			s.Steps = append(s.Steps, chaosStep{Delay: delay(), Op: opStartClient, Client: i})
		}
	}
	if serverDown {
		s.Steps = append(s.Steps, chaosStep{Delay: delay(), Op: opStartServer})
	}
	return s
}

// chaosSeeds returns the seeds to run: CHAOS_SCHEDULES (default 2) of
// them from CHAOS_SEED (default: the clock).
func chaosSeeds(t *testing.T) []uint64 {
	t.Helper()
	n := 2
	if v := os.Getenv("CHAOS_SCHEDULES"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CHAOS_SCHEDULES=%q: want a positive number of schedules", v)
		}
	}
	first := uint64(time.Now().UnixNano()) % 1_000_000
	if v := os.Getenv("CHAOS_SEED"); v != "" {
		var err error
		first, err = strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: want a non-negative integer seed", v)
		}
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = first + uint64(i)
	}
	return seeds
}

// TestE2E_Chaos runs the seeded schedules (see the top of this file), one
// fresh cluster each. A violating schedule fails with its seed, its steps
// and what the checker saw; CHAOS_SEED=<seed> CHAOS_SCHEDULES=1 replays it.
func TestE2E_Chaos(t *testing.T) {
	seeds := chaosSeeds(t)
	start := time.Now()
	t.Logf("chaos: %d schedules from seed %d (replay one with CHAOS_SEED=<seed> CHAOS_SCHEDULES=1)", len(seeds), seeds[0])
	violating := 0
	for _, seed := range seeds {
		ok := t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runChaosSchedule(t, newChaosSchedule(seed)) })
		if !ok {
			violating++
		}
	}
	t.Logf("chaos: %d schedules, %d failed, %.0f s", len(seeds), violating, time.Since(start).Seconds())
}

// runChaosSchedule runs one schedule on a fresh cluster and checks it.
func runChaosSchedule(t *testing.T, s chaosSchedule) {
	t.Logf("schedule %s", s)
	h := NewHarness(t)
	c := h.NewCluster(t, s.Servers, chaosClients)
	nodeIDs := make([]string, chaosClients)
	for i, cl := range c.Clients {
		nodeIDs[i] = c.NodeID(t, cl)
	}
	plugin := h.HostpathPlugin("node")
	c.RunJob(t, plugin.ID(), chaosPluginHCL(plugin))
	c.WaitForPlugin(t, "hostpath", 0, chaosClients)
	// csi-test's mock-driver as a second node plugin (--disable-attach:
	// it then stages without a controller's publish context), its hooks
	// file failing every MockFaultEvery-th node call. It is never killed: it
	// keeps its volumes and publications in memory, and a restarted one
	// would have forgotten them, which no orchestrator can heal.
	mock := mockPlugin(h, mockDriverBinary(t), "node", "--disable-attach", "--hooks-file", h.WriteFile(t, "hooks.yaml", chaosMockHooks(s.MockFaultEvery)))
	c.RunJob(t, mock.ID(), mock.HCL())
	c.WaitForPlugin(t, "mock", 0, chaosClients)
	for _, v := range chaosVolumes {
		vol := &Volume{ID: v.ID, PluginID: "hostpath", Capabilities: []Capability{{v.AccessMode, FileSystem}}}
		if v.Mock {
			// Every mock-driver instance starts with volumes "1" to "3".
			vol.PluginID, vol.ExternalID = "mock", "1"
		}
		c.RegisterVolume(t, vol)
	}

	sampler := startWriterSampler(c.Clients)
	defer sampler.stop() // a step that failed the test ends it too
	var violations []string
	defer func() {
		if len(violations) > 0 {
			t.Errorf("seed %d: %d violations:\n%s\nschedule %s", s.Seed, len(violations), strings.Join(violations, "\n"), s)
		}
	}()

	var leaderDown *Agent
	for i, st := range s.Steps {
		// A schedule delay: part of the schedule (it decides what a fault
		// overlaps), not a wait for a condition.
		time.Sleep(st.Delay)
		t.Logf("step %d: %s", i, st)
		switch st.Op {
		case opRun:
			j := chaosJob(st.Job)
			chaosBerth(t, c, "job", "run", "-detach", h.WriteFile(t, j.JobID+".job.hcl", j.HCL(h.Root)))
		case opStop:
			chaosBerth(t, c, "job", "stop", "-detach", st.Job)
		case opPurge:
			chaosBerth(t, c, "job", "stop", "-purge", "-detach", st.Job)
		case opKillClient:
			c.Clients[st.Client].Kill(t)
		case opStartClient:
			c.Clients[st.Client].Restart(t)
		case opKillPlugin:
			killPlugin(t, nodeIDs[st.Client])
		case opKillLeader:
			leaderDown = c.WaitForLeader(t)
			leaderDown.Kill(t)
		case opStartServer:
			leaderDown.Restart(t)
			leaderDown = nil
		case opBounceServer:
			srv := c.Servers[0]
			srv.Kill(t)
			time.Sleep(st.Down) // a schedule delay: how long the server stays down
			srv.Restart(t)
		default:
			t.Fatalf("unknown step %s", st)
		}
	}

	// Every fault has healed: agents run again; the plugin's job restarts
	// a killed plugin. Wait for the cluster to be whole, then for the
	// end-state checks to hold, all within healBound.
	healed := time.Now()
	c.WaitForLeader(t)
	c.WaitForNodesReady(t)
	c.WaitForPlugin(t, "hostpath", 0, chaosClients)
	violations = append(violations, waitEndState(t, c, nodeIDs, healed.Add(healBound))...)
	violations = append(violations, sampler.stop()...)
	violations = append(violations, checkMockWriterLogs(t, c)...)
	sampler.lock.Lock()
	unpublishes := sampler.unpublishes
	sampler.lock.Unlock()
	t.Logf("seed %d: end state held %v after healing; the sampler read mountinfo %d times and saw %d publish mounts go",
		s.Seed, time.Since(healed).Round(time.Millisecond), sampler.samples(), unpublishes)
}

// chaosPluginHCL is the plugin job with a restart policy that brings a
// killed plugin back in a second (the default waits 15 s between tries and
// gives up after two).
func chaosPluginHCL(p *PluginJob) string {
	return strings.Replace(p.HCL(), "group \"plugin\" {\n", `group "plugin" {
    restart {
      attempts = 10
      interval = "10m"
      delay    = "1s"
      mode     = "delay"
    }
`, 1)
}

// chaosMockHooks is the mock-driver's hooks file: the first call of each
// node RPC and every n-th after it answer Unavailable (a transient error
// the client retries), so any schedule that claims the mock's volume hits
// the faults.
func chaosMockHooks(n int) string {
	var b strings.Builder
	b.WriteString("globals: |\n  calls = {};\n")
	for _, rpc := range []string{"nodeStageVolumeStart", "nodePublishVolumeStart", "nodeUnpublishVolumeStart", "nodeUnstageVolumeStart"} {
		fmt.Fprintf(&b, "%s: |\n  calls[%q] = (calls[%q] || 0) + 1;\n  (calls[%q] - 1) %% %d == 0 ? UNAVAILABLE : OK;\n", rpc, rpc, rpc, rpc, n)
	}
	return b.String()
}

// chaosJob is the workload of a job ID: a service task that runs until
// stopped and takes 300 ms to exit, so a stop overlaps its exit.
func chaosJob(id string) *Workload {
	for _, j := range chaosJobs {
		if j.ID == id {
			mode := ""
			for _, v := range chaosVolumes {
				if v.ID == j.Volume {
					mode = v.AccessMode
				}
			}
			return &Workload{JobID: id, Type: "service", Volume: j.Volume, AccessMode: mode,
				Script: SlowStopScript(300 * time.Millisecond), KillTimeout: 5 * time.Second}
		}
	}
	panic("no chaos job " + id)
}

// chaosBerth runs a CLI command of a step against any running server,
// retrying while the cluster has no leader (a step may follow a leader's
// kill): an operator's command that failed for that would be repeated.
// A stop retried after an answer lost with a dying leader may find the
// job already purged: that retry is done.
func chaosBerth(t *testing.T, c *Cluster, args ...string) {
	t.Helper()
	tries := 0
	waitFor(t, leaderTimeout, "berth "+strings.Join(args, " "), func() (bool, error) {
		var last error
		for _, s := range c.RunningServers() {
			out, err := c.BerthOn(s, args...)
			tries++
			if err == nil || (tries > 1 && args[1] == "stop" && strings.Contains(out, "No job with prefix")) {
				return true, nil
			}
			last = fmt.Errorf("through %s: %w: %s", s.Name, err, strings.TrimSpace(out))
		}
		return false, last
	})
}

// killPlugin SIGKILLs the hostpath plugin task of a node: the process run
// as `berth plugin hostpath ... -node-id <node>`. A plugin not running at
// that moment (its job is restarting it) is logged, not a failure.
func killPlugin(t *testing.T, nodeID string) {
	t.Helper()
	for _, p := range allProcesses() {
		if strings.Contains(p.Cmdline, " plugin hostpath ") && strings.Contains(p.Cmdline, "-node-id "+nodeID) &&
			hasEnv(p.Env, "NOMAD_TASK_NAME=plugin") {
			must.NoError(t, unix.Kill(p.PID, unix.SIGKILL))
			t.Logf("plugin of node %s killed: pid %d", nodeID, p.PID)
			return
		}
	}
	t.Logf("no plugin process of node %s to kill (restarting)", nodeID)
}

// csiMount is a volume mount a client made, from its mount point: below
// <data dir>/client/csi/hostpath, staging/default/<vol>/... or
// per-alloc/<alloc>/<vol>/....
type csiMount struct {
	Client int
	Volume string
	Alloc  string // "" for a staging mount
	Point  string
}

// clientCSIMounts sorts the mounts below the clients' data dirs into the
// volume mounts of each client; others (task dirs, plugin dirs) are left
// out.
func clientCSIMounts(mounts []Mount, dataDirs []string) []csiMount {
	var out []csiMount
	for _, m := range mounts {
		for i, dir := range dataDirs {
			rel, ok := strings.CutPrefix(m.MountPoint, filepath.Join(dir, "client", "csi", "hostpath")+"/")
			if !ok {
				continue
			}
			f := strings.Split(rel, "/")
			switch {
			case len(f) >= 3 && f[0] == "staging":
				out = append(out, csiMount{Client: i, Volume: f[2], Point: m.MountPoint})
			case len(f) >= 3 && f[0] == "per-alloc":
				out = append(out, csiMount{Client: i, Volume: f[2], Alloc: f[1], Point: m.MountPoint})
			}
		}
	}
	return out
}

// checkSingleWriter is check 1 on one reading of mountinfo: a
// single-node-writer volume mounted below more than one client's data dir.
func checkSingleWriter(mounts []Mount, dataDirs []string, writers []string) []string {
	on := map[string]map[int][]string{}
	for _, m := range clientCSIMounts(mounts, dataDirs) {
		if !slices.Contains(writers, m.Volume) {
			continue
		}
		if on[m.Volume] == nil {
			on[m.Volume] = map[int][]string{}
		}
		on[m.Volume][m.Client] = append(on[m.Volume][m.Client], m.Point)
	}
	var out []string
	for _, v := range slices.Sorted(func(yield func(string) bool) {
		for v := range on {
			if !yield(v) {
				return
			}
		}
	}) {
		if len(on[v]) > 1 {
			var where []string
			for cl := range chaosClients {
				if pts, ok := on[v][cl]; ok {
					where = append(where, fmt.Sprintf("c%d: %s", cl+1, strings.Join(pts, ", ")))
				}
			}
			out = append(out, fmt.Sprintf("check 1: single-node-writer volume %s mounted on %d nodes at once: %s", v, len(on[v]), strings.Join(where, "; ")))
		}
	}
	return out
}

// writerSampler reads /proc/self/mountinfo every 20 ms from the start of
// the schedule to the end of its checks and runs check 1 on each reading,
// and check 2's continuous form on each pair of readings.
type writerSampler struct {
	done     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup

	lock sync.Mutex
	n    int
	// unpublishes counts the publish mounts seen to go: what check 2's
	// continuous form had to look at.
	unpublishes int
	violations  []string
	seen        map[string]bool
}

func startWriterSampler(clients []*Agent) *writerSampler {
	var dirs []string
	for _, c := range clients {
		dirs = append(dirs, c.DataDir)
	}
	var writers []string
	for _, v := range chaosVolumes {
		if v.AccessMode == SingleNodeWriter && !v.Mock {
			writers = append(writers, v.ID)
		}
	}
	s := &writerSampler{done: make(chan struct{}), seen: map[string]bool{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		var prev []csiMount
		for {
			b, err := os.ReadFile("/proc/self/mountinfo")
			var found []string
			if err == nil {
				var mounts []Mount
				mounts, err = parseMountinfo(b, "")
				found = checkSingleWriter(mounts, dirs, writers)
				cur := clientCSIMounts(mounts, dirs)
				if gone := unpublishedWhileRunning(prev, cur, workloadTaskPIDs); len(gone) > 0 {
					// Confirm on a second reading, so that a reading torn
					// by a concurrent mount change cannot be blamed.
					if b, err2 := os.ReadFile("/proc/self/mountinfo"); err2 == nil {
						if again, err2 := parseMountinfo(b, ""); err2 == nil {
							cur = clientCSIMounts(again, dirs)
							found = append(found, unpublishedWhileRunning(prev, cur, workloadTaskPIDs)...)
						}
					}
				}
				s.lock.Lock()
				s.unpublishes += countUnpublished(prev, cur)
				s.lock.Unlock()
				prev = cur
			}
			if err != nil {
				found = []string{"sampler: " + err.Error()}
			}
			s.lock.Lock()
			s.n++
			for _, f := range found {
				if !s.seen[f] {
					s.seen[f] = true
					s.violations = append(s.violations, time.Now().Format("15:04:05.000")+" "+f)
				}
			}
			s.lock.Unlock()
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// unpublishedWhileRunning is check 2's continuous form on two readings of
// mountinfo: an alloc's publish mount of a volume, there in prev and gone
// in cur, while a task process of the alloc runs. tasks is asked only for
// the allocs whose mount went, after cur was read: a process it finds
// alive was alive when the mount was already gone.
func unpublishedWhileRunning(prev, cur []csiMount, tasks func(allocID string) []int) []string {
	type key struct {
		client        int
		volume, alloc string
	}
	now := map[key]bool{}
	for _, m := range cur {
		now[key{m.Client, m.Volume, m.Alloc}] = true
	}
	var out []string
	for _, m := range prev {
		if m.Alloc == "" || now[key{m.Client, m.Volume, m.Alloc}] {
			continue
		}
		if pids := tasks(m.Alloc); len(pids) > 0 {
			out = append(out, fmt.Sprintf("check 2: c%d's publish mount of volume %s for alloc %s went while its task processes %v run: %s",
				m.Client+1, m.Volume, m.Alloc, pids, m.Point))
		}
	}
	return out
}

// countUnpublished counts the publish mounts in prev and not in cur.
func countUnpublished(prev, cur []csiMount) int {
	n := 0
	for _, m := range prev {
		if m.Alloc != "" && !slices.ContainsFunc(cur, func(c csiMount) bool { return c.Client == m.Client && c.Volume == m.Volume && c.Alloc == m.Alloc }) {
			n++
		}
	}
	return n
}

// workloadTaskPIDs lists the live processes of an alloc's workload task.
func workloadTaskPIDs(allocID string) []int {
	var out []int
	for _, p := range allProcesses() {
		if hasEnv(p.Env, "NOMAD_ALLOC_ID="+allocID) && hasEnv(p.Env, "NOMAD_TASK_NAME="+WorkloadTask) {
			out = append(out, p.PID)
		}
	}
	return out
}

// stop ends the sampler (once) and returns what it found.
func (s *writerSampler) stop() []string {
	s.stopOnce.Do(func() { close(s.done) })
	s.wg.Wait()
	s.lock.Lock()
	defer s.lock.Unlock()
	return slices.Clone(s.violations)
}

func (s *writerSampler) samples() int {
	s.lock.Lock()
	defer s.lock.Unlock()
	return s.n
}

// terminalAlloc: the client is done with the alloc (its tasks exited).
func terminalAlloc(status string) bool {
	return status == api.AllocClientStatusComplete || status == api.AllocClientStatusFailed || status == api.AllocClientStatusLost
}

// endState is what the end-state checks read: the servers' allocs and
// volumes, the machine's mounts and task processes.
type endState struct {
	allocs  map[string]*api.AllocationListStub
	volumes []*api.CSIVolume
	mounts  []csiMount
	// tasks maps an alloc ID to the pids of processes of its tasks.
	tasks map[string][]int
}

// summary counts what the end-state checks looked at: they prove little
// about a reading with no running alloc, claim or mount.
func (st endState) summary() string {
	running, claims := 0, 0
	for _, a := range st.allocs {
		if a.ClientStatus == api.AllocClientStatusRunning {
			running++
		}
	}
	for _, v := range st.volumes {
		claims += len(v.Claims)
	}
	return fmt.Sprintf("%d allocs (%d running), %d live claims, %d volume mounts, %d allocs with task processes",
		len(st.allocs), running, claims, len(st.mounts), len(st.tasks))
}

// checkEndState runs checks 2, 3, 4 and 5 on one reading; nodeIDs[i] is
// client i's node.
func checkEndState(st endState, nodeIDs []string) []string {
	var out []string
	live := func(allocID string) bool {
		a := st.allocs[allocID]
		return a != nil && !terminalAlloc(a.ClientStatus)
	}
	// Check 5 (settled): every alloc the servers want running runs; an
	// alloc still pending (or unknown) after the bound never started.
	for _, id := range slices.Sorted(mapKeys(st.allocs)) {
		a := st.allocs[id]
		if a.DesiredStatus == api.AllocDesiredStatusRun && (a.ClientStatus == api.AllocClientStatusPending || a.ClientStatus == api.AllocClientStatusUnknown) {
			out = append(out, fmt.Sprintf("check 5: alloc %s of job %s on %s is %s: %s", id, a.JobID, a.NodeName, a.ClientStatus, describeAlloc(a)))
		}
	}
	// Check 2: no task process of an alloc the servers hold terminal
	// (or have forgotten: a purged job's allocs).
	for _, id := range slices.Sorted(mapKeys(st.tasks)) {
		if !live(id) {
			status := "unknown to the servers"
			if a := st.allocs[id]; a != nil {
				status = "client status " + a.ClientStatus
			}
			out = append(out, fmt.Sprintf("check 2: task processes %v of alloc %s run, and the servers hold it %s", st.tasks[id], id, status))
		}
	}
	// Check 3: every claim of a terminal alloc freed; check 4's
	// expectation: the live claims of live allocs.
	type key struct {
		client        int
		volume, alloc string
	}
	want := map[key]bool{}
	for _, v := range st.volumes {
		for _, cl := range v.Claims {
			if !live(cl.AllocID) {
				out = append(out, fmt.Sprintf("check 3: volume %s: claim of terminal alloc %s not freed (step %s, attempts %d, last error %q)", v.ID, cl.AllocID, cl.Step, cl.Attempts, cl.LastError))
				continue
			}
			if i := slices.Index(nodeIDs, cl.NodeID); i >= 0 && !isMockVolume(v.ID) {
				want[key{i, v.ID, cl.AllocID}] = true
				want[key{i, v.ID, ""}] = true
			}
		}
		for _, cl := range v.PastClaims {
			if cl.Step != api.CSIClaimFreed && !live(cl.AllocID) {
				out = append(out, fmt.Sprintf("check 3: volume %s: past claim of terminal alloc %s at step %s, not freed (attempts %d, last error %q)", v.ID, cl.AllocID, cl.Step, cl.Attempts, cl.LastError))
			}
		}
	}
	// Check 4: mounts ⇔ live claims of live allocs, per node.
	have := map[key][]string{}
	for _, m := range st.mounts {
		k := key{m.Client, m.Volume, m.Alloc}
		have[k] = append(have[k], m.Point)
	}
	for k, pts := range have {
		if !want[k] {
			out = append(out, fmt.Sprintf("check 4: c%d has a mount of volume %s (alloc %q) no live claim of a live alloc explains: %s", k.client+1, k.volume, k.alloc, strings.Join(pts, ", ")))
		}
	}
	for k := range want {
		if len(have[k]) == 0 {
			out = append(out, fmt.Sprintf("check 4: c%d lacks the mount of volume %s (alloc %q) a live claim of a live alloc needs", k.client+1, k.volume, k.alloc))
		}
	}
	slices.Sort(out)
	return out
}

// mockPublication is one successful NodePublishVolume or
// NodeUnpublishVolume of a mock-driver instance, from its log.
type mockPublication struct {
	Client  int
	At      string // klog's "MMDD hh:mm:ss.uuuuuu": sorts as time within a year
	Publish bool
	Volume  string // the plugin's volume ID
	Target  string
}

// parseMockLog reads the successful publishes and unpublishes from a
// mock-driver's stderr (-v=3 logs each call after it returned: the line
// is written before the caller gets the answer).
func parseMockLog(client int, log string) []mockPublication {
	var out []mockPublication
	for _, line := range strings.Split(log, "\n") {
		head, js, ok := strings.Cut(line, "gRPCCall: ")
		if !ok || len(head) < 21 {
			continue
		}
		var call struct {
			Method  string
			Request struct {
				VolumeID   string `json:"volume_id"`
				TargetPath string `json:"target_path"`
			}
			Error string
		}
		if json.Unmarshal([]byte(js), &call) != nil || call.Error != "" {
			continue
		}
		pub := strings.HasSuffix(call.Method, "/NodePublishVolume")
		if !pub && !strings.HasSuffix(call.Method, "/NodeUnpublishVolume") {
			continue
		}
		out = append(out, mockPublication{Client: client, At: head[1:21], Publish: pub, Volume: call.Request.VolumeID, Target: call.Request.TargetPath})
	}
	return out
}

// checkMockWriters is check 1 for the mock-driver's single-node-writer
// volume, from its instances' logs: replayed in time order, the volume is
// never published on two nodes at once. A publish is logged after it
// happened, an unpublish before the client hears of it (and so before the
// claim can be freed and another node publish), so a correct release
// never shows as an overlap.
func checkMockWriters(events []mockPublication, volume string) []string {
	slices.SortStableFunc(events, func(a, b mockPublication) int { return strings.Compare(a.At, b.At) })
	published := map[int]map[string]bool{}
	var out []string
	for _, e := range events {
		if e.Volume != volume {
			continue
		}
		if published[e.Client] == nil {
			published[e.Client] = map[string]bool{}
		}
		if !e.Publish {
			delete(published[e.Client], e.Target)
			continue
		}
		published[e.Client][e.Target] = true
		for other, targets := range published {
			if other != e.Client && len(targets) > 0 {
				out = append(out, fmt.Sprintf("check 1: mock-driver volume %s published on c%d at %s (%s) while still published on c%d (%v)",
					volume, e.Client+1, e.At, e.Target, other+1, slices.Sorted(mapKeys(targets))))
			}
		}
	}
	return out
}

// checkMockWriterLogs runs checkMockWriters on the logs of every client's
// mock-driver instance.
func checkMockWriterLogs(t *testing.T, c *Cluster) []string {
	t.Helper()
	var events []mockPublication
	failed := 0
	for i, cl := range c.Clients {
		logs, err := filepath.Glob(filepath.Join(cl.DataDir, "alloc", "*", "alloc", "logs", "plugin.stderr.*"))
		must.NoError(t, err)
		for _, l := range logs {
			b, err := os.ReadFile(l)
			must.NoError(t, err)
			events = append(events, parseMockLog(i, string(b))...)
			failed += strings.Count(string(b), `"Error":"rpc error: code = Unavailable`)
		}
	}
	n := 0
	for _, e := range events {
		if e.Publish {
			n++
		}
	}
	t.Logf("mock-driver logs: %d publishes, %d unpublishes; %d calls failed Unavailable by its hooks", n, len(events)-n, failed)
	return checkMockWriters(events, "1")
}

// isMockVolume: the mock-driver's volumes are never mounted.
func isMockVolume(id string) bool {
	return slices.ContainsFunc(chaosVolumes, func(v chaosVolume) bool { return v.ID == id && v.Mock })
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// readEndState reads the servers' allocs and volumes, then the mounts, then
// the task processes.
func readEndState(t *testing.T, c *Cluster) (endState, error) {
	st := endState{allocs: map[string]*api.AllocationListStub{}, tasks: map[string][]int{}}
	client := c.API(t)
	allocs, _, err := client.Allocations().List(nil)
	if err != nil {
		return st, err
	}
	for _, a := range allocs {
		st.allocs[a.ID] = a
	}
	for _, v := range chaosVolumes {
		vol, _, err := client.CSIVolumes().Info(v.ID, nil)
		if err != nil {
			return st, err
		}
		st.volumes = append(st.volumes, vol)
	}
	mounts, err := MountsUnder(c.h.Root)
	if err != nil {
		return st, err
	}
	var dirs []string
	for _, cl := range c.Clients {
		dirs = append(dirs, cl.DataDir)
	}
	st.mounts = clientCSIMounts(mounts, dirs)
	marker := markerEnv + "=" + c.h.Root
	for _, p := range allProcesses() {
		// Tasks, not their executors: a task's env names its task.
		if !hasEnv(p.Env, marker) || !slices.ContainsFunc(p.Env, func(e string) bool { return strings.HasPrefix(e, "NOMAD_TASK_NAME=") }) {
			continue
		}
		for _, e := range p.Env {
			if id, ok := strings.CutPrefix(e, "NOMAD_ALLOC_ID="); ok {
				st.tasks[id] = append(st.tasks[id], p.PID)
			}
		}
	}
	return st, nil
}

// waitEndState polls the end-state checks until they hold or deadline
// passes, and returns what the last reading violated.
func waitEndState(t *testing.T, c *Cluster, nodeIDs []string, deadline time.Time) []string {
	t.Helper()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := readEndState(t, c)
		var found []string
		if err != nil {
			found = []string{"reading the end state: " + err.Error()}
		} else {
			found = checkEndState(st, nodeIDs)
		}
		if len(found) == 0 {
			t.Logf("end state: %s", st.summary())
			return nil
		}
		if time.Now().After(deadline) {
			return found
		}
		<-tick.C
	}
}

// TestChaosSchedule_SameSeedSameSchedule: a seed fixes the schedule, and
// every fault it makes heals by its last step.
func TestChaosSchedule_SameSeedSameSchedule(t *testing.T) {
	kinds := map[string]bool{}
	for seed := range uint64(200) {
		a, b := newChaosSchedule(seed), newChaosSchedule(seed)
		must.Eq(t, a.String(), b.String())
		must.Eq(t, 1+2*int(seed%2), a.Servers)
		clientDown := map[int]bool{}
		serverDown := false
		registered := map[string]bool{}
		for _, st := range a.Steps {
			kinds[st.Op] = true
			switch st.Op {
			case opRun:
				registered[st.Job] = true
			case opStop, opPurge:
				must.True(t, registered[st.Job], must.Sprintf("seed %d stops job %s, which it never ran or purged: %s", seed, st.Job, a))
				if st.Op == opPurge {
					delete(registered, st.Job)
				}
			}
			must.LessEq(t, maxStepDelay, st.Delay)
			switch st.Op {
			case opKillClient:
				must.False(t, clientDown[st.Client], must.Sprintf("seed %d kills a down client: %s", seed, a))
				clientDown[st.Client] = true
			case opStartClient:
				must.True(t, clientDown[st.Client], must.Sprintf("seed %d starts a running client: %s", seed, a))
				clientDown[st.Client] = false
			case opKillLeader:
				must.False(t, serverDown)
				serverDown = true
			case opStartServer:
				must.True(t, serverDown)
				serverDown = false
			}
		}
		must.MapEmpty(t, deleteFalse(clientDown), must.Sprintf("seed %d leaves a client down: %s", seed, a))
		must.False(t, serverDown, must.Sprintf("seed %d leaves a server down: %s", seed, a))
	}
	must.NotEq(t, newChaosSchedule(1).String(), newChaosSchedule(3).String())
	// Over 200 seeds every kind of step turns up.
	for _, op := range []string{opRun, opStop, opPurge, opKillClient, opStartClient, opKillPlugin, opKillLeader, opStartServer, opBounceServer} {
		must.True(t, kinds[op], must.Sprintf("no %s step in 200 schedules", op))
	}
}

func deleteFalse(m map[int]bool) map[int]bool {
	for k, v := range m {
		if !v {
			delete(m, k)
		}
	}
	return m
}

// TestChaosCheckSingleWriter: check 1 reports a single-node-writer volume
// mounted below two clients' data dirs, and not a multi-node-reader one,
// nor one volume staged and published on one node.
func TestChaosCheckSingleWriter(t *testing.T) {
	const info = `30 1 0:26 / /tmp/e2eX rw - tmpfs tmpfs rw
41 30 0:26 /hostpath/volumes/sw1 /tmp/e2eX/c1/client/csi/hostpath/staging/default/sw1/rw-file-system-single-node-writer rw - tmpfs tmpfs rw
42 30 0:26 /hostpath/volumes/sw1 /tmp/e2eX/c1/client/csi/hostpath/per-alloc/a1/sw1/rw-file-system-single-node-writer rw - tmpfs tmpfs rw
43 30 0:26 /hostpath/volumes/ro1 /tmp/e2eX/c1/client/csi/hostpath/staging/default/ro1/ro-file-system-multi-node-reader-only rw - tmpfs tmpfs rw
44 30 0:26 /hostpath/volumes/ro1 /tmp/e2eX/c2/client/csi/hostpath/staging/default/ro1/ro-file-system-multi-node-reader-only rw - tmpfs tmpfs rw
`
	dirs := []string{"/tmp/e2eX/c1", "/tmp/e2eX/c2"}
	writers := []string{"sw1", "sw2"}
	mounts, err := parseMountinfo([]byte(info), "")
	must.NoError(t, err)
	must.SliceEmpty(t, checkSingleWriter(mounts, dirs, writers))

	// c2 publishes sw1 too: two nodes.
	mounts, err = parseMountinfo([]byte(info+"45 30 0:26 /hostpath/volumes/sw1 /tmp/e2eX/c2/client/csi/hostpath/per-alloc/a2/sw1/rw-file-system-single-node-writer rw - tmpfs tmpfs rw\n"), "")
	must.NoError(t, err)
	found := checkSingleWriter(mounts, dirs, writers)
	must.Len(t, 1, found)
	must.StrContains(t, found[0], "volume sw1 mounted on 2 nodes")
	must.StrContains(t, found[0], "c2: /tmp/e2eX/c2/client/csi/hostpath/per-alloc/a2/sw1")
}

// TestChaosCheckEndState: checks 2, 3, 4 and 5 each report what they exist
// for, and a consistent state passes.
func TestChaosCheckEndState(t *testing.T) {
	nodes := []string{"n1", "n2"}
	ok := func() endState {
		return endState{
			allocs: map[string]*api.AllocationListStub{
				"a1": {ID: "a1", ClientStatus: api.AllocClientStatusRunning},
				"a2": {ID: "a2", ClientStatus: api.AllocClientStatusComplete},
			},
			volumes: []*api.CSIVolume{{ID: "sw1",
				Claims:     []*api.CSIVolumeClaim{{AllocID: "a1", NodeID: "n2", Step: api.CSIClaimTaken}},
				PastClaims: []*api.CSIVolumeClaim{{AllocID: "a2", NodeID: "n1", Step: api.CSIClaimFreed}}}},
			mounts: []csiMount{{Client: 1, Volume: "sw1", Point: "/s"}, {Client: 1, Volume: "sw1", Alloc: "a1", Point: "/p"}},
			tasks:  map[string][]int{"a1": {100}},
		}
	}
	must.SliceEmpty(t, checkEndState(ok(), nodes))

	st := ok()
	st.tasks["a2"] = []int{200}
	must.Eq(t, []string{"check 2: task processes [200] of alloc a2 run, and the servers hold it client status complete"}, checkEndState(st, nodes))

	st = ok()
	st.volumes[0].PastClaims[0].Step = api.CSIClaimNodeDetached
	found := checkEndState(st, nodes)
	must.Len(t, 1, found)
	must.StrContains(t, found[0], "check 3: volume sw1: past claim of terminal alloc a2 at step node-detached")

	st = ok()
	st.allocs["a1"].ClientStatus = api.AllocClientStatusFailed
	found = checkEndState(st, nodes)
	must.SliceContainsFunc(t, found, "check 3", func(s, _ string) bool { return strings.HasPrefix(s, "check 3: volume sw1: claim of terminal alloc a1") })

	st = ok()
	st.mounts = append(st.mounts, csiMount{Client: 0, Volume: "sw1", Alloc: "a2", Point: "/leak"})
	must.Eq(t, []string{`check 4: c1 has a mount of volume sw1 (alloc "a2") no live claim of a live alloc explains: /leak`}, checkEndState(st, nodes))

	st = ok()
	st.allocs["a3"] = &api.AllocationListStub{ID: "a3", JobID: "w2", DesiredStatus: api.AllocDesiredStatusRun, ClientStatus: api.AllocClientStatusPending}
	found = checkEndState(st, nodes)
	must.Len(t, 1, found)
	must.StrContains(t, found[0], "check 5: alloc a3 of job w2")

	st = ok()
	st.mounts = st.mounts[:1]
	must.Eq(t, []string{`check 4: c2 lacks the mount of volume sw1 (alloc "a1") a live claim of a live alloc needs`}, checkEndState(st, nodes))
}

// TestChaosCheckMockWriters: check 1 from the mock-driver's logs reports
// a single-node-writer volume published on a second node before the first
// unpublished it, and not a clean hand-over, another volume, or a failed
// publish.
func TestChaosCheckMockWriters(t *testing.T) {
	line := func(at, method, vol, target, err string) string {
		return fmt.Sprintf(`I%s   4242 interceptor.go:32] gRPCCall: {"Method":"/csi.v1.Node/%s","Request":{"volume_id":%q,"target_path":%q},"Response":{},"Error":%q}`, at, method, vol, target, err)
	}
	c1 := strings.Join([]string{
		line("1126 04:00:01.000000", "NodePublishVolume", "1", "/c1/a1", ""),
		line("1126 04:00:03.000000", "NodeUnpublishVolume", "1", "/c1/a1", ""),
	}, "\n")
	c2 := strings.Join([]string{
		line("1126 04:00:02.000000", "NodePublishVolume", "1", "/c2/a2", "rpc error: code = Unavailable"),
		line("1126 04:00:02.500000", "NodePublishVolume", "2", "/c2/a9", ""),
		line("1126 04:00:04.000000", "NodePublishVolume", "1", "/c2/a2", ""),
	}, "\n")
	events := append(parseMockLog(0, c1), parseMockLog(1, c2)...)
	must.Len(t, 4, events)
	must.SliceEmpty(t, checkMockWriters(events, "1"))

	// c2's publish lands before c1's unpublish: two writers.
	c2 = line("1126 04:00:02.000000", "NodePublishVolume", "1", "/c2/a2", "")
	found := checkMockWriters(append(parseMockLog(0, c1), parseMockLog(1, c2)...), "1")
	must.Eq(t, []string{"check 1: mock-driver volume 1 published on c2 at 1126 04:00:02.000000 (/c2/a2) while still published on c1 ([/c1/a1])"}, found)
}

// TestChaosSamplerSeesARealDoubleMount: check 1's sampler, reading the
// real /proc/self/mountinfo, reports a single-node-writer volume bind
// mounted below two clients' data dirs, and nothing while it is below one.
func TestChaosSamplerSeesARealDoubleMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root")
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	must.NoError(t, err)
	src := filepath.Join(root, "volumes", "sw1")
	c1 := &Agent{DataDir: filepath.Join(root, "c1")}
	c2 := &Agent{DataDir: filepath.Join(root, "c2")}
	targets := []string{
		filepath.Join(c1.DataDir, "client", "csi", "hostpath", "per-alloc", "a1", "sw1", "rw-file-system-single-node-writer"),
		filepath.Join(c2.DataDir, "client", "csi", "hostpath", "staging", "default", "sw1", "rw-file-system-single-node-writer"),
	}
	for _, d := range append([]string{src}, targets...) {
		must.NoError(t, os.MkdirAll(d, 0o755))
	}
	t.Cleanup(func() {
		for _, tg := range targets {
			_ = unix.Unmount(tg, unix.MNT_DETACH)
		}
	})
	s := startWriterSampler([]*Agent{c1, c2})
	defer s.stop()

	must.NoError(t, unix.Mount(src, targets[0], "", unix.MS_BIND, ""))
	// Some readings with the volume on c1 alone, none reported.
	from := s.samples()
	waitFor(t, 30*time.Second, "the sampler to read mountinfo 3 more times", func() (bool, error) { return s.samples() >= from+3, nil })
	s.lock.Lock()
	must.SliceEmpty(t, s.violations)
	s.lock.Unlock()

	must.NoError(t, unix.Mount(src, targets[1], "", unix.MS_BIND, ""))
	waitFor(t, 30*time.Second, "the sampler to report sw1 on two nodes", func() (bool, error) {
		s.lock.Lock()
		defer s.lock.Unlock()
		return len(s.violations) > 0, nil
	})
	found := s.stop()
	must.Len(t, 1, found)
	must.StrContains(t, found[0], "check 1: single-node-writer volume sw1 mounted on 2 nodes at once: c1: "+targets[0]+"; c2: "+targets[1])
}

// TestChaosCheckUnpublishedWhileRunning: check 2's continuous form reports
// a publish mount gone while its alloc's task runs, and not one gone after
// the task exited, nor a staging mount, nor a mount that stays.
func TestChaosCheckUnpublishedWhileRunning(t *testing.T) {
	prev := []csiMount{
		{Client: 0, Volume: "sw1", Point: "/c1/staging/sw1"},
		{Client: 0, Volume: "sw1", Alloc: "a1", Point: "/c1/per-alloc/a1/sw1"},
		{Client: 1, Volume: "ro1", Alloc: "a2", Point: "/c2/per-alloc/a2/ro1"},
		{Client: 1, Volume: "sw2", Alloc: "a3", Point: "/c2/per-alloc/a3/sw2"},
	}
	cur := []csiMount{prev[3]}
	running := map[string][]int{"a2": {42}, "a3": {43}}
	var asked []string
	found := unpublishedWhileRunning(prev, cur, func(id string) []int { asked = append(asked, id); return running[id] })
	must.Eq(t, []string{"a1", "a2"}, asked)
	must.Eq(t, []string{"check 2: c2's publish mount of volume ro1 for alloc a2 went while its task processes [42] run: /c2/per-alloc/a2/ro1"}, found)
}

// TestChaosSamplerSeesAnUnpublishUnderARunningTask: check 2's continuous
// form, on a real bind mount and a real process carrying an alloc's task
// env, reports the mount going while the process runs.
func TestChaosSamplerSeesAnUnpublishUnderARunningTask(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root")
	}
	root, err := filepath.EvalSymlinks(t.TempDir())
	must.NoError(t, err)
	allocID := fmt.Sprintf("chaos-test-%d", os.Getpid())
	src := filepath.Join(root, "volumes", "sw1")
	c1 := &Agent{DataDir: filepath.Join(root, "c1")}
	target := filepath.Join(c1.DataDir, "client", "csi", "hostpath", "per-alloc", allocID, "sw1", "rw-file-system-single-node-writer")
	must.NoError(t, os.MkdirAll(src, 0o755))
	must.NoError(t, os.MkdirAll(target, 0o755))
	must.NoError(t, unix.Mount(src, target, "", unix.MS_BIND, ""))
	t.Cleanup(func() { _ = unix.Unmount(target, unix.MNT_DETACH) })

	task := exec.Command("sleep", "60")
	task.Env = append(os.Environ(), "NOMAD_ALLOC_ID="+allocID, "NOMAD_TASK_NAME="+WorkloadTask)
	must.NoError(t, task.Start())
	t.Cleanup(func() { _ = task.Process.Kill(); _ = task.Wait() })

	s := startWriterSampler([]*Agent{c1})
	defer s.stop()
	from := s.samples()
	waitFor(t, 30*time.Second, "the sampler to read the mount", func() (bool, error) { return s.samples() >= from+2, nil })
	must.NoError(t, unix.Unmount(target, 0))
	waitFor(t, 30*time.Second, "the sampler to report the unpublish under a running task", func() (bool, error) {
		s.lock.Lock()
		defer s.lock.Unlock()
		return len(s.violations) > 0, nil
	})
	found := s.stop()
	must.Len(t, 1, found)
	must.StrContains(t, found[0], fmt.Sprintf("check 2: c1's publish mount of volume sw1 for alloc %s went while its task processes [%d] run", allocID, task.Process.Pid))
}
