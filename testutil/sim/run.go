package sim

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/berth-io/berth/nomad/claims"
	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers/mock"
)

// FreeBound is how long after the last fault healed every claim of a
// terminal alloc must be freed, and mounts must match claims (checks 3-5, 8),
// in real time with the shortened timers of serverConfig, not counting
// time the process was stalled (stall.go).
const FreeBound = 15 * time.Second

// quietFor is how long no plugin may be called before the end state is
// judged: longer than the servers' slowest periodic pass over claims
// (CSIVolumeWatcherResync) and than two retries at their longest backoff
// (serverConfig), so a release still in progress is not judged at rest.
const quietFor = 750 * time.Millisecond

// Run runs schedule s on a fresh in-process cluster and returns the
// violations found. t owns the cluster: Run is meant to be called in a
// subtest of its own, whose cleanup tears the cluster down.
func Run(t testing.TB, s *Schedule) []Violation {
	vs, _ := RunStats(t, s)
	return vs
}

// RunStats is Run, with what the witness saw.
func RunStats(t testing.TB, s *Schedule) ([]Violation, Stats) {
	return runWith(t, s, runOpts{})
}

// runOpts are a test's changes to how Run judges a schedule.
type runOpts struct {
	// bound replaces FreeBound for the end state (settle).
	bound time.Duration
	// afterHeal runs once every fault healed, before the end state is
	// judged: a test breaks something there that the checks must find.
	afterHeal func(*simCluster)
}

func runWith(t testing.TB, s *Schedule, o runOpts) ([]Violation, Stats) {
	modes := map[string]structs.CSIVolumeAccessMode{}
	for _, v := range s.Volumes {
		for _, id := range volumeIDs(v) {
			modes["ext-"+id] = v.Mode
		}
	}
	w := NewWitness(modes)
	w.Profile = s.Profile
	t0 := time.Now()
	if os.Getenv("SIM_TRACE") != "" {
		w.Trace = func(format string, args ...any) {
			t.Logf("trace %6dms "+format, append([]any{time.Since(t0).Milliseconds()}, args...)...)
		}
	}
	c, err := start(t, s, w)
	t1 := time.Now()
	if err != nil {
		return []Violation{{Check: CheckHarnessStep, Msg: fmt.Sprintf("starting the cluster: %v", err)}}, Stats{}
	}
	r := &runner{c: c, w: w, jobs: map[int]*jobInfo{}, finals: map[string]bool{}, bound: cmp.Or(o.bound, FreeBound)}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); r.watchClaims(stop) }()

	for _, o := range s.Ops {
		r.do(o)
	}
	t2 := time.Now()
	r.heal()
	if o.afterHeal != nil {
		o.afterHeal(c)
	}
	r.settle()
	t3 := time.Now()
	close(stop)
	wg.Wait()
	r.bg.Wait()
	t4 := time.Now()
	// SIM_PROFILE=1: where a schedule's real time goes.
	if os.Getenv("SIM_PROFILE") != "" {
		t.Logf("profile: servers=%d start=%v ops=%v heal+settle=%v background=%v",
			s.Servers, t1.Sub(t0).Round(time.Millisecond), t2.Sub(t1).Round(time.Millisecond),
			t3.Sub(t2).Round(time.Millisecond), t4.Sub(t3).Round(time.Millisecond))
	}
	return w.Violations(), w.Stats()
}

type jobInfo struct {
	op         Op
	stopped    bool
	registered bool
	regErr     error
	// stopErr is why the servers refused the stop (no leader, leadership
	// lost while committing): the job may then still be live.
	stopErr error
}

type runner struct {
	c    *simCluster
	w    *Witness
	jobs map[int]*jobInfo
	// finals: "<node>/<method>" and "ctrl/<method>" that got a final
	// error code injected; a claim that then needs an operator is allowed.
	mu     sync.Mutex
	finals map[string]bool
	timers []*time.Timer // later's, until heal
	bound  time.Duration // FreeBound, or a test's
	bg     sync.WaitGroup
}

func jobID(i int) string { return fmt.Sprintf("j%d", i) }

