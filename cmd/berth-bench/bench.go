package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/helper/steptrace"
)

// Deadlines of the steps that wait on the agent.
const (
	pluginHealthyTimeout = 2 * time.Minute
	oneAllocTimeout      = 2 * time.Minute
	manyAllocsTimeout    = 10 * time.Minute
	// blockingWait is the longest one blocking query waits.
	blockingWait = 5 * time.Second
)

// bench is one run: the temp dir, the agent in it, and what later steps
// need of earlier ones.
type bench struct {
	cfg   config
	out   io.Writer // progress lines
	dir   string
	agent *agent // nil until started
	sock  string // host path of the plugin's socket

	// walP50 is the raft-wal floor's p50; fixed is the fixed cost of one
	// claim step (WAL append + gRPC call + bind-mount pair); regFloorP50
	// is the bare register's p50 (bare.go). 0 when not measured.
	walP50, fixed, regFloorP50 time.Duration
	// steps is the step breakdown the claim rows add to.
	steps []stepRow
}

// newBench makes the temp dir everything of the run lives in. Its path is
// resolved (mountinfo shows real paths) and short: the plugin's socket
// lives under it and a unix socket path has at most 107 bytes.
func newBench(cfg config, progress io.Writer) (*bench, error) {
	dir, err := os.MkdirTemp("", "berth-bench-")
	if err != nil {
		return nil, fmt.Errorf("making the temp dir: %w", err)
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	return &bench{cfg: cfg, out: progress, dir: dir}, nil
}

func (b *bench) progress(format string, args ...any) {
	fmt.Fprintf(b.out, "berth-bench: "+format+"\n", args...)
}

// run starts the agent and the plugin, then measures the floors and the
// rows. A row that fails is reported in the table and the others still
// run; an interrupt or a failed setup ends the run with an error, an agent
// that exits ends it with the rows so far and a note.
func (b *bench) run(ctx context.Context) (*results, error) {
	res := &results{Started: time.Now(), CPUs: runtime.NumCPU(), LoadBefore: loadavg()}
	b.progress("starting the agent (Raft on disk in %s)...", b.dir)
	a, err := startAgent(ctx, b.cfg.berth, b.dir)
	b.agent = a
	if err != nil {
		return nil, err
	}
	res.DataDir, res.FSType = a.dataDir, fsType(a.dataDir)
	if res.FSType == "tmpfs" {
		b.progress("warning: %s is on tmpfs: fsync costs nothing there, so 'Raft on disk' is not", a.dataDir)
	}
	b.progress("starting the hostpath plugin job and waiting until it is healthy...")
	start := time.Now()
	if b.sock, err = b.startPlugin(ctx); err != nil {
		return nil, err
	}
	b.progress("the plugin was healthy %s after its job was submitted", fmtDur(time.Since(start)))
	// Floors first, on the idle agent; the rows after them use them.
	steps := []func(context.Context) []row{b.floorRows, b.registerRows, b.oneAllocRows, b.manyRows, b.batchRows, b.jobRows, b.failoverRows, b.restartRows}
	for _, step := range steps {
		rows := step(ctx)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		res.Rows = append(res.Rows, rows...)
		res.Steps = b.steps
		select {
		case <-b.agent.done:
			res.Notes = append(res.Notes, fmt.Sprintf("the agent exited during the run (%v); the last lines of its log:\n%s",
				b.agent.waitErr, b.agent.logTail(20)))
			res.LoadAfter = loadavg()
			return res, nil
		default:
		}
	}
	res.LoadAfter = loadavg()
	return res, nil
}

// walIdlePause is how long the WAL sits idle before each append of the
// idle floor: about a lone register's time outside its own append.
const walIdlePause = 500 * time.Microsecond

// floorRows measures the floors and keeps what later rows need.
func (b *bench) floorRows(ctx context.Context) []row {
	n := b.cfg.floorN
	b.progress("floor: %d raft-wal appends...", n)
	wal, walErr := floorWAL(ctx, filepath.Join(b.dir, "wal-floor"), n, 0)
	b.progress("floor: %d raft-wal appends, each after %s idle...", n, walIdlePause)
	walIdle, walIdleErr := floorWAL(ctx, filepath.Join(b.dir, "wal-floor-idle"), n, walIdlePause)
	b.progress("floor: %d registers to a bare net/http server that appends to a raft-wal...", n)
	regDir := filepath.Join(b.dir, "register-floor")
	reg, regTimes, regErr := floorRegister(ctx, regDir, n)
	b.progress("floor: %d CSI Probe calls to the plugin's unix socket...", n)
	rpc, rpcErr := floorGRPC(ctx, b.sock, n)
	b.progress("floor: %d bind mount + umount pairs...", n)
	mnt, mntErr := floorMount(ctx, filepath.Join(b.dir, "mount-floor"), n)
	if walErr == nil {
		b.walP50 = summarize(wal).P50
	}
	if regErr == nil {
		b.regFloorP50 = summarize(reg).P50
		// Its legs beside the agent's register legs: which µs are Berth's.
		if tr, err := readTrace(filepath.Join(regDir, bareTraceName)); err == nil {
			b.steps = append(b.steps, breakdownOf("register to the bare server (floor)", bareRegisterPath, registerMarks(regTimes, tr))...)
		}
	}
	if walErr == nil && rpcErr == nil && mntErr == nil {
		b.fixed = b.walP50 + summarize(rpc).P50 + summarize(mnt).P50
	}
	return []row{
		samplesRow(rowFloorWAL, "floor: raft-wal append (write+fsync)", kindFloor, 0, wal, 0, walErr),
		samplesRow(rowFloorWALIdle, fmt.Sprintf("floor: raft-wal append after %s idle", walIdlePause), kindFloor, 0, walIdle, 0, walIdleErr),
		samplesRow(rowFloorRegister, "floor: register to a bare HTTP server + raft-wal append", kindFloor, 0, reg, 0, regErr),
		samplesRow(rowFloorGRPC, "floor: gRPC call on a unix socket (Probe)", kindFloor, 0, rpc, 0, rpcErr),
		samplesRow(rowFloorMount, "floor: bind mount + umount pair", kindFloor, 0, mnt, 0, mntErr),
	}
}

// registerRows registers the volumes one by one, then lists exactly them.
func (b *bench) registerRows(ctx context.Context) []row {
	n := b.cfg.registers
	b.progress("registering %d volumes one by one...", n)
	regs, total, times, err := b.registerVolumes(ctx)
	if err == nil {
		if tr, terr := readTrace(b.agent.tracePath); terr == nil {
			b.steps = append(b.steps, breakdownOf("register, 1 volume", registerPath, registerMarks(times, tr))...)
		}
	}
	rows := []row{
		samplesRow(rowRegister, "volume register (HTTP → Raft on disk)", kindLatency, n, regs, cmp.Or(b.regFloorP50, b.walP50), err),
		{ID: rowRegisterTotal, Name: fmt.Sprintf("%d sequential registers", n), Kind: kindTotal,
			Sum: summary{N: n}, Total: total, Floor: time.Duration(n) * cmp.Or(b.regFloorP50, b.walP50), Size: n, Err: err},
	}
	listName := fmt.Sprintf("volume list (%d volumes)", n)
	if err != nil {
		return append(rows, row{ID: rowList, Name: listName, Size: n, Err: errors.New("skipped: the registers failed")})
	}
	b.progress("listing %d volumes %d times...", n, b.cfg.lists)
	lists, err := b.listVolumes(ctx)
	return append(rows, samplesRow(rowList, listName, kindLatency, n, lists, 0, err))
}

// oneAllocRows runs the one-alloc job cfg.claims times, and adds the
// median of each leg of its claim and stop paths to the step breakdown.
func (b *bench) oneAllocRows(ctx context.Context) []row {
	b.progress("one alloc, %d times: claim → published, then stop → claim freed...", b.cfg.claims)
	meter := cpuMeter{agentPID: b.agent.cmd.Process.Pid, pluginPID: pluginPID(filepath.Join(b.dir, "hostpath"))}
	agent0, plugin0, cpuErr := meter.sample()
	pub, freed, runs, err := b.measureOneAlloc(ctx)
	agent1, plugin1, cpuErr1 := meter.sample()
	cpuErr = errors.Join(err, cpuErr, cpuErr1)
	agentCPU := row{ID: rowCPUAgent, Name: "agent CPU per claim cycle, 1 alloc (server + client + the bench's API calls)", Kind: kindTotal, Size: 1, Err: cpuErr}
	pluginCPU := row{ID: rowCPUPlugin, Name: "plugin CPU per claim cycle, 1 alloc", Kind: kindTotal, Size: 1, Err: cpuErr}
	if cpuErr == nil && meter.pluginPID == 0 {
		pluginCPU.Err = errors.New("the plugin process was not found")
	}
	if n := time.Duration(len(runs)); n > 0 {
		agentCPU.Total, pluginCPU.Total = (agent1-agent0)/n, (plugin1-plugin0)/n
	}
	var exitFreed []time.Duration
	exitErr := err
	if err == nil {
		tr, terr := readTrace(b.agent.tracePath)
		exitErr = terr
		for _, a := range runs {
			exited := exitedAt(a, tr)
			if exited.IsZero() {
				exitErr = fmt.Errorf("alloc %s: no time of its task's exit (no trace mark, no Terminated event)", a.ID)
				break
			}
			exitFreed = append(exitFreed, a.Freed.Sub(exited))
		}
		b.steps = append(b.steps, breakdown("claim path, 1 alloc", claimPath, runs, tr)...)
		b.steps = append(b.steps, breakdown("stop path, 1 alloc", stopPath, runs, tr)...)
	}
	return []row{
		samplesRow(rowClaimOne, "claim → NodePublish done, 1 alloc", kindLatency, 1, pub, b.fixed, err),
		samplesRow(rowStopOne, "stop → claim freed, 1 alloc", kindLatency, 1, freed, b.fixed, err),
		samplesRow(rowExitFreedOne, "task exited → claim freed, 1 alloc", kindLatency, 1, exitFreed, 0, exitErr),
		agentCPU, pluginCPU,
	}
}

// exitedAt is when an alloc's task exited: the trace's mark when the
// client wrote one, else its Terminated event (a little later: after the
// driver released the task).
func exitedAt(a allocTimes, tr traceMarks) time.Time {
	if t, ok := tr[a.ID][steptrace.TaskExited]; ok {
		return t
	}
	return a.Exited
}

// manyRows starts and stops a job of m allocs for each m of cfg.many, one
// job after the other (none when the list is empty).
func (b *bench) manyRows(ctx context.Context) []row {
	var rows []row
	for _, m := range b.cfg.many {
		b.progress("%d allocs with a volume each: start them, then stop → claims freed...", m)
		pub, freed, total, runs, err := b.measureMany(ctx, m)
		if err == nil {
			if tr, terr := readTrace(b.agent.tracePath); terr == nil {
				slowPub, slowFreed := slowest(runs)
				b.steps = append(b.steps, breakdown(fmt.Sprintf("claim path, slowest publish of %d", m), claimPath, slowPub, tr)...)
				b.steps = append(b.steps, breakdown(fmt.Sprintf("stop path, last freed of %d", m), stopPath, slowFreed, tr)...)
			}
		}
		stop := samplesRow(rowStopMany, fmt.Sprintf("stop → claims freed, %d allocs", m), kindTotal, m, freed, 0, err)
		stop.Total = total
		rows = append(rows,
			samplesRow(rowClaimMany, fmt.Sprintf("claim → NodePublish done, %d allocs", m), kindLatency, m, pub, 0, err),
			stop)
		if ctx.Err() != nil {
			break
		}
	}
	return rows
}

// batchRows registers cfg.batch new volumes in one request, cfg.batches
// times (none with 0). It runs after the claim rows, so that the volumes
// it adds do not change what those measure.
func (b *bench) batchRows(ctx context.Context) []row {
	if b.cfg.batches == 0 {
		return nil
	}
	n := b.cfg.batch
	b.progress("registering %d volumes in one request, %d times...", n, b.cfg.batches)
	samples, times, err := b.registerBatches(ctx)
	if err == nil {
		if tr, terr := readTrace(b.agent.tracePath); terr == nil {
			b.steps = append(b.steps, breakdownOf(fmt.Sprintf("register, %d volumes in one request", b.cfg.batch), registerPath, registerMarks(times, tr))...)
		}
	}
	return []row{samplesRow(rowRegisterBatch, fmt.Sprintf("%d volumes in one register request", n), kindLatency, n, samples, 0, err)}
}

// jobRows runs the job of two exec allocs cfg.jobRuns times (none with 0).
func (b *bench) jobRows(ctx context.Context) []row {
	if b.cfg.jobRuns == 0 {
		return nil
	}
	b.progress("a job of %d exec allocs, %d times: submit → all running...", jobAllocs, b.cfg.jobRuns)
	samples, err := b.measureJobRuns(ctx)
	return []row{samplesRow(rowJobRunning, fmt.Sprintf("job submit → %d exec allocs running", jobAllocs), kindLatency, jobAllocs, samples, 0, err)}
}

// samplesRow builds a row of the given size from samples, or a failed row.
func samplesRow(id, name string, kind rowKind, size int, samples []time.Duration, floor time.Duration, err error) row {
	x := row{ID: id, Name: name, Kind: kind, Size: size, Floor: floor, Err: err}
	if err == nil {
		x.Sum = summarize(samples)
	}
	return x
}

// Names of the jobs, volumes and tasks the bench makes.
const (
	pluginJobID = "bench-hostpath"
	pluginID    = "hostpath"
	claimJobID  = "bench-claim"
	claimVolume = "bench-claim"
	// manyName is the prefix of the big jobs and their volumes: the job of
	// m allocs is bench-many-m, and per_alloc gives its alloc i the volume
	// bench-many-m[i] (see manyNames).
	manyName    = "bench-many"
	regPrefix   = "bench-reg-"
	batchPrefix = "bench-batch-"
	runJobID    = "bench-run"
	jobAllocs   = 2 // allocs of the runs' job
	workTask    = "work"
)

// startPlugin runs the hostpath plugin as a system job (node mode, its
// root in the temp dir, this berth binary as its command), waits until it
// is healthy on the node, and returns the host path of its socket.
func (b *bench) startPlugin(ctx context.Context) (string, error) {
	c := b.agent.api
	root := filepath.Join(b.dir, "hostpath")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return "", err
	}
	if _, _, err := c.Jobs().Register(pluginJob(b.cfg.berth, root, b.agent.nodeID), writeOpts(ctx)); err != nil {
		return "", fmt.Errorf("registering the plugin job: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, pluginHealthyTimeout)
	defer cancel()
	err := poll(wctx, b.agent.done, func() (bool, error) {
		allocs, _, err := c.Jobs().Allocations(pluginJobID, false, queryOpts(wctx))
		if err != nil {
			return false, err
		}
		for _, a := range allocs {
			if a.ClientStatus == api.AllocClientStatusFailed || a.ClientStatus == api.AllocClientStatusLost {
				return false, errors.New(describeAlloc(a, "plugin"))
			}
		}
		p, _, err := c.CSIPlugins().Info(pluginID, queryOpts(wctx))
		if err != nil {
			return false, fmt.Errorf("plugin %q not fingerprinted yet (%v)", pluginID, err)
		}
		return p.NodesHealthy >= 1, fmt.Errorf("plugin %q has %d healthy nodes", pluginID, p.NodesHealthy)
	})
	if err != nil {
		return "", fmt.Errorf("waiting for the hostpath plugin (agent log %s):\n%s\n%w", b.agent.logPath, b.agent.logTail(20), err)
	}
	// The plugin supervisor's socket: <data_dir>/client/csi/p/<alloc>-<task>/csi.sock.
	socks, err := filepath.Glob(filepath.Join(b.agent.dataDir, "client", "csi", "p", "*", "csi.sock"))
	if err != nil || len(socks) != 1 {
		return "", fmt.Errorf("finding the plugin's socket under %s: found %d (%v)", b.agent.dataDir, len(socks), err)
	}
	return socks[0], nil
}

// registerVolumes registers cfg.registers new volumes one by one and
// returns each call's latency and the wall time of all of them.
func (b *bench) registerVolumes(ctx context.Context) ([]time.Duration, time.Duration, map[string][2]time.Time, error) {
	c := b.agent.api
	n := b.cfg.registers
	samples := make([]time.Duration, 0, n)
	times := make(map[string][2]time.Time, n) // volume ID → sent, returned
	vols := make([]*api.CSIVolume, n)
	for i := range vols {
		vols[i] = benchVolume(fmt.Sprintf("%s%04d", regPrefix, i))
	}
	start := time.Now()
	for _, v := range vols {
		t := time.Now()
		if _, err := c.CSIVolumes().Register(v, writeOpts(ctx)); err != nil {
			return nil, 0, nil, fmt.Errorf("registering volume %s: %w", v.ID, err)
		}
		done := time.Now()
		samples = append(samples, done.Sub(t))
		times[v.ID] = [2]time.Time{t, done}
	}
	return samples, time.Since(start), times, nil
}

// registerBatches registers cfg.batches requests of cfg.batch new
// volumes each and returns each request's latency. Each answer must hold
// every volume of its request.
func (b *bench) registerBatches(ctx context.Context) ([]time.Duration, map[string][2]time.Time, error) {
	c := b.agent.api
	samples := make([]time.Duration, 0, b.cfg.batches)
	times := make(map[string][2]time.Time, b.cfg.batches) // first volume's ID → sent, returned
	for round := range b.cfg.batches {
		vols := make([]*api.CSIVolume, b.cfg.batch)
		for i := range vols {
			vols[i] = benchVolume(fmt.Sprintf("%s%d-%04d", batchPrefix, round, i))
		}
		t := time.Now()
		resp, _, err := c.CSIVolumes().RegisterOpts(&api.CSIVolumeRegisterRequest{Volumes: vols}, writeOpts(ctx))
		done := time.Now()
		if err != nil {
			return nil, nil, fmt.Errorf("registering %d volumes in one request (round %d): %w", len(vols), round+1, err)
		}
		if len(resp.Volumes) != len(vols) {
			return nil, nil, fmt.Errorf("registering %d volumes in one request: the answer holds %d", len(vols), len(resp.Volumes))
		}
		samples = append(samples, done.Sub(t))
		times[vols[0].ID] = [2]time.Time{t, done}
	}
	return samples, times, nil
}

// measureJobRuns submits a job of jobAllocs exec tasks without volumes
// cfg.jobRuns times and returns, for each run, the time from the submit
// call to a blocking query seeing every task running (the bench's clock:
// what a user who submits and watches sees). Each run's job is stopped and
// its tasks dead before the next.
func (b *bench) measureJobRuns(ctx context.Context) ([]time.Duration, error) {
	c := b.agent.api
	var samples []time.Duration
	for i := range b.cfg.jobRuns {
		job := workJob(runJobID, "", jobAllocs, false)
		job.TaskGroups[0].Volumes = nil
		job.TaskGroups[0].Tasks[0].VolumeMounts = nil
		start := time.Now()
		if _, _, err := c.Jobs().Register(job, writeOpts(ctx)); err != nil {
			return nil, fmt.Errorf("run %d: registering job %s: %w", i+1, runJobID, err)
		}
		if err := b.waitTasks(ctx, runJobID, jobAllocs, api.TaskStateRunning, oneAllocTimeout); err != nil {
			return nil, fmt.Errorf("run %d: %w", i+1, err)
		}
		samples = append(samples, time.Since(start))
		if _, _, err := c.Jobs().Deregister(runJobID, false, writeOpts(ctx)); err != nil {
			return nil, fmt.Errorf("run %d: stopping job %s: %w", i+1, runJobID, err)
		}
		if err := b.waitTasks(ctx, runJobID, jobAllocs, api.TaskStateDead, oneAllocTimeout); err != nil {
			return nil, fmt.Errorf("run %d: %w", i+1, err)
		}
		if _, _, err := c.Jobs().Deregister(runJobID, true, writeOpts(ctx)); err != nil {
			return nil, fmt.Errorf("run %d: purging job %s: %w", i+1, runJobID, err)
		}
	}
	return samples, nil
}

// waitTasks waits, with blocking queries on the job's allocs, until count
// of them have their task in the given state. An alloc that fails while
// waiting for running ends the wait with its story.
func (b *bench) waitTasks(ctx context.Context, jobID string, count int, state string, timeout time.Duration) error {
	return waitTasks(ctx, b.agent.api, jobID, count, state, timeout)
}

// waitTasks is bench.waitTasks through the agent of c.
func waitTasks(ctx context.Context, c *api.Client, jobID string, count int, state string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var index uint64
	for {
		q := &api.QueryOptions{WaitIndex: index, WaitTime: blockingWait}
		allocs, qm, err := c.Jobs().Allocations(jobID, false, q.WithContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("waiting for %d tasks of job %s to be %s: %w", count, jobID, state, ctx.Err())
			}
			return fmt.Errorf("listing the allocs of job %s: %w", jobID, err)
		}
		index = qm.LastIndex
		n := 0
		for _, a := range allocs {
			if state == api.TaskStateRunning && (a.ClientStatus == api.AllocClientStatusFailed || a.ClientStatus == api.AllocClientStatusLost) {
				return errors.New(describeAlloc(a, workTask))
			}
			if st := a.TaskStates[workTask]; st != nil && st.State == state {
				n++
			}
		}
		if n >= count {
			return nil
		}
	}
}

// listVolumes lists all volumes cfg.lists times; there must be exactly the
// registered ones.
func (b *bench) listVolumes(ctx context.Context) ([]time.Duration, error) {
	c := b.agent.api
	samples := make([]time.Duration, 0, b.cfg.lists)
	for range b.cfg.lists {
		t := time.Now()
		vols, _, err := c.CSIVolumes().List(queryOpts(ctx))
		d := time.Since(t)
		if err != nil {
			return nil, fmt.Errorf("listing volumes: %w", err)
		}
		if len(vols) != b.cfg.registers {
			return nil, fmt.Errorf("the list has %d volumes, want the %d registered", len(vols), b.cfg.registers)
		}
		samples = append(samples, d)
	}
	return samples, nil
}

// measureOneAlloc runs the one-alloc job cfg.claims times and returns the
// claim → published and stop → freed latencies of each run.
func (b *bench) measureOneAlloc(ctx context.Context) (pub, freed []time.Duration, runs []allocTimes, err error) {
	if _, err := b.agent.api.CSIVolumes().Register(benchVolume(claimVolume), writeOpts(ctx)); err != nil {
		return nil, nil, nil, fmt.Errorf("registering volume %s: %w", claimVolume, err)
	}
	for i := range b.cfg.claims {
		at, err := b.oneAllocRun(ctx)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("run %d of %d: %w", i+1, b.cfg.claims, err)
		}
		pub, freed = append(pub, at.Mounted.Sub(at.Created)), append(freed, at.Freed.Sub(at.Stopped))
		runs = append(runs, at)
	}
	return pub, freed, runs, nil
}

