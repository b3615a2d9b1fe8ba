package nomad_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"

	"github.com/berth-io/berth/nomad"
	"github.com/berth-io/berth/nomad/msgpack"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil"
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

// BenchmarkClaimWrites measures the servers' claim write path with Raft
// on disk: each op is one caller's claim write (an alloc's claim from
// Taken to freed, in one group, on one of 1,000 volumes) through the group commit,
// by 1 writer and by 64 at once. entries/op is how many Raft entries the
// writes took: 1 alone, far fewer when writers share entries.
func BenchmarkClaimWrites(b *testing.B) {
	for _, writers := range []int{1, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			dir := b.TempDir()
			s := cluster.NewServer(b, func(c *nomad.Config) {
				c.DevMode = false
				c.DataDir = dir
			})
			var nreply structs.NodeUpdateResponse
			if err := s.RPC("Node.Register", &structs.NodeRegisterRequest{Node: csiNode(0, false)}, &nreply); err != nil {
				b.Fatal(err)
			}
			const vols = 1000
			var batch []*structs.CSIVolume
			for i := range vols {
				batch = append(batch, testVolume(fmt.Sprintf("v%d", i), hostpath))
			}
			var reply structs.CSIVolumeRegisterResponse
			if err := s.RPC("CSIVolume.Register", &structs.CSIVolumeRegisterRequest{Volumes: batch}, &reply); err != nil {
				b.Fatal(err)
			}
			var n atomic.Int64
			write := func() {
				i := n.Add(1)
				vol, alloc := fmt.Sprintf("v%d", i%vols), fmt.Sprintf("alloc-%d", i)
				var steps []*structs.CSIVolumeClaimUpdate
				for _, step := range []structs.CSIClaimStep{structs.CSIClaimTaken, structs.CSIClaimNodeDetached,
					structs.CSIClaimControllerDetached, structs.CSIClaimFreed} {
					steps = append(steps, groupClaim(vol, alloc, "n1", step))
				}
				if _, err := s.WriteClaimsForTest(steps...); err != nil {
					b.Error(err)
				}
			}
			first := lastIndex(s)
			b.ResetTimer()
			if writers == 1 {
				for b.Loop() {
					write()
				}
			} else {
				b.SetParallelism(writers / max(1, runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						write()
					}
				})
			}
			b.StopTimer()
			b.ReportMetric(float64(lastIndex(s)-first)/float64(n.Load()), "entries/op")
		})
	}
}

func lastIndex(s *cluster.Server) uint64 {
	i, _ := strconv.ParseUint(s.Raft().Stats()["last_log_index"], 10, 64)
	return i
}

// BenchmarkVolumeRegisterDisk is one volume's register through the
// in-process RPC (what the HTTP handler calls) with Raft on disk: the
// endpoint's reads and checks, the entry's encoding, Raft, the FSM and
// the answer. Against BenchmarkRaftApplyDirect it is the endpoint's own
// share of a register's latency.
func BenchmarkVolumeRegisterDisk(b *testing.B) {
	dir := b.TempDir()
	s := cluster.NewServer(b, func(c *nomad.Config) {
		c.DevMode = false
		c.DataDir = dir
	})
	var nreply structs.NodeUpdateResponse
	if err := s.RPC("Node.Register", &structs.NodeRegisterRequest{Node: csiNode(0, false)}, &nreply); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		var reply structs.CSIVolumeRegisterResponse
		req := &structs.CSIVolumeRegisterRequest{Volumes: []*structs.CSIVolume{testVolume(fmt.Sprintf("v%d", i), hostpath)}}
		i++
		if err := s.RPC("CSIVolume.Register", req, &reply); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlacePerAllocServer is the placement phase of berth-nodesim
// without the simulated clients: one server, Raft on disk, N ready nodes
// running the volumes' plugin, and one job of A allocs each claiming its
// own volume (per_alloc), from the job's register to its eval complete
// (every plan committed). cpu-ms/op is this process's CPU over that time
// (scheduler, plan applier, Raft, FSM, garbage collection), which is
// what the placement costs the clients' claims sharing the machine.
//
//	go test ./nomad/ -run '^$' -bench PlacePerAllocServer -benchtime 1x
func BenchmarkPlacePerAllocServer(b *testing.B) {
	for _, size := range []struct{ allocs, nodes int }{{6000, 2000}, {10000, 5000}} {
		b.Run(fmt.Sprintf("allocs=%d/nodes=%d", size.allocs, size.nodes), func(b *testing.B) {
			dir := b.TempDir()
			s := cluster.NewServer(b, func(c *nomad.Config) {
				c.DevMode = false
				c.DataDir = dir
				c.HeartbeatTTL = time.Hour // no heartbeats: the nodes stay ready through the run
			})
			for i := range size.nodes {
				n := schedNode(i)
				var reply structs.NodeUpdateResponse
				if err := s.RPC("Node.Register", &structs.NodeRegisterRequest{Node: n}, &reply); err != nil {
					b.Fatal(err)
				}
				req := &structs.NodeUpdateStatusRequest{NodeID: n.ID, Status: structs.NodeStatusReady}
				req.AuthToken = n.SecretID
				if err := s.RPC("Node.UpdateStatus", req, &reply); err != nil {
					b.Fatal(err)
				}
			}
			var placed int
			var cpu time.Duration
			iter := 0
			for b.Loop() {
				b.StopTimer()
				iter++
				family := fmt.Sprintf("v%d", iter)
				for lo := 0; lo < size.allocs; lo += 500 {
					var vols []*structs.CSIVolume
					for i := lo; i < min(lo+500, size.allocs); i++ {
						vols = append(vols, testVolume(fmt.Sprintf("%s[%d]", family, i), hostpath))
					}
					if err := s.RPC("CSIVolume.Register", &structs.CSIVolumeRegisterRequest{Volumes: vols}, &structs.CSIVolumeRegisterResponse{}); err != nil {
						b.Fatal(err)
					}
				}
				job := withCSIVolume(schedJob(fmt.Sprintf("job%d", iter), size.allocs), family)
				job.TaskGroups[0].Volumes["data"].PerAlloc = true
				job.TaskGroups[0].Tasks[0].Resources = &structs.Resources{CPU: 10, MemoryMB: 10}
				startCPU := processCPU()
				b.StartTimer()
				var reply structs.JobRegisterResponse
				if err := s.RPC("Job.Register", &structs.JobRegisterRequest{Job: job}, &reply); err != nil {
					b.Fatal(err)
				}
				testutil.WaitForResultUntil(b, 10*time.Minute, func() (bool, error) {
					e, err := s.State().EvalByID(nil, reply.EvalID)
					return err == nil && e != nil && e.Status != structs.EvalStatusPending, err
				})
				b.StopTimer()
				cpu += processCPU() - startCPU
				allocs, err := s.State().AllocsByJob(nil, structs.DefaultNamespace, job.ID)
				if err != nil {
					b.Fatal(err)
				}
				if len(allocs) != size.allocs {
					b.Fatalf("placed %d allocs, want %d", len(allocs), size.allocs)
				}
				placed += len(allocs)
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(placed)/b.Elapsed().Seconds(), "placements/s")
		})
	}
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
