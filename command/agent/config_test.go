package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

func TestParseConfig(t *testing.T) {
	src := `
name      = "s1"
data_dir  = "/var/lib/berth"
bind_addr = "127.0.0.1"
log_level = "DEBUG"
ports {
  http = 5646
  rpc  = 5647
}
server {
  enabled          = true
  bootstrap_expect = 3
  server_join      = ["127.0.0.1:5647", "127.0.0.1:5747"]
  job_tracked_versions = 10
}
client {
  enabled = true
  meta = { rack = "r1" }
}
plugin "raw_exec" {
  config {
    enabled = true
  }
}
`
	c, err := ParseConfig("agent.hcl", []byte(src))
	must.NoError(t, err)
	merged := DefaultConfig().Merge(c)
	must.Eq(t, "s1", merged.Name)
	must.Eq(t, "/var/lib/berth", merged.DataDir)
	must.Eq(t, 5646, merged.Ports.HTTPPort())
	must.Eq(t, 5647, merged.Ports.RPCPort())
	must.True(t, merged.ServerEnabled())
	must.True(t, merged.ClientEnabled())
	must.Eq(t, 3, merged.Server.BootstrapExpect)
	must.SliceLen(t, 2, merged.Server.ServerJoin)
	must.Eq(t, 10, *merged.Server.JobTrackedVersions)
	must.Eq(t, "r1", merged.Client.Meta["rack"])
	must.SliceLen(t, 1, merged.Plugins)
	must.Eq(t, "raw_exec", merged.Plugins[0].Name)
	must.NoError(t, merged.Validate())
}