func (r *runner) job(o Op) *structs.Job {
	v := r.c.sched.Volumes[o.Vol]
	count := 1
	if v.PerAlloc || v.Mode == structs.CSIVolumeAccessModeMultiNodeReader ||
		v.Mode == structs.CSIVolumeAccessModeMultiNodeMultiWriter {
		count = 2
	}
	typ, cfg := structs.JobTypeService, map[string]any{}
	if o.Batch {
		typ, cfg = structs.JobTypeBatch, map[string]any{"run_for": "300ms"}
	}
	return &structs.Job{
		ID: jobID(o.Job), Name: jobID(o.Job), Namespace: structs.DefaultNamespace, Type: typ, Priority: 50,
		Datacenters: []string{"dc*"},
		TaskGroups: []*structs.TaskGroup{{
			Name: "g", Count: count,
			RestartPolicy: &structs.RestartPolicy{Attempts: 0, Interval: time.Minute, Delay: 10 * time.Millisecond, Mode: structs.RestartPolicyModeFail},
			ReschedulePolicy: &structs.ReschedulePolicy{
				Attempts: 0, Unlimited: true, Delay: 50 * time.Millisecond, DelayFunction: "constant", MaxDelay: time.Second,
			},
			Volumes: map[string]*structs.VolumeRequest{"data": {
				Name: "data", Type: structs.VolumeTypeCSI, Source: v.ID, ReadOnly: o.ReadOnly, PerAlloc: v.PerAlloc,
				AccessMode: v.Mode, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
			}},
			Tasks: []*structs.Task{{
				Name: "t", Driver: "mock", Config: cfg,
				Resources:    &structs.Resources{CPU: 100, MemoryMB: 64},
				KillTimeout:  200 * time.Millisecond,
				VolumeMounts: []*structs.VolumeMount{{Volume: "data", Destination: "/data", ReadOnly: o.ReadOnly}},
			}},
		}},
	}
}

