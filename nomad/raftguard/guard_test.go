package raftguard

import (
	"testing"

	"github.com/hashicorp/raft"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

func TestCheckSender(t *testing.T) {
	cfg := raft.Configuration{Servers: []raft.Server{{ID: "a"}, {ID: "b"}}}
	cases := []struct {
		name   string
		cfg    raft.Configuration
		sender string
		ok     bool
	}{
		{name: "member", cfg: cfg, sender: "b", ok: true},
		{name: "stranger", cfg: cfg, sender: "x"},
		{name: "claims to be self", cfg: cfg, sender: "a"},
		{name: "no configuration yet", sender: "x", ok: true},
		{name: "self with no configuration", sender: "a"},
		{name: "single server", cfg: raft.Configuration{Servers: []raft.Server{{ID: "a"}}}, sender: "b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkSender("a", tc.cfg, raft.RPCHeader{ID: []byte(tc.sender)})
			if tc.ok {
				must.NoError(t, err)
			} else {
				must.ErrorContains(t, err, "refused")
			}
		})
	}
}

func TestCheckEntries(t *testing.T) {
	cmd := func(data ...byte) *raft.Log { return &raft.Log{Index: 7, Type: raft.LogCommand, Data: data} }
	cases := []struct {
		name    string
		entries []*raft.Log
		err     string
	}{
		{name: "known", entries: []*raft.Log{cmd(byte(structs.NodeRegisterRequestType), 0x80)}},
		{name: "flagged unknown is skippable", entries: []*raft.Log{cmd(byte(structs.IgnoreUnknownTypeFlag) | 77)}},
		{name: "configuration entry", entries: []*raft.Log{{Type: raft.LogConfiguration, Data: []byte{200}}}},
		{name: "unknown", entries: []*raft.Log{cmd(byte(structs.NodeRegisterRequestType)), cmd(77)}, err: "raft entry 7 has unknown message type 77"},
		{name: "empty command", entries: []*raft.Log{cmd()}, err: "raft entry 7 is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckEntries(tc.entries)
			if tc.err == "" {
				must.NoError(t, err)
			} else {
				must.ErrorContains(t, err, tc.err)
			}
		})
	}
}