// oneAllocRun is one run: register the job, wait for the mount and the
// running task, stop it, wait for the claim to be freed, read when the
// task exited, purge the job.
func (b *bench) oneAllocRun(ctx context.Context) (allocTimes, error) {
	c := b.agent.api
	var at allocTimes
	if _, _, err := c.Jobs().Register(workJob(claimJobID, claimVolume, 1, false), writeOpts(ctx)); err != nil {
		return at, fmt.Errorf("registering job %s: %w", claimJobID, err)
	}
	mounted, err := b.waitRunning(ctx, claimJobID, 1, oneAllocTimeout)
	if err != nil {
		return at, err
	}
	created, err := b.claimTimes(ctx, claimVolume)
	if err != nil {
		return at, err
	}
	for allocID, m := range mounted {
		ct, ok := created[allocID]
		if !ok {
			return at, fmt.Errorf("volume %s has no claim of alloc %s, whose task reported it mounted", claimVolume, allocID)
		}
		at.ID, at.Created, at.Mounted = allocID, ct, m
	}

	if _, _, err := c.Jobs().Deregister(claimJobID, false, writeOpts(ctx)); err != nil {
		return at, fmt.Errorf("stopping job %s: %w", claimJobID, err)
	}
	at.Stopped = time.Now()
	freedAt, err := b.waitFreed(ctx, claimVolume, 1, oneAllocTimeout)
	if err != nil {
		return at, err
	}
	at.Freed = freedAt[claimVolume]
	if at.Exited, err = b.terminatedAt(ctx, at.ID); err != nil {
		return at, err
	}
	if _, _, err := c.Jobs().Deregister(claimJobID, true, writeOpts(ctx)); err != nil {
		return at, fmt.Errorf("purging job %s: %w", claimJobID, err)
	}
	return at, nil
}

