package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

// TestE2E_UIShowsAClaimLive opens the web UI of a real agent in headless
// Chromium, finds the volume from the list, and watches — without
// reloading the page — its claim appear (reserved/taken) while a job runs
// and move to the past claims as freed once the job is stopped. It saves a
// screenshot of each stage under $BERTH_TEST_ARTIFACTS (else the test's
// temp dir).
func TestE2E_UIShowsAClaimLive(t *testing.T) {
	chrome := chromiumPath(t)
	h := NewHarness(t)
	c := h.NewCluster(t, 1, 1)
	c.RunPlugin(t, h.HostpathPlugin("node"))
	c.RegisterVolume(t, &Volume{ID: "data", PluginID: "hostpath", Capabilities: []Capability{{SingleNodeWriter, FileSystem}}})

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox,
		chromedp.WindowSize(1400, 1000))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	// One deadline for every browser step: a page that stops updating
	// fails here instead of hanging.
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()
	shots := artifactsDir(t)
	shot := func(name string) chromedp.Action {
		return chromedp.ActionFunc(func(ctx context.Context) error {
			var b []byte
			if err := chromedp.FullScreenshot(&b, 100).Do(ctx); err != nil {
				return err
			}
			p := filepath.Join(shots, name+".png")
			t.Logf("screenshot %s", p)
			return os.WriteFile(p, b, 0o644)
		})
	}

	base := "http://" + c.Server(t).HTTPAddr()
	// Find the volume in the list and follow its link, as an operator would.
	must.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/ui/volumes"),
		chromedp.WaitVisible(`tr[data-volume="data"] a`, chromedp.ByQuery),
		shot("1-volumes"),
		chromedp.Click(`tr[data-volume="data"] a`, chromedp.ByQuery),
		chromedp.WaitVisible(`body[data-page="volume"][data-id="data"] #claims`, chromedp.ByQuery),
		// Marks this page load and records every claim step the page
		// shows, so the end can prove the page updated itself, in order.
		chromedp.Evaluate(`window.sameLoad = true; window.steps = [];
			new MutationObserver(() => {
				for (const r of document.querySelectorAll("#claims tr[data-step], #past-claims tr[data-step]")) {
					const s = r.dataset.alloc + " " + r.dataset.step;
					if (!window.steps.includes(s)) window.steps.push(s);
				}
			}).observe(document.getElementById("content"), {childList: true, subtree: true}); true`, nil),
	), must.Sprint("opening the volume from the list"))
	var noClaims string
	must.NoError(t, chromedp.Run(ctx, chromedp.Text(`#claims`, &noClaims, chromedp.ByQuery)))
	must.StrContains(t, noClaims, "No claims")

	app := &Workload{JobID: "app", Type: "service", Volume: "data", AccessMode: SingleNodeWriter, Script: "sleep 3600"}
	c.RunJob(t, app.JobID, app.HCL(h.Root))

	// The claim appears live and reaches taken.
	var allocID string
	must.NoError(t, chromedp.Run(ctx,
		chromedp.WaitVisible(`#claims tr[data-step="taken"]`, chromedp.ByQuery),
		chromedp.AttributeValue(`#claims tr[data-step="taken"]`, "data-alloc", &allocID, nil, chromedp.ByQuery),
		chromedp.WaitVisible(`#claims tr[data-step="taken"] li[data-to="taken"]`, chromedp.ByQuery),
		shot("2-claim-taken"),
	), must.Sprint("waiting for the page to show the claim taken"))
	allocs := c.WaitForAllocs(t, "app", 1, api.AllocClientStatusRunning)
	must.Eq(t, allocs[0].ID, allocID, must.Sprint("the page shows another alloc's claim"))

	c.Berth(t, "job", "stop", "app")
	sel := `#past-claims tr[data-alloc="` + allocID + `"][data-step="freed"]`
	var steps []string
	var sameLoad bool
	var explain, live string
	must.NoError(t, chromedp.Run(ctx,
		chromedp.WaitVisible(sel, chromedp.ByQuery),
		chromedp.WaitVisible(sel+` li[data-to="freed"]`, chromedp.ByQuery),
		chromedp.Text(`#claims`, &live, chromedp.ByQuery),
		chromedp.Evaluate(`window.steps`, &steps),
		chromedp.Evaluate(`window.sameLoad === true`, &sameLoad),
		chromedp.WaitVisible(`#explain > *`, chromedp.ByQuery),
		chromedp.Text(`#explain`, &explain, chromedp.ByQuery),
		shot("3-claim-freed"),
	), must.Sprint("waiting for the page to show the claim freed"))
	must.True(t, sameLoad, must.Sprint("the page reloaded: it must update in place"))
	must.StrContains(t, live, "No claims")
	t.Logf("steps the page showed: %v; explain: %q", steps, explain)
	must.SliceContains(t, steps, allocID+" taken")
	must.SliceContains(t, steps, allocID+" freed")
	iTaken := indexOf(steps, allocID+" taken")
	must.Less(t, indexOf(steps, allocID+" freed"), iTaken, must.Sprintf("steps out of order: %v", steps))
	must.NotEq(t, "", strings.TrimSpace(explain))

	// The job's page lists the alloc, whose page shows its task.
	allocLink := `#extra a[href="/ui/alloc/` + allocID + `"]`
	var task string
	must.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/ui/job/app"),
		chromedp.WaitVisible(allocLink, chromedp.ByQuery),
		chromedp.Click(allocLink, chromedp.ByQuery),
		chromedp.WaitVisible(`body[data-page="alloc"] #extra tbody td`, chromedp.ByQuery),
		chromedp.Text(`#extra tbody td`, &task, chromedp.ByQuery),
		shot("4-alloc"),
	), must.Sprint("following the job's alloc"))
	must.Eq(t, WorkloadTask, task)
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// chromiumPath finds Chromium ($BERTH_CHROMIUM, else the distribution's)
// or skips, saying how to install it.
func chromiumPath(t *testing.T) string {
	if p := os.Getenv("BERTH_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium binary (looked for chromium, chromium-browser, google-chrome on PATH and $BERTH_CHROMIUM): run `make browser` as root, which apt-get installs Debian's chromium")
	return ""
}

// artifactsDir is where a test saves screenshots: under
// $BERTH_TEST_ARTIFACTS (kept), else the test's temp dir.
func artifactsDir(t *testing.T) string {
	dir := os.Getenv("BERTH_TEST_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	dir = filepath.Join(dir, t.Name())
	must.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}
