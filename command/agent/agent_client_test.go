package agent

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

func TestEnabledDrivers(t *testing.T) {
	cases := []struct {
		name string
		dev  bool
		hcl  string
		want map[string]bool
	}{
		{"default", false, "", map[string]bool{"exec": true, "raw_exec": false}},
		{"dev", true, "", map[string]bool{"exec": true, "raw_exec": true}},
		{"raw_exec block", false, `plugin "raw_exec" {}`, map[string]bool{"exec": true, "raw_exec": true}},
		{"raw_exec enabled", false, `plugin "raw_exec" {
  config {
    enabled = true
  }
}`, map[string]bool{"exec": true, "raw_exec": true}},
		{"exec disabled", false, `plugin "exec" {
  config {
    enabled = false
  }
}`, map[string]bool{"exec": false, "raw_exec": false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.DevMode = tc.dev
			if tc.hcl != "" {
				fc, err := ParseConfig("test.hcl", []byte(tc.hcl))
				must.NoError(t, err)
				cfg = cfg.Merge(fc)
			}
			got, err := enabledDrivers(cfg)
			must.NoError(t, err)
			must.Eq(t, tc.want, got)
		})
	}
}

func TestIsBlocking(t *testing.T) {
	must.True(t, isBlocking(&structs.NodeSpecificRequest{QueryOptions: structs.QueryOptions{MinQueryIndex: 3}}))
	must.False(t, isBlocking(&structs.NodeSpecificRequest{}))
	must.False(t, isBlocking(&structs.AllocUpdateRequest{}))
}
