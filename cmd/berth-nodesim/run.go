package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"time"

	metrics "github.com/hashicorp/go-metrics"
	"github.com/hashicorp/raft"

	"github.com/berth-io/berth/client"
	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/nomad/structs"
)

// volumeFamily is the per_alloc volume source: allocs claim
// volumeFamily[0], volumeFamily[1], ...
const volumeFamily = "simvol"

// result is what the table prints; zero fields were not reached.
type result struct {
	nodesStarted, nodesReady, nodesReadyAfterSettle, pluginHealthy int
	startTime, settle                                              time.Duration
	volumes                                                        int
	registerTime                                                   time.Duration
	placed, published                                              int
	placeTime, publishTime                                         time.Duration
	createToPublished, claimToPublished                            []time.Duration
	unpublished, freed                                             int
	freeTime, unpublishTime                                        time.Duration
	// From the first volume published to the last: the claims' own
	// rate, without the wait for the first plan (publishTime has it).
	publishWindow time.Duration
	rss           map[string]int64 // phase → bytes
	rssWhose      string
	heartbeatTTL  time.Duration
	// Raft entries written while the allocs were placed and claimed,
	// and while they were released (in-process server only).
	claimEntries, releaseEntries uint64
	// The same by kind ("plans 5, alloc updates 9,000, claims 310").
	claimEntryKinds, releaseEntryKinds string
	// CPU time used while the allocs were placed and claimed: this
	// process's (in-process: the server's too), and the server's with -pid.
	claimCPU, claimServerCPU time.Duration
	// Where the claim phase's time went on the server (in-process).
	claimTrace []sampleRow
}

// run runs the simulation. Teardown (stopping nodes and the server,
// removing the temporary dir) is left to the returned cleanup, so that the
// caller can print the table first; cleanup stops waiting once its ctx ends.
func run(ctx context.Context, o *options) (res *result, cleanup func(context.Context), err error) {
	res = &result{rss: map[string]int64{}}
	var teardown []func(context.Context)
	cleanup = func(ctx context.Context) {
		for _, f := range slices.Backward(teardown) {
			f(ctx)
		}
	}
	res, err = simulate(ctx, o, res, func(f func(context.Context)) { teardown = append(teardown, f) })
	return res, cleanup, err
}

