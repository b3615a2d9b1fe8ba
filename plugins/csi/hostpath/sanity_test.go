package hostpath

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	"github.com/shoenig/test/must"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/berth-io/berth/testutil"
)

// TestSanity runs the csi-test sanity suite against `berth plugin hostpath`
// run as a real process, in its own mount namespace so that its mounts
// never touch the test machine's. Every capability-gated part of the suite
// is enabled; the specs that still skip are logged with their reasons.
func TestSanity(t *testing.T) {
	requireRoot(t)
	if testing.Short() {
		t.Skip("builds the berth binary; skipped with -short")
	}
	if f := flag.Lookup("test.count"); f != nil && f.Value.String() != "1" {
		t.Skip("ginkgo, which csi-sanity runs on, refuses go test -count > 1; run TestSanity with -count=1")
	}
	bin := testutil.BuildBerth(t)

	// csi-sanity creates the mount and staging directories with a plain
	// mkdir, so their parent must exist; the plugin sees them through the
	// shared file system, from its own mount namespace.
	work := t.TempDir()
	sockDir, err := os.MkdirTemp("", "hps")
	must.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "csi.sock")

	plugin := startPluginProcess(t, bin,
		"-endpoint", "unix://"+sock,
		"-root", filepath.Join(work, "root"),
		"-node-id", "sanity-node",
		// Staging, so the suite covers NodeStage/NodeUnstage too; a
		// publish without staging is covered by node_test.go.
		"-stage",
		"-capacity", strconv.Itoa(1<<30),
		"-max-volumes", "8",
		"-log-level", "warn",
	)

	// The plugin's mounts must stay in its own, private, namespace.
	self, err := os.Readlink("/proc/self/ns/mnt")
	must.NoError(t, err)
	its, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", plugin.Pid))
	must.NoError(t, err)
	must.NotEq(t, self, its, must.Sprint("the plugin should run in its own mount namespace"))
	ms, err := readMountInfo(fmt.Sprintf("/proc/%d/mountinfo", plugin.Pid))
	must.NoError(t, err)
	rootMount, ok := mountAt(ms, "/")
	must.True(t, ok)
	must.False(t, rootMount.shared(), must.Sprint("/ should be private in the plugin's namespace, or its mounts would propagate back"))

	cfg := sanity.NewTestConfig()
	cfg.Address = "unix://" + sock
	cfg.TargetPath = filepath.Join(work, "mount")
	cfg.StagingPath = filepath.Join(work, "staging")
	cfg.TestVolumeSize = 1 << 20
	cfg.TestVolumeExpandSize = 2 << 20
	cfg.TestVolumeMutableParameters = map[string]string{"note": "sanity"}
	cfg.TestNodeVolumeAttachLimit = true

	var summary sanitySummary
	ginkgo.ReportAfterSuite("hostpath sanity summary", func(r ginkgo.Report) { summary = summarize(r) })
	sanity.Test(t, cfg)

	t.Logf("csi-sanity: %d passed, %d failed, %d skipped, %d pending", summary.passed, summary.failed, len(summary.skipped), len(summary.pending))
	for _, s := range summary.skipped {
		t.Logf("skipped: %s", s)
	}
	for _, s := range summary.pending {
		t.Logf("pending (disabled in csi-test itself): %s", s)
	}
	must.Positive(t, summary.passed)
	must.Zero(t, summary.failed)
	// The snapshot, expansion and modify specs are capability-gated: they
	// must run, not skip, or a lost capability would pass unnoticed.
	for _, s := range summary.skipped {
		for _, w := range []string{"Snapshot", "Expand", "Modify", "volume attribute class"} {
			must.False(t, strings.Contains(s, w) && !strings.Contains(s, "GroupController"),
				must.Sprintf("spec %s should run against hostpath", s))
		}
	}

	// The suite cleaned up after itself: nothing is left mounted in the
	// plugin's namespace, and nothing ever appeared in ours.
	must.SliceEmpty(t, mountsUnderIn(t, fmt.Sprintf("/proc/%d/mountinfo", plugin.Pid), work))
	must.SliceEmpty(t, mountsUnder(t, work))
}

type sanitySummary struct {
	passed, failed   int
	skipped, pending []string
}

func summarize(r ginkgo.Report) sanitySummary {
	var s sanitySummary
	for _, sr := range r.SpecReports {
		if sr.LeafNodeType != types.NodeTypeIt {
			continue
		}
		switch sr.State {
		case types.SpecStatePassed:
			s.passed++
		case types.SpecStateSkipped:
			s.skipped = append(s.skipped, fmt.Sprintf("%s (%s)", sr.FullText(), strings.TrimSpace(sr.Failure.Message)))
		case types.SpecStatePending:
			s.pending = append(s.pending, sr.FullText())
		default:
			s.failed++
		}
	}
	sort.Strings(s.skipped)
	sort.Strings(s.pending)
	return s
}

// startPluginProcess starts `berth plugin hostpath` in a new mount
// namespace (Go makes / private in it, recursively), waits until it answers
// Probe, and stops it with SIGTERM at cleanup, expecting a clean exit and
// the socket removed.
func startPluginProcess(t *testing.T, bin string, args ...string) *os.Process {
	t.Helper()
	var stderr testutil.SyncBuffer
	cmd := exec.Command(bin, append([]string{"plugin", "hostpath"}, args...)...)
	cmd.Stdout = &stderr
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	must.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var endpoint string
	for i, a := range args {
		if a == "-endpoint" {
			endpoint = args[i+1]
		}
	}
	sock, err := SocketPath(endpoint)
	must.NoError(t, err)

	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
		}
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("plugin exited with %v; its output:\n%s", err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("plugin did not stop within 30s of SIGTERM; its output:\n%s", stderr.String())
		}
		if _, err := os.Lstat(sock); !os.IsNotExist(err) {
			t.Errorf("plugin left its socket %s behind", sock)
		}
		if t.Failed() {
			t.Logf("plugin output:\n%s", stderr.String())
		}
	})

	// Wait for the plugin to answer, or to die.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+sock,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.5, MaxDelay: 200 * time.Millisecond}}),
	)
	must.NoError(t, err)
	defer conn.Close()
	ready := make(chan error, 1)
	go func() {
		_, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{}, grpc.WaitForReady(true))
		ready <- err
	}()
	select {
	case err := <-ready:
		must.NoError(t, err, must.Sprintf("plugin did not answer Probe; its output:\n%s", stderr.String()))
	case err := <-exited:
		cancel()
		<-ready
		exited <- err // for the cleanup
		t.Fatalf("plugin exited early (%v); its output:\n%s", err, stderr.String())
	}
	return cmd.Process
}
