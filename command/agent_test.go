package command

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/command/agent"
	"github.com/berth-io/berth/testutil"
)

// runDevAgent runs `berth agent <args>` on free ports until it is ready,
// stops it, and returns its exit code and output. The -dev hostpath plugin
// runs executable (the test binary is not berth).
func runDevAgent(t *testing.T, executable string, args ...string) (int, string, string) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "ports.hcl")
	must.NoError(t, os.WriteFile(cfg, []byte("log_level = \"WARN\"\nports {\n  http = 0\n  rpc = 0\n}\n"), 0o600))

	var out, errOut bytes.Buffer
	ready := make(chan *agent.Agent, 1)
	stop := make(chan struct{})
	cmd := &AgentCommand{ui: &UI{Out: &out, Err: &errOut}, ready: ready, stop: stop, executable: executable}
	code := make(chan int, 1)
	go func() { code <- cmd.Run(append(args, "-config", cfg)) }()

	var a *agent.Agent
	select {
	case a = <-ready:
	case c := <-code:
		t.Fatalf("agent exited with %d before it was ready: %s", c, errOut.String())
	}
	must.NotNil(t, a.Server())
	close(stop)
	return <-code, out.String(), errOut.String()
}

func TestAgentCommand_DevStartsAndStopsCleanly(t *testing.T) {
	code, out, errOut := runDevAgent(t, testutil.BuildBerth(t), "-dev")
	must.Eq(t, 0, code, must.Sprintf("stderr: %s", errOut))
	must.StrContains(t, out, "Berth agent started (server + client)")
	must.StrContains(t, out, `CSI:      plugin "hostpath" (monolith) as job "hostpath"; volumes under `)
	if os.Geteuid() == 0 {
		must.StrNotContains(t, out, "Warning:")
	} else {
		must.StrContains(t, out, "Warning:  volumes cannot be mounted (berth plugin status hostpath says so too): hostpath: not running as root")
	}
	must.StrContains(t, out, "Agent stopped")
}

func TestAgentCommand_DevNoPlugin(t *testing.T) {
	code, out, errOut := runDevAgent(t, "", "-dev", "-dev-no-plugin")
	must.Eq(t, 0, code, must.Sprintf("stderr: %s", errOut))
	must.StrContains(t, out, "Berth agent started (server + client)")
	must.StrNotContains(t, out, "CSI:")
}

func TestAgentCommand_DevNoPluginNeedsDev(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Run([]string{"agent", "-dev-no-plugin", "-data-dir", t.TempDir()}, &out, &errOut)
	must.Eq(t, 1, code)
	must.StrContains(t, errOut.String(), "-dev-no-plugin needs -dev")
}

func TestAgentCommand_BadConfigNamesFileAndLine(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "bad.hcl")
	must.NoError(t, os.WriteFile(cfg, []byte("server {\n  bootstrap_expect = \"three\"\n}\n"), 0o600))
	var out, errOut bytes.Buffer
	code := Run([]string{"agent", "-config", cfg}, &out, &errOut)
	must.Eq(t, 1, code)
	must.StrContains(t, errOut.String(), "bad.hcl:2,")
	must.StrContains(t, errOut.String(), "bootstrap_expect")
}

func TestRun_UnknownCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	must.Eq(t, 1, Run([]string{"frobnicate"}, &out, &errOut))
	must.StrContains(t, errOut.String(), `Unknown command "frobnicate"`)

	errOut.Reset()
	must.Eq(t, 1, Run([]string{"operator", "raft"}, &out, &errOut))
	must.StrContains(t, errOut.String(), "list-peers")
}
