package command

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

func writeHistJob(t *testing.T, dir string, count int) string {
	t.Helper()
	path := filepath.Join(dir, "hist.hcl")
	src := `job "hist" {
  type = "batch"
  group "g" {
    count = ` + itoa(uint64(count)) + `
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
}`
	must.NoError(t, os.WriteFile(path, []byte(src), 0o600))
	return path
}

// versionLines are the numbers of the "Version = n" lines of job history.
func versionLines(out string) []string {
	var vs []string
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(k) == "Version" {
			vs = append(vs, strings.TrimSpace(v))
		}
	}
	return vs
}

func TestJobHistoryAndRevert(t *testing.T) {
	client := devAgent(t)
	dir := t.TempDir()

	code, _, errOut := runCLI("job", "run", "-detach", writeHistJob(t, dir, 1))
	must.Eq(t, 0, code, must.Sprint(errOut))
	code, out, errOut := runCLI("job", "history", "hist")
	must.Eq(t, 0, code, must.Sprint(errOut))
	must.Eq(t, []string{"0"}, versionLines(out))

	// The same spec again is no new version; a changed count is.
	code, _, errOut = runCLI("job", "run", "-detach", writeHistJob(t, dir, 1))
	must.Eq(t, 0, code, must.Sprint(errOut))
	code, _, errOut = runCLI("job", "run", "-detach", writeHistJob(t, dir, 2))
	must.Eq(t, 0, code, must.Sprint(errOut))
	code, out, errOut = runCLI("job", "history", "hist")
	must.Eq(t, 0, code, must.Sprint(errOut))
	must.Eq(t, []string{"1", "0"}, versionLines(out))
	must.StrNotContains(t, out, "\nDiff ")

	// -p: what changed, on the newer version; flags may follow the job,
	// and a unique prefix names it.
	code, out, errOut = runCLI("job", "history", "hi", "-p")
	must.Eq(t, 0, code, must.Sprint(errOut))
	must.Eq(t, []string{"1", "0"}, versionLines(out))
	must.StrContains(t, out, `+/- Job: "hist"`)
	must.StrContains(t, out, `+/- Task Group: "g"`)
	must.StrContains(t, out, `+/- Count: "1" => "2"`)
	must.Eq(t, 1, strings.Count(out, "\nDiff "), must.Sprint("the oldest version has nothing to diff against"))

	code, out, errOut = runCLI("job", "history", "-version", "0", "-json", "hist")
	must.Eq(t, 0, code, must.Sprint(errOut))
	var versions []*api.Job
	must.NoError(t, json.Unmarshal([]byte(out), &versions))
	must.SliceLen(t, 1, versions)
	must.Eq(t, 0, *versions[0].Version)
	must.Eq(t, 1, *versions[0].TaskGroups[0].Count)

	code, _, errOut = runCLI("job", "history", "-version", "7", "hist")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, `Job "hist" has no version 7 kept; kept: 1, 0.`)
	code, _, errOut = runCLI("job", "history", "-version", "x", "hist")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, "-version must be a version number")

	// job inspect -version prints that version's spec.
	code, out, errOut = runCLI("job", "inspect", "hist", "-version", "0")
	must.Eq(t, 0, code, must.Sprint(errOut))
	var inspected struct{ Job *api.Job }
	must.NoError(t, json.Unmarshal([]byte(out), &inspected))
	must.Eq(t, 0, *inspected.Job.Version)
	must.Eq(t, 1, *inspected.Job.TaskGroups[0].Count)
	code, _, errOut = runCLI("job", "inspect", "-version", "9", "hist")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, `job "hist" has no version 9 kept; kept: 1, 0`)

	// Revert to version 0: a new version 2 with count 1.
	code, out, errOut = runCLI("job", "revert", "-detach", "hist", "0")
	must.Eq(t, 0, code, must.Sprint(errOut))
	must.UUIDv4(t, strings.TrimSpace(out))
	job, _, err := client.Jobs().Info("hist", nil)
	must.NoError(t, err)
	must.Eq(t, 2, *job.Version)
	must.Eq(t, 1, *job.TaskGroups[0].Count)
	code, out, errOut = runCLI("job", "history", "-p", "-version", "2", "hist")
	must.Eq(t, 0, code, must.Sprint(errOut))
	must.StrContains(t, out, `+/- Count: "2" => "1"`)

	code, _, errOut = runCLI("job", "revert", "hist", "2")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, "already at version 2")
	code, _, errOut = runCLI("job", "revert", "hist", "latest")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, "The version must be a number")
	code, _, errOut = runCLI("job", "revert", "nope", "0")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, "nope")
}