func simulate(ctx context.Context, o *options, res *result, deferred func(func(context.Context))) (*result, error) {
	dir, err := os.MkdirTemp("", "nodesim")
	if err != nil {
		return res, err
	}
	deferred(func(context.Context) { os.RemoveAll(dir) })
	nodeDir := dir
	if o.clientDir != "" {
		if nodeDir, err = os.MkdirTemp(o.clientDir, "nodesim"); err != nil {
			return res, fmt.Errorf("-client-dir: %w", err)
		}
		deferred(func(context.Context) { os.RemoveAll(nodeDir) })
	}

	var rpc client.RPCer
	newRPC := func() client.RPCer { return newRemote(o.address) }
	raftIndex := func() uint64 { return 0 } // unknown for a server of another process
	entries := func() entryCounts { return entryCounts{} }
	sink := newSampleSink()
	rssPid := o.pid
	res.rssWhose = fmt.Sprintf("server (pid %d)", o.pid)
	if o.address == "" {
		s, err := startServer(ctx, o, filepath.Join(dir, "server"))
		if err != nil {
			return res, err
		}
		deferred(func(context.Context) { s.Shutdown() })
		rpc = inProcess{s}
		newRPC = func() client.RPCer { return inProcess{s} }
		raftIndex = func() uint64 {
			i, _ := strconv.ParseUint(s.Raft().Stats()["last_log_index"], 10, 64)
			return i
		}
		entries = func() entryCounts { return countEntries(s) }
		// The server's timings (go-metrics' global sink) are this
		// process's: keep the ones the table shows.
		cfg := metrics.DefaultConfig("berth")
		cfg.EnableHostname, cfg.EnableRuntimeMetrics, cfg.EnableServiceLabel = false, false, false
		cfg.ServiceName = ""
		if _, err := metrics.NewGlobal(cfg, sink); err != nil {
			return res, fmt.Errorf("installing the metrics sink: %w", err)
		}
		rssPid = os.Getpid()
		res.rssWhose = "this process (server and every simulated node)"
	} else {
		r := newRemote(o.address)
		deferred(func(context.Context) { r.Close() })
		rpc = r
	}
	if rssPid == 0 {
		res.rssWhose = ""
	}
	sample := func(phase string) {
		if rssPid != 0 {
			res.rss[phase] = readRSS(rssPid)
		}
	}
	sample("start")

	// Nodes.
	pubs := newPublishes()
	start := time.Now()
	nodes, err := startNodes(ctx, o, nodeDir, newRPC, pubs)
	deferred(func(ctx context.Context) { stopNodes(ctx, nodes) })
	res.nodesStarted = len(nodes)
	if err != nil {
		return res, err
	}
	err = waitFor(ctx, "every node ready and the plugin healthy on each", func() (bool, error) {
		ready, err := readyNodes(rpc)
		res.nodesReady = ready
		if err != nil {
			return false, err
		}
		var p structs.CSIPluginGetResponse
		if err := rpc.RPC("CSIPlugin.Get", &structs.CSIPluginGetRequest{ID: pluginID}, &p); err != nil {
			return false, err
		}
		if p.Plugin != nil {
			res.pluginHealthy = p.Plugin.NodesHealthy
		}
		return ready == o.nodes && res.pluginHealthy == o.nodes, nil
	})
	res.startTime = time.Since(start)
	if err != nil {
		return res, err
	}
	sample("nodes")
	o.progress.Info("every node ready", "nodes", o.nodes, "took", res.startTime)

	// Heartbeats: every node must stay ready for longer than a TTL.
	res.heartbeatTTL = heartbeatTTL(rpc, o)
	res.settle = o.settle
	if res.settle <= 0 {
		res.settle = res.heartbeatTTL * 3 / 2
	}
	settleEnd := time.Now().Add(res.settle)
	res.nodesReadyAfterSettle = o.nodes
	for time.Now().Before(settleEnd) {
		if !sleep(ctx, min(time.Second, time.Until(settleEnd))) {
			return res, ctx.Err()
		}
		ready, err := readyNodes(rpc)
		if err != nil {
			return res, err
		}
		res.nodesReadyAfterSettle = min(res.nodesReadyAfterSettle, ready)
	}
	if o.allocs == 0 {
		return res, nil
	}

	// Volumes, in batches.
	start = time.Now()
	for lo := 0; lo < o.allocs; lo += 500 {
		var vols []*structs.CSIVolume
		for i := lo; i < min(lo+500, o.allocs); i++ {
			id := fmt.Sprintf("%s[%d]", volumeFamily, i)
			vols = append(vols, &structs.CSIVolume{
				ID: id, Name: id, ExternalID: "ext-" + id, Namespace: structs.DefaultNamespace, PluginID: pluginID,
				RequestedCapabilities: []*structs.CSIVolumeCapability{{
					AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
				}},
			})
		}
		if err := retry(ctx, func() error {
			return rpc.RPC("CSIVolume.Register", &structs.CSIVolumeRegisterRequest{Volumes: vols}, &structs.CSIVolumeRegisterResponse{})
		}); err != nil {
			return res, fmt.Errorf("registering volumes: %w", err)
		}
		res.volumes += len(vols)
	}
	res.registerTime = time.Since(start)
	sample("volumes")
	o.progress.Info("volumes registered", "volumes", res.volumes, "took", res.registerTime)

	// The job: every alloc claims its own volume.
	job := simJob(o.allocs)
	startIndex, startEntries := raftIndex(), entries()
	startCPU := readCPU(os.Getpid())
	startServerCPU := readCPU(o.pid)
	sink.reset()
	stopProfile, err := startProfile(o.claimsProfile)
	if err != nil {
		return res, err
	}
	defer stopProfile()
	start = time.Now()
	if err := retry(ctx, func() error {
		return rpc.RPC("Job.Register", &structs.JobRegisterRequest{Job: job}, &structs.JobRegisterResponse{})
	}); err != nil {
		return res, fmt.Errorf("registering the job: %w", err)
	}
	var allocs []*structs.AllocListStub
	err = waitFor(ctx, "every alloc placed and its volume published", func() (bool, error) {
		if res.placed < o.allocs {
			var r structs.AllocListResponse
			if err := rpc.RPC("Job.Allocations", &structs.JobSpecificRequest{JobID: job.ID}, &r); err != nil {
				return false, err
			}
			if res.placed = len(r.Allocations); res.placed >= o.allocs {
				allocs = r.Allocations
				var last int64
				for _, a := range allocs {
					last = max(last, a.CreateTime)
				}
				res.placeTime = time.Unix(0, last).Sub(start)
			}
		}
		res.published, _ = pubs.counts()
		if res.published >= o.allocs && res.publishTime == 0 {
			first, last := pubs.span(true)
			res.publishTime = last.Sub(start)
			res.publishWindow = last.Sub(first)
		}
		return res.placed >= o.allocs && res.published >= o.allocs, nil
	})
	stopProfile()
	if err != nil {
		return res, err
	}
	sample("claims")
	res.claimCPU = readCPU(os.Getpid()) - startCPU
	if o.pid != 0 {
		res.claimServerCPU = readCPU(o.pid) - startServerCPU
	}
	if startIndex > 0 {
		res.claimEntries = raftIndex() - startIndex
		_, res.claimEntryKinds = entries().since(startEntries)
		res.claimTrace = sink.rows()
	}
	o.progress.Info("every alloc placed and published", "allocs", o.allocs, "took", res.publishTime)
	res.createToPublished, res.claimToPublished = latencies(rpc, allocs, pubs)

	// Stop: every volume unpublished and every claim freed.
	startIndex, startEntries = raftIndex(), entries()
	start = time.Now()
	if err := retry(ctx, func() error {
		return rpc.RPC("Job.Deregister", &structs.JobDeregisterRequest{JobID: job.ID, WriteRequest: structs.WriteRequest{Namespace: structs.DefaultNamespace}}, &structs.JobDeregisterResponse{})
	}); err != nil {
		return res, fmt.Errorf("stopping the job: %w", err)
	}
	err = waitFor(ctx, "every volume unpublished and its claim freed", func() (bool, error) {
		_, res.unpublished = pubs.counts()
		if res.unpublished < o.allocs {
			return false, nil
		}
		if res.unpublishTime == 0 {
			_, last := pubs.span(false)
			res.unpublishTime = last.Sub(start)
		}
		var r structs.CSIVolumeListResponse
		if err := rpc.RPC("CSIVolume.List", &structs.CSIVolumeListRequest{PluginID: pluginID}, &r); err != nil {
			return false, err
		}
		free := 0
		for _, v := range r.Volumes {
			if v.Claims == 0 && v.CurrentReaders+v.CurrentWriters == 0 {
				free++
			}
		}
		res.freed = free
		return free >= o.allocs, nil
	})
	res.freeTime = time.Since(start)
	if startIndex > 0 && err == nil {
		res.releaseEntries = raftIndex() - startIndex
		_, res.releaseEntryKinds = entries().since(startEntries)
	}
	return res, err
}