func TestParseConfig_Errors(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"syntax", "data_dir = \n", `agent.hcl:1,12: Invalid expression`},
		{"unknown attribute", "dat_dir = \"/x\"\n", `agent.hcl:1,1: Unsupported argument; An argument named "dat_dir" is not expected here`},
		{"wrong type", "ports {\n  http = \"eighty\"\n}\n", "agent.hcl:2,11: Unsuitable value type; Unsuitable value: a number is required\n    2 |   http = \"eighty\""},
		{"unknown block", "serverr {\n}\n", `agent.hcl:1,1: Unsupported block type`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig("agent.hcl", []byte(c.src))
			must.Error(t, err)
			must.StrContains(t, err.Error(), c.want)
		})
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		mod  func(c *Config)
		want string
	}{
		{"nothing enabled", func(c *Config) {}, "neither server nor client is enabled"},
		{"no data dir", func(c *Config) { c.Server.Enabled = boolPtr(true) }, "data_dir is required"},
		{"bad bind", func(c *Config) { c.Server.Enabled = boolPtr(true); c.DataDir = "/x"; c.BindAddr = "nope" }, `bind_addr "nope" is not an IP address`},
		{"unspecified needs advertise", func(c *Config) { c.Server.Enabled = boolPtr(true); c.DataDir = "/x"; c.BindAddr = "0.0.0.0" }, "needs advertise"},
		{"no tracked versions", func(c *Config) {
			c.Server.Enabled = boolPtr(true)
			c.DataDir = "/x"
			c.Server.JobTrackedVersions = new(0)
		}, "server.job_tracked_versions = 0: want 1 or more"},
		{"bad level", func(c *Config) { c.Client.Enabled = boolPtr(true); c.DataDir = "/x"; c.LogLevel = "LOUD" }, `log_level "LOUD"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			c.mod(cfg)
			err := cfg.Validate()
			must.Error(t, err)
			must.StrContains(t, err.Error(), c.want)
		})
	}
	must.NoError(t, DevConfig().Validate())
}

// TestDefaultConfig_BindsLoopback: a non-dev agent listens on loopback
// unless bind_addr says otherwise, and is valid as such.
func TestDefaultConfig_BindsLoopback(t *testing.T) {
	cfg := DefaultConfig()
	must.Eq(t, "127.0.0.1", cfg.BindAddr)
	cfg.Server.Enabled = boolPtr(true)
	cfg.DataDir = "/x"
	must.NoError(t, cfg.Validate())
	fc, err := ParseConfig("agent.hcl", []byte(`bind_addr = "0.0.0.0"`+"\nadvertise {\n  rpc = \"10.0.0.1:4647\"\n}\n"))
	must.NoError(t, err)
	must.Eq(t, "0.0.0.0", cfg.Merge(fc).BindAddr)
}

func TestParseConfigFile_Examples(t *testing.T) {
	files, err := filepath.Glob("../../examples/cluster/*.hcl")
	must.NoError(t, err)
	must.SliceNotEmpty(t, files)
	for _, f := range files {
		c, err := ParseConfigFile(f)
		must.NoError(t, err, must.Sprintf("%s", f))
		must.NoError(t, DefaultConfig().Merge(c).Validate(), must.Sprintf("%s", f))
	}
	// The tls example is a block laid over a server's config.
	tc, err := ParseConfigFile("../../examples/tls/tls.hcl")
	must.NoError(t, err)
	sc, err := ParseConfigFile("../../examples/cluster/server1.hcl")
	must.NoError(t, err)
	merged := DefaultConfig().Merge(sc).Merge(tc)
	must.NoError(t, merged.Validate())
	must.True(t, merged.tlsRPC() && merged.tlsHTTP())
	_, err = ParseConfigFile(filepath.Join(t.TempDir(), "missing.hcl"))
	must.ErrorIs(t, err, os.ErrNotExist)
}

func TestParseConfig_DisconnectDeadline(t *testing.T) {
	cases := []struct {
		name, src string
		want      time.Duration
	}{
		{"default", "client {\n  enabled = true\n}\n", DefaultDisconnectDeadline},
		{"set", "client {\n  disconnect_deadline = \"90s\"\n}\n", 90 * time.Second},
		{"off", "client {\n  disconnect_deadline = \"0\"\n}\n", 0},
		{"off as a number", "client {\n  disconnect_deadline = 0\n}\n", 0},
		{"no client block", "", DefaultDisconnectDeadline},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig("agent.hcl", []byte(tc.src))
			must.NoError(t, err)
			merged := DefaultConfig().Merge(c)
			must.Eq(t, tc.want, merged.Client.DisconnectDeadlineOrDefault())
			must.Eq(t, tc.want, DevConfig().Merge(c).Client.DisconnectDeadlineOrDefault(), must.Sprint("dev agents too"))
		})
	}
	must.Eq(t, DefaultDisconnectDeadline, (&ClientConfig{}).DisconnectDeadlineOrDefault())

	errs := []struct {
		name, src, want string
	}{
		{"bad unit", "client {\n  disconnect_deadline = \"5x\"\n}\n",
			"agent.hcl:2,25: Invalid duration; disconnect_deadline: \"5x\" is not a duration; write a duration like \"5m\" or \"90s\"\n    2 |   disconnect_deadline = \"5x\""},
		{"no unit", "client {\n  disconnect_deadline = 300\n}\n", `agent.hcl:2,25: Invalid duration; disconnect_deadline: "300" is not a duration`},
		{"negative", "client {\n  disconnect_deadline = \"-1m\"\n}\n", `agent.hcl:2,25: Invalid duration; disconnect_deadline: "-1m" is negative`},
		{"not a string", "client {\n  disconnect_deadline = [\"5m\"]\n}\n", `agent.hcl:2,25: Invalid duration; disconnect_deadline: a string is required`},
	}
	for _, tc := range errs {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("agent.hcl", []byte(tc.src))
			must.Error(t, err)
			must.StrContains(t, err.Error(), tc.want)
		})
	}
}

func TestParseConfig_CSIStatsInterval(t *testing.T) {
	c, err := ParseConfig("agent.hcl", []byte("client {\n  csi_stats_interval = \"5s\"\n}\n"))
	must.NoError(t, err)
	merged := DefaultConfig().Merge(c)
	must.NotNil(t, merged.Client.CSIStatsInterval)
	must.Eq(t, 5*time.Second, *merged.Client.CSIStatsInterval)
	must.Nil(t, DefaultConfig().Client.CSIStatsInterval, must.Sprint("unset takes the client's default"))

	for _, bad := range []string{`"31s"`, `"0s"`} {
		_, err := ParseConfig("agent.hcl", []byte("client {\n  csi_stats_interval = "+bad+"\n}\n"))
		must.Error(t, err)
		must.StrContains(t, err.Error(), "agent.hcl:2")
		must.StrContains(t, err.Error(), "at most 30s")
	}
}

// TestAgent_ClientPromisesDisconnectDeadline: the agent's client puts the
// deadline into the node it registers.
func TestAgent_ClientPromisesDisconnectDeadline(t *testing.T) {
	a := newDevAgent(t)
	must.Eq(t, DefaultDisconnectDeadline, a.client.Node().DisconnectDeadline)
}

func TestParseConfig_Limits(t *testing.T) {
	c, err := ParseConfig("agent.hcl", []byte("limits {\n  http_max_body_bytes = 1024\n  rpc_max_conns_per_client = 0\n}\n"))
	must.NoError(t, err)
	merged := DevConfig().Merge(c)
	must.Eq(t, int64(1024), merged.httpMaxBody())
	must.Eq(t, 0, merged.rpcMaxConnsPerClient())
	must.Eq(t, int64(DefaultHTTPMaxBodyBytes), DevConfig().httpMaxBody())
	must.Eq(t, DefaultRPCMaxConnsPerClient, DevConfig().rpcMaxConnsPerClient())

	c, err = ParseConfig("agent.hcl", []byte("limits {\n  http_max_body_bytes = -1\n  rpc_max_conns_per_client = -2\n}\n"))
	must.NoError(t, err)
	err = DevConfig().Merge(c).Validate()
	must.ErrorContains(t, err, "limits.http_max_body_bytes = -1 must be positive")
	must.ErrorContains(t, err, "limits.rpc_max_conns_per_client = -2 must not be negative")
}

// Nomad agent configs carry keys over: the ones Berth has a meaning for
// are accepted and take effect; the others are refused with what Berth
// does instead, never a bare "unsupported".
func TestParseConfig_NomadKeys(t *testing.T) {
	c, err := ParseConfig("nomad.hcl", []byte(`
disable_update_check = true
advertise { http = "10.0.0.1:4646" }
client {
  enabled           = true
  network_interface = "lo"
  options           = { "driver.raw_exec.enable" = "1" }
}
`))
	must.NoError(t, err)
	must.True(t, *c.DisableUpdateCheck)
	must.Eq(t, "10.0.0.1:4646", c.Advertise.HTTP)
	ip, err := c.Client.networkIP()
	must.NoError(t, err)
	must.Eq(t, "127.0.0.1", ip)
	drivers, err := enabledDrivers(c)
	must.NoError(t, err)
	must.True(t, drivers["raw_exec"], must.Sprint("driver.raw_exec.enable turns raw_exec on outside -dev"))

	off, err := ParseConfig("off.hcl", []byte(`client { options = { "driver.raw_exec.enable" = "false" } }`))
	must.NoError(t, err)
	off.DevMode = true
	drivers, err = enabledDrivers(off)
	must.NoError(t, err)
	must.False(t, drivers["raw_exec"])

	bad := &ClientConfig{NetworkInterface: "nosuch0"}
	_, err = bad.networkIP()
	must.ErrorContains(t, err, `client.network_interface "nosuch0": no such interface (this host has lo`)

	for src, want := range map[string]string{
		`client { chroot_env = { "/bin" = "/bin" } }`:               "Berth's exec driver builds each task's root",
		`client { options = { "driver.allowlist" = "exec" } }`:      `plugin "raw_exec" {} enables raw_exec`,
		`client { options = { "user.denylist" = "root" } }`:         "the one client option Berth reads is driver.raw_exec.enable",
		`client { options = { "driver.raw_exec.enable" = "yes" } }`: "want true or false",
	} {
		_, err := ParseConfig("x.hcl", []byte(src))
		must.ErrorContains(t, err, want, must.Sprint(src))
	}
}