// terminatedAt waits, with blocking queries, until the servers have the
// work task dead (the client sends task states in batches, so they may
// learn of it after the claim was freed) and returns the time of its
// Terminated event, zero when it has none.
func (b *bench) terminatedAt(ctx context.Context, allocID string) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, oneAllocTimeout)
	defer cancel()
	var index uint64
	for {
		q := &api.QueryOptions{WaitIndex: index, WaitTime: blockingWait}
		a, qm, err := b.agent.api.Allocations().Info(allocID, q.WithContext(ctx))
		if err != nil {
			return time.Time{}, fmt.Errorf("waiting for the task of alloc %s to be dead: %w", allocID, err)
		}
		index = qm.LastIndex
		st := a.TaskStates[workTask]
		if st == nil || st.State != api.TaskStateDead {
			continue
		}
		for _, e := range st.Events {
			if e != nil && e.Type == taskTerminatedEvent {
				return time.Unix(0, e.Time), nil
			}
		}
		return time.Time{}, nil
	}
}

// slowest returns the alloc that published last after its claim and the
// one whose claim was freed last after the stop, each as a list of one
// (none of an empty list). It is pure.
func slowest(runs []allocTimes) (pub, freed []allocTimes) {
	for _, a := range runs {
		if len(pub) == 0 || a.Mounted.Sub(a.Created) > pub[0].Mounted.Sub(pub[0].Created) {
			pub = []allocTimes{a}
		}
		if len(freed) == 0 || a.Freed.Sub(a.Stopped) > freed[0].Freed.Sub(freed[0].Stopped) {
			freed = []allocTimes{a}
		}
	}
	return pub, freed
}

