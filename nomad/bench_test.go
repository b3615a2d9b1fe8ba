package nomad_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"

	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/nomad/msgpack"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil/cluster"
)

// BenchmarkRaftApplyRPC measures a small write through the full path a
// remote caller takes: TCP RPC → endpoint → Raft apply with the WAL on
// disk (fsync) → FSM → reply. Compare with BenchmarkRawWALAppend on the
// same disk: the target is under 2x.
func BenchmarkRaftApplyRPC(b *testing.B) {
	dir := b.TempDir()
	s := cluster.NewServer(b, func(c *nomad.Config) {
		c.DevMode = false
		c.DataDir = dir
	})
	pool := nomad.NewConnPool(0)
	b.Cleanup(pool.Close)
	node := testNode(0)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		node.Name = fmt.Sprintf("node-%d", i)
		var reply structs.NodeUpdateResponse
		if err := pool.RPC(ctx, s.Addr, "Node.Register", &structs.NodeRegisterRequest{Node: node}, &reply); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRawWALAppend is the floor: one raft-wal append (one fsync) of
// an entry the size of a node registration.
func BenchmarkRawWALAppend(b *testing.B) {
	wal, err := raftwal.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { wal.Close() })
	buf, err := msgpack.Encode(structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: testNode(0)})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := wal.StoreLog(&raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: buf}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRaftApplyDirect is Raft alone on the same disk: Apply of a
// pre-encoded entry, waiting for the FSM. It splits the RPC path's cost
// into Raft's share and ours.
func BenchmarkRaftApplyDirect(b *testing.B) {
	dir := b.TempDir()
	s := cluster.NewServer(b, func(c *nomad.Config) {
		c.DevMode = false
		c.DataDir = dir
	})
	buf, err := msgpack.Encode(structs.NodeRegisterRequestType, &structs.NodeRegisterRequest{Node: testNode(0)})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Raft().Apply(buf, 0).Error(); err != nil {
			b.Fatal(err)
		}
	}
}
