// Package steptrace records when an alloc passes each step of the
// client's claim path (alloc received, persisted, Claim RPC sent and
// answered, staged, published; on stop: kill sent, task exited,
// unpublished, Unpublish RPC answered), and a register each hop of the
// servers' write path (HTTP handler, endpoint, Raft, FSM), so
// that cmd/berth-bench can say where each millisecond of "alloc created →
// NodePublish done", "stop → claim freed" and a volume register goes
// (README, Benchmarks).
//
// It is off unless the agent starts with $BERTH_STEP_TRACE naming a file:
// then Mark appends one line "<unix nanos> <id> <step>" per call to it.
// Off, Mark costs one atomic load; on, one write(2) of ~60 bytes with
// O_APPEND, which keeps concurrent lines whole. A trace file that cannot
// be opened turns tracing off for the process (stderr says so once).
package steptrace

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// EnvFile names the environment variable with the trace file's path.
const EnvFile = "BERTH_STEP_TRACE"

var (
	once sync.Once
	file atomic.Pointer[os.File]
)

func open() {
	path := os.Getenv(EnvFile)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintf(os.Stderr, "steptrace: %s=%s: %v; not tracing\n", EnvFile, path, err)
		return
	}
	file.Store(f)
}

// Mark records that id (an alloc ID) passed step now. step must not
// contain spaces or newlines.
func Mark(id, step string) {
	once.Do(open)
	f := file.Load()
	if f == nil {
		return
	}
	line := make([]byte, 0, 32+len(id)+len(step))
	line = strconv.AppendInt(line, time.Now().UnixNano(), 10)
	line = append(line, ' ')
	line = append(line, id...)
	line = append(line, ' ')
	line = append(line, step...)
	line = append(line, '\n')
	_, _ = f.Write(line)
}

// The steps, in the order a claim cycle passes them. The servers mark
// theirs too (AllocApplied, ClaimServed … ClaimCommitted): in one agent
// that is both, the legs split each server hop.
const (
	// AllocApplied: the leader's FSM stored the plan that placed the
	// alloc (after the plan entry's WAL append and commit); the client's
	// blocking query is woken next.
	AllocApplied = "alloc-applied"
	// AllocReceived: the client's alloc watcher handed a new alloc to
	// the client.
	AllocReceived = "alloc-received"
	// AllocPersisted: the runner wrote the new alloc to the client
	// state's node-local file (its fsynced write comes at the end of
	// prerun, before the tasks start).
	AllocPersisted = "alloc-persisted"
	// PrerunStarted: the alloc runner begins its prerun hooks (alloc dir,
	// then CSI).
	PrerunStarted = "prerun-started"
	// ClaimRecorded: the CSI hook recorded that it is claiming (a write
	// to the node-local state file).
	ClaimRecorded = "claim-recorded"
	// ClaimSent and ClaimAnswered bracket the CSIVolume.Claim RPC.
	ClaimSent = "claim-sent"
	// ClaimServed: the leader's Claim endpoint began (the call
	// authorized, on the leader).
	ClaimServed = "claim-served"
	// ClaimProposed: the endpoint checked the claim under the volume's
	// lock and hands the Taken write to the claim group commit.
	ClaimProposed = "claim-proposed"
	// ClaimApplied: the leader's FSM stored the claim as Taken (after its
	// entry's WAL append and commit).
	ClaimApplied = "claim-applied"
	// ClaimCommitted: the endpoint has the write's answer; it reads the
	// volume back for the reply next.
	ClaimCommitted = "claim-committed"
	ClaimAnswered  = "claim-answered"
	// MountRecorded: the CSI hook recorded that it is mounting (a write
	// to the node-local state file).
	MountRecorded = "mount-recorded"
	// StageSent: csimanager recorded the staging's new user and made the
	// staging directory, and sends NodeStageVolume (not marked when the
	// volume is staged already or the plugin does not stage).
	StageSent = "stage-sent"
	// Staged: NodeStageVolume returned (or the volume was staged already).
	Staged = "staged"
	// PublishSent: csimanager recorded the staging as done and made the
	// publish path's parent, and sends NodePublishVolume.
	PublishSent = "publish-sent"
	// Published: NodePublishVolume returned and the hook recorded it.
	Published = "published"
	// TaskStarted: the driver started the task.
	TaskStarted = "task-started"

	// StopReceived: the alloc runner got the servers' stop.
	StopReceived = "stop-received"
	// KillSent: the task runner asked the driver to stop the task.
	KillSent = "kill-sent"
	// TaskExited: the driver reported the task's exit.
	TaskExited = "task-exited"
	// PostrunStarted: every task exited; the postrun hooks begin.
	PostrunStarted = "postrun-started"
	// Unpublished: NodeUnpublishVolume (and NodeUnstageVolume when last)
	// returned.
	Unpublished = "unpublished"
	// ReleaseAnswered: the servers answered the CSIVolume.Unpublish RPC.
	ReleaseAnswered = "release-answered"
)

// The steps of a register, marked with the ID of the request's first
// volume when the request's path names it (as the api package's does).
const (
	// RegisterReceived: the agent's HTTP handler began the request.
	RegisterReceived = "register-received"
	// RegisterDecoded: the body is decoded and converted; the RPC is
	// called next.
	RegisterDecoded = "register-decoded"
	// RegisterProposed: the endpoint checked the volume and encoded the
	// entry; Raft's Apply is called next.
	RegisterProposed = "register-proposed"
	// RegisterStoring: the leader's FSM has the entry (appended to the
	// WAL, committed, handed to the FSM goroutine) and begins storing it.
	RegisterStoring = "register-storing"
	// RegisterApplied: the leader's FSM stored the volumes.
	RegisterApplied = "register-applied"
	// RegisterCommitted: the endpoint has Raft's answer.
	RegisterCommitted = "register-committed"
	// RegisterReplied: the HTTP handler built the answer; its JSON is
	// written next.
	RegisterReplied = "register-replied"
)