// do runs one op. Errors of ops are not violations: an op the cluster
// refuses (a detach while the volume is in use, a drain of a down node)
// is a legitimate answer. The checks judge the outcome.
func (r *runner) do(o Op) {
	c := r.c
	if r.w.Trace != nil {
		r.w.Trace("op %s", o)
	}
	switch o.Kind {
	case OpRunJob:
		// A register refused (no leader during a failover) is not judged
		// by check 5; one accepted must never be lost.
		err := c.rpc("Job.Register", &structs.JobRegisterRequest{Job: r.job(o)}, &structs.JobRegisterResponse{})
		if err != nil {
			r.c.t.Logf("job %s not registered: %v", jobID(o.Job), err)
		}
		if prev := r.jobs[o.Job]; prev == nil || !prev.registered {
			r.jobs[o.Job] = &jobInfo{op: o, registered: err == nil, regErr: err}
		}
	case OpStopJob, OpPurgeJob:
		j := r.jobs[o.Job]
		if j == nil {
			return
		}
		j.stopped = true
		j.stopErr = c.rpc("Job.Deregister", &structs.JobDeregisterRequest{JobID: jobID(o.Job), Purge: o.Kind == OpPurgeJob,
			WriteRequest: structs.WriteRequest{Namespace: structs.DefaultNamespace}}, &structs.JobDeregisterResponse{})
		if j.stopErr != nil {
			r.c.t.Logf("job %s not deregistered: %v", jobID(o.Job), j.stopErr)
		}
	case OpDrain:
		_ = c.rpc("Node.UpdateDrain", &structs.NodeUpdateDrainRequest{NodeID: c.nodes[o.Node].id,
			DrainStrategy: &structs.DrainStrategy{Deadline: time.Second}}, &structs.NodeUpdateResponse{})
	case OpIneligible, OpEligible:
		_ = r.eligible(o.Node, o.Kind == OpEligible)
	case OpDetach:
		v := c.sched.Volumes[o.Vol]
		if o.Force {
			for _, id := range volumeIDs(v) {
				r.w.Excuse("ext-"+id, "detach -force")
			}
		}
		for _, id := range volumeIDs(v) {
			req := &structs.CSIVolumeDetachRequest{VolumeID: id, NodeID: c.nodes[o.Node].id, Force: o.Force,
				WriteRequest: structs.WriteRequest{Namespace: structs.DefaultNamespace}}
			// Detach waits for the release; the schedule goes on meanwhile.
			r.bg.Add(1)
			go func() { defer r.bg.Done(); _ = c.rpc("CSIVolume.Detach", req, &structs.GenericResponse{}) }()
		}
	case OpGC:
		_ = c.rpc("System.GarbageCollect", &structs.GenericRequest{}, &structs.GenericResponse{})
	case OpWait:
		// Cluster time passing between two steps, not a wait for a
		// condition: the schedule's interleaving.
		time.Sleep(o.Wait)
	case OpExitTasks:
		// Every running batch-less task of one job exits as if it
		// finished: the service is then failed and rescheduled.
		for i, j := range r.jobs {
			if j.stopped {
				continue
			}
			allocs, _ := c.anyServer().State().AllocsByJob(nil, structs.DefaultNamespace, jobID(i))
			for _, a := range allocs {
				for _, id := range mock.Running(a.ID + "/") {
					_ = mock.ExitTask(id, 1)
				}
			}
			break
		}
	case FaultKill:
		n := c.nodes[o.Node]
		if cl := n.get(); cl != nil {
			_ = cl.Shutdown()
			n.mu.Lock()
			n.client = nil
			n.mu.Unlock()
		}
	case FaultRestart:
		if n := c.nodes[o.Node]; n.get() == nil {
			c.startClient(n)
		}
	case FaultNode:
		n := c.nodes[o.Node]
		if o.Hang {
			n.plugin.SetHang(o.Method, true)
		} else {
			n.plugin.NextErr(o.Method, o.Code)
			if isFinal(o.Code) {
				r.mu.Lock()
				r.finals[n.name+"/"+o.Method] = true
				r.mu.Unlock()
			}
		}
	case FaultSlow:
		c.nodes[o.Node].plugin.SetSlow(o.Method, o.Wait)
	case FaultCtrl:
		for _, n := range c.nodes {
			if o.Hang {
				n.plugin.SetHang(o.Method, true)
			} else {
				n.plugin.NextErr(o.Method, o.Code)
			}
		}
		if !o.Hang && isFinal(o.Code) {
			r.mu.Lock()
			r.finals["ctrl/"+o.Method] = true
			r.mu.Unlock()
		}
	case FaultRestartS:
		if err := c.restartLeader(); err != nil {
			r.w.Violate(CheckHarnessStep, "restarting the leader: %v", err)
		}
	case FaultLoseMnts:
		// The node's agent and plugin die together (a node crash short
		// of a reboot): the client is killed and what the plugin mounted
		// is gone; the restarted client must mount again. Mounts lost
		// under a live client are not something Berth watches for.
		r.do(Op{Kind: FaultKill, Node: o.Node})
		r.w.LoseMounts(c.nodes[o.Node].name, c.nodes[o.Node].dataDir)
	case FaultHealCSI:
		for _, n := range c.nodes {
			n.plugin.ClearFaults()
		}
	case FaultCutNode:
		n := c.nodes[o.Node]
		n.setCut(true)
		n.mu.Lock()
		n.cutGen++
		gen := n.cutGen
		n.mu.Unlock()
		r.later(o.Wait, func() {
			n.mu.Lock()
			mend := n.cutGen == gen // not a later cut of the same node
			n.mu.Unlock()
			if mend {
				n.setCut(false)
			}
		})
	case FaultCutServer:
		if len(c.servers) < 3 {
			return
		}
		if addr := c.cutServer(o.Node); addr != "" {
			r.later(o.Wait, func() { c.raftNet.Mend(raft.ServerAddress(addr)) })
		}
	case FaultLossyRaft:
		if len(c.servers) < 3 {
			return
		}
		c.raftNet.SetLoss(Loss{DropRequest: float64(o.Drop) / 200, DropResponse: float64(o.Drop) / 200, Delay: o.Delay})
		r.later(o.Wait, func() { c.raftNet.SetLoss(Loss{}) })
	}
}

// later runs heal after d, while the schedule goes on; heal() at the end
// of the schedule ends every fault at once and cancels the timers that
// have not fired (the schedule need not wait for them).
func (r *runner) later(d time.Duration, heal func()) {
	r.bg.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.timers = append(r.timers, time.AfterFunc(d, func() { defer r.bg.Done(); heal() }))
}

