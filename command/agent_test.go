package command

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/command/agent"
)

func TestAgentCommand_DevStartsAndStopsCleanly(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "ports.hcl")
	must.NoError(t, os.WriteFile(cfg, []byte("log_level = \"WARN\"\nports {\n  http = 0\n  rpc = 0\n}\n"), 0o600))

	var out, errOut bytes.Buffer
	ready := make(chan *agent.Agent, 1)
	stop := make(chan struct{})
	cmd := &AgentCommand{ui: &UI{Out: &out, Err: &errOut}, ready: ready, stop: stop}
	code := make(chan int, 1)
	go func() { code <- cmd.Run([]string{"-dev", "-config", cfg}) }()

	var a *agent.Agent
	select {
	case a = <-ready:
	case c := <-code:
		t.Fatalf("agent exited with %d before it was ready: %s", c, errOut.String())
	}
	must.NotNil(t, a.Server())
	close(stop)
	must.Eq(t, 0, <-code, must.Sprintf("stderr: %s", errOut.String()))
	must.StrContains(t, out.String(), "Berth agent started (server + client)")
	must.StrContains(t, out.String(), "Agent stopped")
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
