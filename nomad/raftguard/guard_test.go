package raftguard

import (
	"io"
	"sync/atomic"
	"testing"
	"time"

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

// TestTransport_NoHeartbeatHandledAfterClose: a heartbeat arriving on a
// connection opened before Close (the transport's connection goroutines
// outlive it) is refused, not handed to Raft, whose log store the server
// closes right after.
func TestTransport_NoHeartbeatHandledAfterClose(t *testing.T) {
	inner, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, 5*time.Second, io.Discard)
	must.NoError(t, err)
	g := New(inner, "self", nil)
	g.Start(func() raft.Configuration { return raft.Configuration{} })
	var handled atomic.Int32
	g.SetHeartbeatHandler(func(rpc raft.RPC) {
		handled.Add(1)
		rpc.Respond(&raft.AppendEntriesResponse{Term: 1, Success: true}, nil)
	})
	sender, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, 5*time.Second, io.Discard)
	must.NoError(t, err)
	defer sender.Close()
	heartbeat := func() error {
		req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("peer"), Addr: []byte(sender.LocalAddr())}, Term: 1}
		return sender.AppendEntries("self", inner.LocalAddr(), req, &raft.AppendEntriesResponse{})
	}
	must.NoError(t, heartbeat())
	must.Eq(t, 1, handled.Load())

	must.NoError(t, g.Close())
	// The sender reuses its pooled connection, whose goroutine on the
	// closed transport still reads.
	err = heartbeat()
	must.Error(t, err)
	must.Eq(t, 1, handled.Load(), must.Sprint("a heartbeat reached Raft after the transport closed"))
}
