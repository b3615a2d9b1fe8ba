package command

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/command/agent"
	"github.com/berth-io/berth/testutil"
)

// devAgent starts an in-process -dev agent (no CSI plugin) and points the
// CLI at it.
func devAgent(t *testing.T) *api.Client {
	t.Helper()
	cfg := agent.DevConfig()
	zero := 0
	cfg.Ports = &agent.Ports{HTTP: &zero, RPC: &zero}
	cfg.LogLevel = "OFF"
	a, err := agent.NewAgent(cfg, io.Discard)
	must.NoError(t, err)
	t.Cleanup(func() { a.Shutdown() })
	testutil.WaitForResult(t, func() (bool, error) {
		if a.Server().Leader() == "" {
			return false, errors.New("no leader yet")
		}
		return true, nil
	})
	t.Setenv("BERTH_ADDR", "http://"+a.HTTPAddr())
	t.Setenv("BERTH_TOKEN", "")
	t.Setenv("BERTH_NAMESPACE", "")
	c, err := api.NewClient(nil)
	must.NoError(t, err)
	return c
}

func runCLI(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := Run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// The Nomad-parity commands against a real agent: server members, eval
// list and status, job inspect, agent-info and status <prefix>.
func TestNomadParityCommands(t *testing.T) {
	client := devAgent(t)
	id, typ := "web", "service"
	name := "g"
	job := &api.Job{ID: &id, Type: &typ, TaskGroups: []*api.TaskGroup{{Name: &name, Tasks: []*api.Task{{
		Name: "t", Driver: "raw_exec", Config: map[string]any{"command": "/bin/sleep", "args": []string{"300"}},
	}}}}}
	job.Canonicalize()
	reg, _, err := client.Jobs().Register(job, nil)
	must.NoError(t, err)

	code, out, errOut := runCLI("server", "members")
	must.Eq(t, 0, code, must.Sprint(errOut))
	must.StrContains(t, out, "alive")
	must.StrContains(t, out, "true")

	code, out, errOut = runCLI("eval", "list")
	must.Eq(t, 0, code, must.Sprint(errOut))
	must.StrContains(t, out, reg.EvalID[:8])
	must.StrContains(t, out, "job-register")

	code, out, errOut = runCLI("eval", "status", reg.EvalID[:6])
	must.Eq(t, 0, code, must.Sprint(errOut))
	must.StrContains(t, out, "Job ID             = web")
	code, _, errOut = runCLI("eval", "status", "ffffffff")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, "ffffffff")

	code, out, errOut = runCLI("job", "inspect", "web")
	must.Eq(t, 0, code, must.Sprint(errOut))
	must.StrContains(t, out, `"Job": {`)
	must.StrContains(t, out, `"ID": "web"`)
	code, out, _ = runCLI("job", "inspect", "web", "-t", "{{.Type}}")
	must.Eq(t, 0, code)
	must.Eq(t, "service\n", out)

	code, out, errOut = runCLI("agent-info")
	must.Eq(t, 0, code, must.Sprint(errOut))
	must.StrContains(t, out, "raft")
	must.StrContains(t, out, "leader = true")

	// status <prefix> shows what the prefix names with its own command.
	code, out, errOut = runCLI("status", "we")
	must.Eq(t, 0, code, must.Sprint(errOut))
	must.StrContains(t, out, "web")
	code, out, errOut = runCLI("status", reg.EvalID[:8])
	must.Eq(t, 0, code, must.Sprint(errOut))
	must.StrContains(t, out, "TriggeredBy")
	code, _, errOut = runCLI("status", "zzz")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, `ID starting with "zzz"`)
}

func TestJobValidateAndHistory(t *testing.T) {
	devAgent(t)
	dir := t.TempDir()
	good := dir + "/good.hcl"
	must.NoError(t, os.WriteFile(good, []byte(`job "v" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
}`), 0o600))
	code, out, errOut := runCLI("job", "validate", good)
	must.Eq(t, 0, code, must.Sprint(errOut))
	must.StrContains(t, out, "Job validation successful")

	bad := dir + "/bad.hcl"
	must.NoError(t, os.WriteFile(bad, []byte(`job "v" { group "g" {} }`), 0o600))
	code, _, errOut = runCLI("job", "validate", bad)
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, "Job validation errors")

	code, _, _ = runCLI("job", "history", "v")
	must.Eq(t, 1, code, must.Sprint("validate registers nothing"))

	code, _, errOut = runCLI("job", "run", "-detach", good)
	must.Eq(t, 0, code, must.Sprint(errOut))
	code, out, errOut = runCLI("job", "history", "v")
	must.Eq(t, 0, code, must.Sprint(errOut))
	must.StrContains(t, out, "Version")
	must.StrContains(t, out, "0")
}