// manyNames returns the job ID and the per_alloc volume name of the job of
// m allocs; each size has its own, so that one run can measure several.
func manyNames(m int) (jobID, volume string) {
	name := fmt.Sprintf("%s-%d", manyName, m)
	return name, name
}

// measureMany starts one job of m allocs, each with its own volume, and
// returns each alloc's claim → published latency, then stops it and
// returns how long after the stop each volume's claim was freed, and when
// the last one was.
func (b *bench) measureMany(ctx context.Context, m int) (pub, freed []time.Duration, total time.Duration, runs []allocTimes, err error) {
	c := b.agent.api
	manyJobID, manyVolume := manyNames(m)
	for i := range m {
		id := fmt.Sprintf("%s[%d]", manyVolume, i)
		if _, err := c.CSIVolumes().Register(benchVolume(id), writeOpts(ctx)); err != nil {
			return nil, nil, 0, nil, fmt.Errorf("registering volume %s: %w", id, err)
		}
	}
	if _, _, err := c.Jobs().Register(workJob(manyJobID, manyVolume, m, true), writeOpts(ctx)); err != nil {
		return nil, nil, 0, nil, fmt.Errorf("registering job %s: %w", manyJobID, err)
	}
	mounted, err := b.waitRunning(ctx, manyJobID, m, manyAllocsTimeout)
	if err != nil {
		return nil, nil, 0, nil, err
	}
	for i := range m {
		id := fmt.Sprintf("%s[%d]", manyVolume, i)
		created, err := b.claimTimes(ctx, id)
		if err != nil {
			return nil, nil, 0, nil, err
		}
		for allocID, ct := range created {
			if at, ok := mounted[allocID]; ok {
				pub = append(pub, at.Sub(ct))
				runs = append(runs, allocTimes{ID: allocID, Created: ct, Mounted: at, Volume: id})
			}
		}
	}
	if len(pub) != m {
		return nil, nil, 0, nil, fmt.Errorf("matched %d of %d mounted allocs with their volume's claim", len(pub), m)
	}

	b.progress("all %d running with their volume mounted; stopping the job...", m)
	if _, _, err := c.Jobs().Deregister(manyJobID, false, writeOpts(ctx)); err != nil {
		return nil, nil, 0, nil, fmt.Errorf("stopping job %s: %w", manyJobID, err)
	}
	stopped := time.Now()
	freedAt, err := b.waitFreed(ctx, manyVolume+"[", m, manyAllocsTimeout)
	if err != nil {
		return nil, nil, 0, nil, err
	}
	for _, at := range freedAt {
		d := at.Sub(stopped)
		freed = append(freed, d)
		total = max(total, d)
	}
	for i := range runs {
		runs[i].Stopped, runs[i].Freed = stopped, freedAt[runs[i].Volume]
	}
	if _, _, err := c.Jobs().Deregister(manyJobID, true, writeOpts(ctx)); err != nil {
		return nil, nil, 0, nil, fmt.Errorf("purging job %s: %w", manyJobID, err)
	}
	return pub, freed, total, runs, nil
}

