package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

// TestE2E_PluginSetups runs the same writer against Berth's hostpath plugin
// set up two ways: node-only (no controller: the node stages the volume
// itself), and as a controller job plus a node job sharing one root (the
// servers ControllerPublish through a client's node session before the
// node stages, and ControllerUnpublish only after the node unpublished).
// The order is read from the plugin's own state journal, which records
// every change in sequence across both plugin processes.
func TestE2E_PluginSetups(t *testing.T) {
	t.Run("node-only", func(t *testing.T) {
		h := NewHarness(t)
		c := h.NewCluster(t, 1, 1)
		c.RunPlugin(t, h.HostpathPlugin("node"))
		c.RegisterVolume(t, &Volume{ID: "data", PluginID: "hostpath", Capabilities: []Capability{{SingleNodeWriter, FileSystem}}})
		a := runWriter(t, h, c, "data")
		c.WaitForClaimFreed(t, "data", a.ID)

		steps := journalSteps(t, h.HostpathRoot(), "data")
		must.SliceNotEmpty(t, steps)
		sawNode := false
		for _, s := range steps {
			must.Zero(t, s.attachments, must.Sprintf("node-only plugin recorded an attachment at seq %d", s.seq))
			sawNode = sawNode || s.publishes > 0
		}
		must.True(t, sawNode, must.Sprint("the journal never shows the node publish"))
		must.Eq(t, journalStep{seq: steps[len(steps)-1].seq}, steps[len(steps)-1], must.Sprint("the volume is still staged or published"))
	})

	t.Run("controller+node", func(t *testing.T) {
		h := NewHarness(t)
		c := h.NewCluster(t, 1, 2)
		c.RunPlugin(t, h.HostpathPlugin("controller"))
		c.RunPlugin(t, h.HostpathPlugin("node"))

		// Create goes through the controller (CreateVolume), which names
		// the volume in the provider.
		spec := c.h.WriteFile(t, "made.volume.hcl", (&Volume{ID: "made", PluginID: "hostpath",
			Capabilities: []Capability{{SingleNodeWriter, FileSystem}}}).HCL())
		out := c.Berth(t, "volume", "create", spec)
		must.StrContains(t, out, `Created volume "made"`)
		vol := c.Volume(t, "made")
		must.NotEq(t, "", vol.ExternalID)
		must.NotEq(t, "made", vol.ExternalID)

		a := runWriter(t, h, c, "made")
		c.WaitForClaimFreed(t, "made", a.ID)

		steps := journalSteps(t, h.HostpathRoot(), vol.ExternalID)
		t.Logf("journal of %s: %+v", vol.ExternalID, steps)
		sawBoth := false
		for _, s := range steps {
			if s.stages+s.publishes > 0 {
				// Node-side state only while attached: ControllerPublish
				// came first, and ControllerUnpublish came strictly after
				// the node unpublished and unstaged.
				must.Positive(t, s.attachments, must.Sprintf("seq %d: staged/published on the node without a controller attachment\n%v", s.seq, steps))
				sawBoth = true
			}
		}
		must.True(t, sawBoth, must.Sprintf("the journal never shows the volume attached and published\n%v", steps))
		last := steps[len(steps)-1]
		must.Eq(t, journalStep{seq: last.seq}, last, must.Sprint("the volume is still attached, staged or published"))

		c.Berth(t, "volume", "delete", "made")
		_, err := os.Stat(filepath.Join(h.HostpathRoot(), "volumes", vol.ExternalID))
		must.True(t, errors.Is(err, os.ErrNotExist), must.Sprintf("the deleted volume's directory is still there (%v)", err))
	})
}

// runWriter runs a batch writer on volume id and waits for it to complete,
// then checks that its file is in the volume (through the task's mount).
func runWriter(t *testing.T, h *Harness, c *Cluster, id string) *api.AllocationListStub {
	t.Helper()
	w := &Workload{JobID: "writer-" + id, Type: "batch", Volume: id, AccessMode: SingleNodeWriter,
		Script: "echo written > /data/f && cat /data/f"}
	c.RunJob(t, w.JobID, w.HCL(h.Root))
	a := c.WaitForAllocs(t, w.JobID, 1, api.AllocClientStatusComplete)[0]
	must.Eq(t, "written\n", c.AllocLogs(t, a.ID, WorkloadTask))
	return a
}

// journalStep is one change of a volume in the hostpath plugin's journal.
type journalStep struct {
	seq                            uint64
	attachments, stages, publishes int
}