func (r *runner) eligible(i int, yes bool) error {
	c := r.c
	if yes {
		if err := c.rpc("Node.UpdateDrain", &structs.NodeUpdateDrainRequest{NodeID: c.nodes[i].id, MarkEligible: true}, &structs.NodeUpdateResponse{}); err != nil {
			return err
		}
		return c.rpc("Node.UpdateEligibility", &structs.NodeUpdateEligibilityRequest{NodeID: c.nodes[i].id,
			Eligibility: structs.NodeSchedulingEligible}, &structs.NodeUpdateResponse{})
	}
	return c.rpc("Node.UpdateEligibility", &structs.NodeUpdateEligibilityRequest{NodeID: c.nodes[i].id,
		Eligibility: structs.NodeSchedulingIneligible}, &structs.NodeUpdateResponse{})
}

// heal ends every fault: killed clients restart from their state, plugins
// answer normally, nodes are eligible and not draining.
func (r *runner) heal() {
	r.mu.Lock()
	for _, t := range r.timers {
		if t.Stop() {
			r.bg.Done()
		}
	}
	r.timers = nil
	r.mu.Unlock()
	r.c.raftNet.Heal()
	for i, n := range r.c.nodes {
		n.setCut(false)
		n.plugin.ClearFaults()
		if n.get() == nil {
			r.c.startClient(n)
		}
		// Retried: a failover or a lossy Raft just healed may refuse it,
		// and a node left draining or ineligible would fail check 5.
		if err := waitFor(FreeBound, func() error { return r.eligible(i, true) }); err != nil {
			r.w.Violate(CheckHarnessStep, "making %s eligible after healing: %v", n.name, err)
		}
	}
}

// watchClaims checks guarantee 2 on the servers' side while the schedule
// runs: a claim freed (without a recorded reason) while a task of its
// alloc still runs.
func (r *runner) watchClaims(stop <-chan struct{}) {
	seen := map[string]bool{}
	steps := map[string]string{} // SIM_TRACE: each claim's last step seen
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		for _, v := range r.volumes() {
			if r.w.Trace != nil {
				for _, cl := range v.Claims {
					st := fmt.Sprintf("%s node=%s err=%q reason=%q", cl.Step, cl.NodeID[:min(8, len(cl.NodeID))], cl.LastError, cl.ReleaseReason)
					if k := v.ID + "/" + cl.AllocID; steps[k] != st {
						steps[k] = st
						r.w.Trace("claim %s alloc=%s %s", v.ID, cl.AllocID, st)
					}
				}
			}
			for _, pc := range v.PastClaims {
				key := v.ID + "/" + pc.AllocID
				if seen[key] || pc.Step != structs.CSIClaimFreed {
					continue
				}
				seen[key] = true
				if r.w.Trace != nil {
					r.w.Trace("claim %s alloc=%s freed reason=%q", v.ID, pc.AllocID, pc.ReleaseReason)
				}
				if pc.ReleaseReason != "" {
					continue // detach -force, a node's deadline: recorded
				}
				if running := r.w.Running(pc.AllocID); len(running) > 0 {
					r.w.Violate(CheckEarlyFree, "claim of alloc %s on volume %s freed while its tasks %v run", pc.AllocID, v.ID, running)
				}
			}
		}
	}
}

func (r *runner) volumes() []*structs.CSIVolume {
	var out []*structs.CSIVolume
	st := r.c.anyServer().State()
	for _, v := range r.c.sched.Volumes {
		for _, id := range volumeIDs(v) {
			vol, err := st.CSIVolumeByID(nil, structs.DefaultNamespace, id)
			if err == nil && vol != nil {
				out = append(out, vol)
			}
		}
	}
	return out
}

// settle waits up to FreeBound of running time for checks 3-5 and 8 to hold,
// and records what still does not then.
func (r *runner) settle() {
	var last []Violation
	start := time.Now()
	stalled, _ := waitRunning(processStalls(), r.bound, func() error {
		// Judge a cluster at rest: no volume RPC for a while and no alloc
		// still pending, else a check could pass before the work began.
		last = nil
		if !r.w.Quiet(quietFor) {
			last = append(last, Violation{Check: CheckFreed, Msg: "plugins are still being called"})
		}
		if p := r.pending(); len(p) > 0 {
			last = append(last, Violation{Check: CheckRuns, Msg: fmt.Sprintf("allocs still pending: %v", p)})
		}
		last = append(last, r.endState()...)
		if len(last) > 0 {
			return fmt.Errorf("%d end-state violations", len(last))
		}
		return nil
	})
	for _, v := range last {
		r.w.Violate(v.Check, "%s (still, %s after healing, of which the process was stalled %s)",
			v.Msg, time.Since(start).Round(time.Millisecond), stalled.Round(time.Millisecond))
	}
}

