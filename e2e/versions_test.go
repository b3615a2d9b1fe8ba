package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/shoenig/test/must"
)

// versionsJob is a batch job whose count is the one thing that changes
// between its versions. No client runs it: versions are the servers'.
func versionsJob(count int) string {
	return fmt.Sprintf(`job "hist" {
  type = "batch"
  group "g" {
    count = %d
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
}
`, count)
}

// historyVersions are the numbers of the "Version = n" lines of `berth job
// history`.
func historyVersions(out string) []string {
	var vs []string
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && strings.TrimSpace(k) == "Version" {
			vs = append(vs, strings.TrimSpace(v))
		}
	}
	return vs
}

// TestE2E_JobHistory is issue 17's: after a spec change `berth job
// history` shows two versions and -p what changed. The versions are in
// Raft: with the leader killed, the new leader shows the same two, and
// `berth job revert` through it makes a third with the first's spec.
func TestE2E_JobHistory(t *testing.T) {
	h := NewHarness(t)
	c := h.NewCluster(t, 3, 0)
	c.RunJob(t, "hist", versionsJob(1))
	c.RunJob(t, "hist", versionsJob(1)) // the same spec: no new version
	c.RunJob(t, "hist", versionsJob(2))

	out := c.Berth(t, "job", "history", "-p", "hist")
	must.Eq(t, []string{"1", "0"}, historyVersions(out), must.Sprint(out))
	must.StrContains(t, out, `+/- Count: "1" => "2"`)

	leader := c.WaitForLeader(t)
	leader.Kill(t)
	newLeader := c.WaitForLeader(t)
	out, err := c.BerthOn(newLeader, "job", "history", "-p", "hist")
	must.NoError(t, err, must.Sprint(out))
	must.Eq(t, []string{"1", "0"}, historyVersions(out), must.Sprint(out))
	must.StrContains(t, out, `+/- Count: "1" => "2"`)

	out, err = c.BerthOn(newLeader, "job", "revert", "-detach", "hist", "0")
	must.NoError(t, err, must.Sprint(out))
	out, err = c.BerthOn(newLeader, "job", "history", "-p", "hist")
	must.NoError(t, err, must.Sprint(out))
	must.Eq(t, []string{"2", "1", "0"}, historyVersions(out), must.Sprint(out))
	must.StrContains(t, out, `+/- Count: "2" => "1"`)
}