// waitRunning waits, with blocking queries on the job's allocs, until
// count allocs run their task, and returns when each reported its volume
// mounted (the task event's time). Stops are timed from a running task,
// not one still starting. An alloc that fails ends the wait with its
// story.
func (b *bench) waitRunning(ctx context.Context, jobID string, count int, timeout time.Duration) (map[string]time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := b.agent.api
	var index uint64
	for {
		q := &api.QueryOptions{WaitIndex: index, WaitTime: blockingWait}
		allocs, qm, err := c.Jobs().Allocations(jobID, false, q.WithContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("waiting for %d allocs of job %s to mount their volume and run: %w", count, jobID, ctx.Err())
			}
			return nil, fmt.Errorf("listing the allocs of job %s: %w", jobID, err)
		}
		index = qm.LastIndex
		out := map[string]time.Time{}
		for _, a := range allocs {
			if a.ClientStatus == api.AllocClientStatusFailed || a.ClientStatus == api.AllocClientStatusLost {
				return nil, errors.New(describeAlloc(a, workTask))
			}
			at, ok := mountedAt(a.TaskStates, workTask)
			if st := a.TaskStates[workTask]; ok && st != nil && st.State == api.TaskStateRunning {
				out[a.ID] = at
			}
		}
		if len(out) >= count {
			return out, nil
		}
	}
}