// pending lists the allocs the servers want running that have not
// started yet, except those waiting for a volume whose claim needs an
// operator (a final error was injected: they wait for `volume detach`).
func (r *runner) pending() []string {
	var out []string
	blocked := map[string]bool{}
	for _, v := range r.volumes() {
		for _, cl := range v.Claims {
			if cl.Step == structs.CSIClaimNeedsOperator {
				blocked[v.ID] = true
			}
		}
	}
	waits := func(a *structs.Allocation) bool {
		for i, j := range r.jobs {
			if jobID(i) == a.JobID {
				return slices.ContainsFunc(volumeIDs(r.c.sched.Volumes[j.op.Vol]), func(id string) bool { return blocked[id] })
			}
		}
		return false
	}
	iter, err := r.c.anyServer().State().Allocs(nil)
	if err != nil {
		return []string{err.Error()}
	}
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		a := raw.(*structs.Allocation)
		if a.DesiredStatus == structs.AllocDesiredStatusRun && a.ClientStatus == structs.AllocClientStatusPending && !waits(a) {
			out = append(out, a.ID)
		}
	}
	return out
}

// endState evaluates checks 3, 4, 5 and 8 once.
func (r *runner) endState() []Violation {
	st := r.c.anyServer().State()
	var out []Violation
	allocs := map[string]*structs.Allocation{}
	nodeName := map[string]string{}
	for _, n := range r.c.nodes {
		nodeName[n.id] = n.name
	}
	claimed := map[string]bool{} // node/extvol/alloc of live claims
	blocked := map[string]bool{} // volume IDs held by a claim an operator must clear
	for _, v := range r.volumes() {
		for _, cl := range v.Claims {
			a, _ := st.AllocByID(nil, cl.AllocID)
			allocs[cl.AllocID] = a
			live := a != nil && !a.TerminalStatus()
			if cl.Step == structs.CSIClaimNeedsOperator {
				blocked[v.ID] = true
				if !r.finalAllowed(cl, nodeName[cl.NodeID]) {
					out = append(out, Violation{Check: CheckFreed, Msg: fmt.Sprintf(
						"claim of alloc %s on volume %s needs an operator (blocked at %s: %s) though no final error was injected for that step",
						cl.AllocID, v.ID, cl.BlockedStep, cl.LastError)})
				}
				continue
			}
			if !live {
				// What the alloc's client was doing: seed 2875's message
				// could not tell a task still running from a release not
				// done, which TasksExited, the driver's running tasks and
				// the last task events do.
				client := "alloc gone"
				if a != nil {
					client = fmt.Sprintf("desired %s, client %s, tasks exited %t, tasks running %v %s",
						a.DesiredStatus, a.ClientStatus, a.TasksExited, r.w.Running(a.ID), lastEvents(a))
				}
				out = append(out, Violation{Check: CheckFreed, Msg: fmt.Sprintf(
					"claim of terminal alloc %s on volume %s not freed: step %s, attempts %d, last error %q; %s",
					cl.AllocID, v.ID, cl.Step, cl.Attempts, cl.LastError, client)})
				continue
			}
			claimed[nodeName[cl.NodeID]+"/"+v.ExternalID+"/"+cl.AllocID] = true
			if a.ClientStatus == structs.AllocClientStatusRunning && !r.published(nodeName[cl.NodeID], v.ExternalID, cl.AllocID) {
				out = append(out, Violation{Check: CheckMounts, Msg: fmt.Sprintf(
					"alloc %s runs with a claim on volume %s but nothing is published on %s", cl.AllocID, v.ID, nodeName[cl.NodeID])})
			}
		}
	}
	for _, p := range r.w.Pubs() {
		if !claimed[p.Node+"/"+p.Vol+"/"+p.Alloc] && !blocked[strings.TrimPrefix(p.Vol, "ext-")] {
			out = append(out, Violation{Check: CheckMounts, Msg: fmt.Sprintf(
				"volume %s is published on %s for alloc %s, which holds no live claim", p.Vol, p.Node, p.Alloc)})
		}
	}
	// Tasks ⇔ live allocs: a task still running for an alloc the client
	// reported terminal was leaked (nothing will stop it, and its volume
	// is released under it).
	var all []*structs.Allocation
	iter, err := st.Allocs(nil)
	if err == nil {
		for raw := iter.Next(); raw != nil; raw = iter.Next() {
			a := raw.(*structs.Allocation)
			all = append(all, a)
			if !a.ClientTerminalStatus() {
				continue
			}
			if running := r.w.Running(a.ID); len(running) > 0 {
				out = append(out, Violation{Check: CheckMounts, Msg: fmt.Sprintf(
					"alloc %s is %s on the servers but its tasks %v still run on %s %s", a.ID, a.ClientStatus, running, nodeName[a.NodeID], lastEvents(a))})
			}
		}
	}
	// Controller attachments ⇔ live claims on that node.
	byExt := map[string]*structs.CSIVolume{}
	for _, v := range r.volumes() {
		byExt[v.ExternalID] = v
	}
	nodeID := map[string]string{}
	for _, n := range r.c.nodes {
		nodeID[n.name] = n.id
	}
	for _, a := range r.w.Attached() {
		vol, node := strings.TrimPrefix(a.Vol, "ext-"), strings.TrimPrefix(a.Node, "ext-")
		found := false
		for k := range claimed {
			if strings.HasPrefix(k, node+"/"+a.Vol+"/") {
				found = true
			}
		}
		if !found && !blocked[vol] && !abandonedByOperator(byExt[a.Vol], nodeID[node], a.Since) {
			out = append(out, Violation{Check: CheckMounts, Msg: fmt.Sprintf(
				"volume %s is controller-published to %s, where no live alloc claims it", vol, node)})
		}
	}
	out = append(out, stoppedCheck(all, r.clientUp, r.w.Running)...)
	out = append(out, r.runsCheck(st, blocked)...)
	sort.Slice(out, func(i, j int) bool { return out[i].Msg < out[j].Msg })
	return out
}