// startProfile starts a CPU profile to path (nothing when path is empty)
// and returns what stops it; stopping twice is harmless.
func startProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-cpuprofile-claims: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("-cpuprofile-claims: %w", err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			f.Close()
		})
	}, nil
}

func startServer(ctx context.Context, o *options, dir string) (*nomad.Server, error) {
	c := nomad.DefaultConfig()
	c.NodeName = "nodesim-server"
	c.BootstrapExpect = 1
	c.RPCAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 0}
	c.DevMode = o.raftMem
	if !o.raftMem {
		c.DataDir = dir
	}
	c.Logger = o.logger.Named("server")
	if o.claimCommits > 0 {
		c.CSIClaimCommitsInFlight = o.claimCommits
	}
	rc := raft.DefaultConfig()
	rc.ShutdownOnRemove = false
	c.RaftConfig = rc
	s, err := nomad.NewServer(c)
	if err != nil {
		return nil, fmt.Errorf("starting the server: %w", err)
	}
	if err := waitFor(ctx, "the server to lead", func() (bool, error) { return s.IsLeader(), nil }); err != nil {
		s.Shutdown()
		return nil, err
	}
	return s, nil
}

func startNodes(ctx context.Context, o *options, dir string, newRPC func() client.RPCer, pubs *publishes) ([]*simNode, error) {
	nodes := make([]*simNode, o.nodes)
	errs := make([]error, o.nodes)
	sem := make(chan struct{}, o.startConcurrency)
	var wg sync.WaitGroup
	for i := range o.nodes {
		if ctx.Err() != nil {
			errs[i] = ctx.Err()
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			nodes[i], errs[i] = startNode(i, nodeOptions{
				dir: dir, rpc: newRPC, memState: o.state == "mem", pluginSocket: o.pluginSocket, logger: o.logger, obs: pubs.observe,
			})
		})
	}
	wg.Wait()
	var out []*simNode
	for _, n := range nodes {
		if n != nil {
			out = append(out, n)
		}
	}
	for _, err := range errs {
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// stopNodes shuts every node down, many at once, until ctx ends; the
// process exits soon after anyway.
func stopNodes(ctx context.Context, nodes []*simNode) {
	sem := make(chan struct{}, 128)
	var wg sync.WaitGroup
	for _, n := range nodes {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		wg.Go(func() {
			defer func() { <-sem }()
			n.stop()
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func readyNodes(rpc client.RPCer) (int, error) {
	var r structs.NodeListResponse
	if err := rpc.RPC("Node.List", &structs.GenericRequest{}, &r); err != nil {
		return 0, err
	}
	n := 0
	for _, s := range r.Nodes {
		if s.Status == structs.NodeStatusReady {
			n++
		}
	}
	return n, nil
}

// heartbeatTTL is the TTL the servers give nodes (a heartbeat's answer).
func heartbeatTTL(rpc client.RPCer, o *options) time.Duration {
	if o.address == "" {
		return nomad.DefaultConfig().HeartbeatTTL
	}
	return 10 * time.Second // the agent's default; not exposed over RPC
}

func simJob(count int) *structs.Job {
	return &structs.Job{
		ID: "nodesim", Name: "nodesim", Namespace: structs.DefaultNamespace, Type: structs.JobTypeService, Priority: 50,
		Datacenters: []string{"dc1"},
		TaskGroups: []*structs.TaskGroup{{
			Name: "g", Count: count,
			Volumes: map[string]*structs.VolumeRequest{"data": {
				Name: "data", Type: structs.VolumeTypeCSI, Source: volumeFamily, PerAlloc: true,
				AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
			}},
			Tasks: []*structs.Task{{
				Name: "t", Driver: "mock",
				Resources: &structs.Resources{CPU: 10, MemoryMB: 10}, KillTimeout: time.Second,
			}},
		}},
	}
}

// latencies are, per alloc, from its creation (when the plan reserved its
// claim) and from its claim taken (the client's claim RPC) to the plugin's
// NodePublish answer. The server's times are on the leader's clock, this
// machine's.
func latencies(rpc client.RPCer, allocs []*structs.AllocListStub, pubs *publishes) (create, claim []time.Duration) {
	pubs.mu.Lock()
	published := maps(pubs.published)
	pubs.mu.Unlock()
	for _, a := range allocs {
		vol := fmt.Sprintf("%s[%d]", volumeFamily, (&structs.Allocation{Name: a.Name}).Index())
		at, ok := published[vol]
		if !ok {
			continue
		}
		create = append(create, at.Sub(time.Unix(0, a.CreateTime)))
		var r structs.CSIVolumeGetResponse
		if err := rpc.RPC("CSIVolume.Get", &structs.CSIVolumeGetRequest{ID: vol}, &r); err != nil || r.Volume == nil {
			continue
		}
		if c := r.Volume.Claims[a.ID]; c != nil {
			for _, h := range c.History {
				if h.To == structs.CSIClaimTaken {
					claim = append(claim, at.Sub(time.Unix(0, h.Time)))
					break
				}
			}
		}
	}
	slices.Sort(create)
	slices.Sort(claim)
	return create, claim
}

func maps(m map[string]time.Time) map[string]time.Time {
	out := make(map[string]time.Time, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// waitFor polls cond until it is true, fails, or ctx ends. An error that
// says "not now" (no leader while the servers elect one, which a loaded
// 3-server cluster does) is polled through, not a failure.
func waitFor(ctx context.Context, what string, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if err != nil && !transient(err) {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if !sleep(ctx, 200*time.Millisecond) {
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		}
	}
}

// retry calls write until it succeeds, fails for good, or ctx ends: a
// write the servers refused while electing a leader is sent again (each
// write here registers or stops the same objects, so a second one that
// meets the first's result changes nothing).
func retry(ctx context.Context, write func() error) error {
	for {
		err := write()
		if err == nil || !transient(err) {
			return err
		}
		if !sleep(ctx, 200*time.Millisecond) {
			return fmt.Errorf("%w (retried until: %w)", err, ctx.Err())
		}
	}
}

// transient reports whether err is one the servers answer while they
// elect a leader.
func transient(err error) bool {
	switch structs.CodeOf(err) {
	case structs.CodeNoLeader, structs.CodeRetryable:
		return true
	}
	return false
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