// journalSteps reads every change of the plugin's volume externalID from
// the hostpath state journal under root, in order. The format is the
// plugin's (plugins/csi/hostpath/store.go): one JSON object per line with
// the volume's new value, or none when it was deleted.
func journalSteps(t *testing.T, root, externalID string) []journalStep {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "state.journal"))
	must.NoError(t, err)
	defer f.Close()
	var steps []journalStep
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e struct {
			Seq    uint64 `json:"seq"`
			Kind   string `json:"kind"`
			ID     string `json:"id"`
			Volume *struct {
				Attachments []json.RawMessage `json:"attachments"`
				Stages      []json.RawMessage `json:"stages"`
				Publishes   []json.RawMessage `json:"publishes"`
			} `json:"volume"`
		}
		must.NoError(t, json.Unmarshal(sc.Bytes(), &e), must.Sprintf("journal line %q", sc.Text()))
		if e.Kind != "volume" || e.ID != externalID {
			continue
		}
		s := journalStep{seq: e.Seq}
		if e.Volume != nil {
			s.attachments, s.stages, s.publishes = len(e.Volume.Attachments), len(e.Volume.Stages), len(e.Volume.Publishes)
		}
		steps = append(steps, s)
	}
	must.NoError(t, sc.Err())
	return steps
}

// TestE2E_MockDriverWithInjectedFaults runs an independent plugin, csi-test's
// mock-driver v4.2.0, as a monolith plugin task. Its hooks file answers
// Unavailable to the first NodePublishVolume and the first
// NodeUnpublishVolume: the job still runs (the client retries the publish),
// and once stopped its claim is still freed (the client retries the
// unpublish). The client's retry counters show the faults were hit.
func TestE2E_MockDriverWithInjectedFaults(t *testing.T) {
	h := NewHarness(t)
	mock := mockDriverBinary(t)
	hooks := h.WriteFile(t, "hooks.yaml", `globals: |
  publishes = 0;
  unpublishes = 0;
nodePublishVolumeStart: |
  publishes++;
  publishes == 1 ? UNAVAILABLE : OK;
nodeUnpublishVolumeStart: |
  unpublishes++;
  unpublishes == 1 ? UNAVAILABLE : OK;
`)
	c := h.NewCluster(t, 1, 1)
	client := c.Clients[0]
	c.RunPlugin(t, &PluginJob{PluginID: "mock", Type: "monolith", Command: mock,
		Args: []string{"--name", "mock.csi.berth.test", "--hooks-file", hooks},
		Env:  map[string]string{markerEnv: h.Root}})

	// The mock driver keeps volumes in memory: make one through its
	// controller.
	spec := h.WriteFile(t, "mockvol.volume.hcl", (&Volume{ID: "mockvol", PluginID: "mock",
		Capabilities: []Capability{{SingleNodeWriter, FileSystem}}}).HCL())
	c.Berth(t, "volume", "create", spec)

	w := &Workload{JobID: "svc", Type: "service", Volume: "mockvol", AccessMode: SingleNodeWriter,
		Script: SlowStopScript(0)}
	c.RunJob(t, w.JobID, w.HCL(h.Root))
	a := c.WaitForAllocs(t, w.JobID, 1, api.AllocClientStatusRunning)[0]
	must.Positive(t, retries(t, client, "NodePublishVolume"), must.Sprint("the injected NodePublish fault was never retried"))

	c.Berth(t, "job", "stop", w.JobID)
	c.WaitForClaimFreed(t, "mockvol", a.ID)
	must.Positive(t, retries(t, client, "NodeUnpublishVolume"), must.Sprint("the injected NodeUnpublish fault was never retried"))
}

// retries is the client agent's count of retried CSI calls of a method,
// from its Prometheus metrics.
func retries(t *testing.T, a *Agent, method string) int {
	t.Helper()
	resp, err := http.Get("http://" + a.HTTPAddr() + "/v1/metrics?format=prometheus")
	must.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must.NoError(t, err)
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "#") || !strings.Contains(line, "csi_rpc_retry") || !strings.Contains(line, `"`+method+`"`) {
			continue
		}
		var v float64
		fields := strings.Fields(line)
		if _, err := fmt.Sscan(fields[len(fields)-1], &v); err == nil {
			n += int(v)
		}
	}
	return n
}

// mockDriverBinary returns csi-test's mock-driver: $BERTH_MOCK_DRIVER, or
// <repo>/.bin/mock-driver, built by scripts/build-peers.sh when missing.
func mockDriverBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("BERTH_MOCK_DRIVER"); bin != "" {
		return bin
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	cmd := exec.CommandContext(t.Context(), "bash", filepath.Join(root, "scripts", "build-peers.sh"))
	cmd.Env = append(os.Environ(), "BIN="+filepath.Join(root, ".bin"))
	if out, err := cmd.CombinedOutput(); err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) && exitErr.ExitCode() == 3 {
			t.Skipf("skipping: csi-test mock-driver is not built and its modules cannot be downloaded:\n%s", out)
		}
		t.Fatalf("building mock-driver: %v\n%s", err, out)
	}
	return filepath.Join(root, ".bin", "mock-driver")
}