// clientUp names the node of ID nodeID and reports whether its client
// runs and reaches the servers (not killed, not cut off).
func (r *runner) clientUp(nodeID string) (name string, up bool) {
	for _, n := range r.c.nodes {
		n.mu.Lock()
		id, cl, cut := n.id, n.client, n.cut
		n.mu.Unlock()
		if id == nodeID {
			return n.name, cl != nil && !cut
		}
	}
	return "", false
}

// stoppedCheck is check 8: a task still running for an alloc the servers
// hold stopped (desired stop or evict) on a node whose client is up. That
// client has been sent the stop and nothing keeps it from acting on it, so
// the task was leaked: nothing will kill it, and the alloc's claims stay
// taken (its client releases them once every task exited), which checks 3
// and 5 then report only as a claim not freed and allocs pending behind it
// (seed 2875). An alloc whose client reported it terminal is check 4's;
// a killed or cut-off client is excused until it is back. It is pure:
// clientUp and running are the cluster's and the mock driver's view.
func stoppedCheck(allocs []*structs.Allocation, clientUp func(nodeID string) (name string, up bool), running func(allocID string) []string) []Violation {
	var out []Violation
	for _, a := range allocs {
		if a.DesiredStatus == structs.AllocDesiredStatusRun || a.ClientTerminalStatus() {
			continue
		}
		name, up := clientUp(a.NodeID)
		if !up {
			continue
		}
		if tasks := running(a.ID); len(tasks) > 0 {
			slices.Sort(tasks)
			out = append(out, Violation{Check: CheckStopped, Msg: fmt.Sprintf(
				"alloc %s is stopped on the servers (desired %s: %q, client status %s) but its tasks %v still run on %s, whose client is up %s",
				a.ID, a.DesiredStatus, a.DesiredDescription, a.ClientStatus, tasks, name, lastEvents(a))})
		}
	}
	return out
}