// claimTimes returns when each live claim on a volume was created (the
// leader's stamp at plan apply), by alloc ID.
func (b *bench) claimTimes(ctx context.Context, volID string) (map[string]time.Time, error) {
	vol, _, err := b.agent.api.CSIVolumes().Info(volID, queryOpts(ctx))
	if err != nil {
		return nil, fmt.Errorf("reading volume %s: %w", volID, err)
	}
	out := map[string]time.Time{}
	for _, cl := range vol.Claims {
		if cl != nil {
			out[cl.AllocID] = time.Unix(0, cl.CreateTime)
		}
	}
	return out, nil
}

// waitFreed waits, with blocking queries on the volume list, until count
// volumes whose ID starts with prefix have no live claim, and returns when
// each was first seen so, by volume ID.
func (b *bench) waitFreed(ctx context.Context, prefix string, count int, timeout time.Duration) (map[string]time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := b.agent.api
	freed := map[string]time.Time{}
	var index uint64
	for {
		q := &api.QueryOptions{Prefix: prefix, WaitIndex: index, WaitTime: blockingWait}
		vols, qm, err := c.CSIVolumes().List(q.WithContext(ctx))
		now := time.Now()
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("waiting for the claims on %d volumes %s* to be freed (%d are): %w", count, prefix, len(freed), ctx.Err())
			}
			return nil, fmt.Errorf("listing volumes %s*: %w", prefix, err)
		}
		index = qm.LastIndex
		for _, v := range vols {
			if _, seen := freed[v.ID]; !seen && v.Claims == 0 {
				freed[v.ID] = now
			}
		}
		if len(freed) >= count {
			return freed, nil
		}
	}
}

// loadavg returns the first three fields of /proc/loadavg.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// fsType names the file system path is on.
func fsType(path string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return "unknown file system"
	}
	switch uint32(st.Type) {
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlayfs"
	}
	return fmt.Sprintf("file system 0x%x", st.Type)
}

func writeOpts(ctx context.Context) *api.WriteOptions { return (&api.WriteOptions{}).WithContext(ctx) }
func queryOpts(ctx context.Context) *api.QueryOptions { return (&api.QueryOptions{}).WithContext(ctx) }
