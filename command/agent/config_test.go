package agent

import (
	"os"
	"path/filepath"
	"testing"

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
		{"unspecified needs advertise", func(c *Config) { c.Server.Enabled = boolPtr(true); c.DataDir = "/x" }, "needs advertise"},
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

func TestParseConfigFile_Examples(t *testing.T) {
	files, err := filepath.Glob("../../examples/cluster/*.hcl")
	must.NoError(t, err)
	must.SliceNotEmpty(t, files)
	for _, f := range files {
		c, err := ParseConfigFile(f)
		must.NoError(t, err, must.Sprintf("%s", f))
		must.NoError(t, DefaultConfig().Merge(c).Validate(), must.Sprintf("%s", f))
	}
	_, err = ParseConfigFile(filepath.Join(t.TempDir(), "missing.hcl"))
	must.ErrorIs(t, err, os.ErrNotExist)
}