// abandonedByOperator reports whether the servers record that an
// operator's `volume detach` gave up the ControllerUnpublish of vol from
// the node nodeID after the attachment was made (since): a claim on that
// node went from needs-operator straight to controller-detached, with
// -force or because the plugin said it does not implement the RPC
// (claims.Detach). The attachment left behind is then the operator's
// choice, which DESIGN §4 documents, not a leak (seed 41635: a final
// ControllerUnpublish error, then `volume detach -force`). A later
// ControllerPublish to the node belongs to a later claim and is judged.
func abandonedByOperator(vol *structs.CSIVolume, nodeID string, since time.Time) bool {
	if vol == nil || nodeID == "" {
		return false
	}
	for _, c := range slices.Concat(vol.PastClaims, slices.Collect(maps.Values(vol.Claims))) {
		if c.NodeID != nodeID {
			continue
		}
		for _, h := range c.History {
			if h.From == structs.CSIClaimNeedsOperator && h.To == structs.CSIClaimControllerDetached &&
				(h.Reason == claims.ReasonDetachForce || h.Reason == claims.ReasonOperatorSkipped) &&
				h.Time >= since.UnixNano() {
				return true
			}
		}
	}
	return false
}

// finalAllowed: a claim may need an operator when the schedule injected a
// final error into an RPC of its blocked step.
func (r *runner) finalAllowed(cl *structs.CSIVolumeClaim, node string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch cl.BlockedStep {
	case structs.CSIClaimTaken:
		// From taken, a down node's claim is fenced by ControllerUnpublish.
		return r.finals[node+"/NodeUnpublishVolume"] || r.finals[node+"/NodeUnstageVolume"] ||
			r.finals["ctrl/ControllerUnpublishVolume"]
	case structs.CSIClaimNodeDetached:
		return r.finals["ctrl/ControllerUnpublishVolume"]
	}
	return len(r.finals) > 0
}

func (r *runner) published(node, vol, alloc string) bool {
	return slices.ContainsFunc(r.w.Pubs(), func(p Pub) bool { return p.Node == node && p.Vol == vol && p.Alloc == alloc })
}

// runsCheck is check 5: a job that is not stopped, whose volume no other
// job that is not stopped uses (contention may legitimately starve one),
// and that no claim needing an operator blocks, runs: a service job all
// its allocs, a batch job has run (complete or running). A job whose stop
// the servers refused counts as stopped only if they applied it anyway,
// as a refused register counts only if applied.
func (r *runner) runsCheck(st *state.StateStore, blocked map[string]bool) []Violation {
	var out []Violation
	// A stop the servers refused leaves the job live unless they applied
	// it anyway: seeds 3864 and 7383 (three servers) stopped a job while
	// the leader was cut off ("leadership lost while committing"), its
	// alloc kept its single-node-reader-only claim, and the next job on
	// the volume was reported as starved by nothing.
	stopped := map[int]bool{}
	for i, j := range r.jobs {
		stopped[i] = j.stopped
		if j.stopped && j.stopErr != nil {
			job, err := st.JobByID(nil, structs.DefaultNamespace, jobID(i))
			stopped[i] = err == nil && (job == nil || job.Stop)
		}
	}
	users := map[int]int{}
	for i, j := range r.jobs {
		if !stopped[i] {
			users[j.op.Vol]++
		}
	}
	for i, j := range r.jobs {
		if stopped[i] || users[j.op.Vol] > 1 {
			continue
		}
		// A register refused with an error (no leader, leadership lost
		// while committing) is judged only if it was applied anyway:
		// the servers then hold the job and owe it its allocs. Seeds
		// 5008 and 5059 once reported a job with no allocs after
		// three servers flapped: their registers had been refused.
		if !j.registered {
			if job, err := st.JobByID(nil, structs.DefaultNamespace, jobID(i)); err != nil || job == nil || job.Stop {
				continue
			}
		}
		v := r.c.sched.Volumes[j.op.Vol]
		if slices.ContainsFunc(volumeIDs(v), func(id string) bool { return blocked[id] }) {
			continue
		}
		job := r.job(j.op)
		allocs, err := st.AllocsByJob(nil, structs.DefaultNamespace, jobID(i))
		if err != nil {
			out = append(out, Violation{Check: CheckHarnessStep, Msg: err.Error()})
			continue
		}
		running, done := 0, 0
		var states []string
		for _, a := range allocs {
			st := a.ClientStatus + "/" + a.DesiredStatus
			if a.ClientStatus != structs.AllocClientStatusRunning {
				st += " " + lastEvents(a)
			}
			states = append(states, st)
			switch a.ClientStatus {
			case structs.AllocClientStatusRunning:
				if a.DesiredStatus == structs.AllocDesiredStatusRun {
					running++
				}
			case structs.AllocClientStatusComplete:
				done++
			}
		}
		want := job.TaskGroups[0].Count
		ok := running >= want
		if j.op.Batch {
			ok = running+done > 0
		}
		if !ok {
			slices.Sort(states)
			var evals []string
			if es, err := st.EvalsByJob(nil, structs.DefaultNamespace, jobID(i)); err == nil {
				sort.Slice(es, func(a, b int) bool { return es[a].CreateIndex < es[b].CreateIndex })
				for _, e := range es {
					ev := fmt.Sprintf("%d:%s/%s %s", e.CreateIndex, e.TriggeredBy, e.Status, e.StatusDescription)
					for _, m := range e.FailedTGAllocs {
						ev += fmt.Sprintf(" (failed: evaluated %d, filtered %d %v %v, exhausted %d %v)", m.NodesEvaluated,
							m.NodesFiltered, m.ConstraintFiltered, m.ClassFiltered, m.NodesExhausted, m.DimensionExhausted)
					}
					evals = append(evals, ev)
				}
			}
			var nodes []string
			for _, n := range r.c.nodes {
				if node, err := st.NodeByID(nil, n.id); err == nil && node != nil {
					nodes = append(nodes, fmt.Sprintf("%s:%s/%s drain=%t", n.name, node.Status, node.SchedulingEligibility, node.DrainStrategy != nil))
				}
			}
			if p, err := st.CSIPluginByID(nil, PluginID); err == nil && p != nil {
				nodes = append(nodes, fmt.Sprintf("plugin: %d/%d nodes healthy", p.NodesHealthy, p.NodesExpected))
			}
			out = append(out, Violation{Check: CheckRuns, Msg: fmt.Sprintf(
				"job %s (volume %s, %s) does not run: %d of %d allocs running; allocs %v; nodes %v; claims %v; evals %v",
				jobID(i), v.ID, v.Mode, running, want, states, nodes, claimHolders(st, v), evals)})
		}
	}
	return out
}

// lastEvents is the last few task events of a, for violation messages.
func lastEvents(a *structs.Allocation) string {
	var evs []string
	for name, ts := range a.TaskStates {
		for _, e := range ts.Events[max(0, len(ts.Events)-4):] {
			msg := e.DisplayMessage
			if msg == "" {
				msg = e.Message
			}
			evs = append(evs, fmt.Sprintf("%s: %s %q", name, e.Type, msg))
		}
	}
	return fmt.Sprintf("[alloc %s on %s: %s]", a.ID[:8], a.NodeID[:8], strings.Join(evs, "; "))
}

// claimHolders describes the live claims on v's volumes and the allocs
// that hold them (job, desired and client status), for check 5's message:
// a job starved by a claim is told apart from one nothing blocks.
func claimHolders(st *state.StateStore, v Volume) []string {
	var out []string
	for _, id := range volumeIDs(v) {
		vol, err := st.CSIVolumeByID(nil, structs.DefaultNamespace, id)
		if err != nil || vol == nil {
			continue
		}
		for _, c := range vol.LiveClaims() {
			holder := "alloc gone"
			if a, err := st.AllocByID(nil, c.AllocID); err == nil && a != nil {
				holder = fmt.Sprintf("job %s %s/%s", a.JobID, a.DesiredStatus, a.ClientStatus)
				switch j, err := st.JobByID(nil, a.Namespace, a.JobID); {
				case err == nil && j == nil:
					holder += ", job purged"
				case err == nil && j.Stop:
					holder += ", job stopped"
				}
			}
			out = append(out, fmt.Sprintf("%s:%s/%s %s [%s]", id, c.AllocID[:8], c.NodeID[:8], c.Step, holder))
		}
	}
	return out
}
