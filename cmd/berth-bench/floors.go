package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// floorWAL appends n entries, one at a time, to a raft-wal opened in dir
// (the file system of the agent's data_dir), each the size of a volume
// registration, and returns each StoreLog's latency: one write + fsync.
// With a pause, the process sleeps that long before each append, as the
// agent's log sits idle between one lone write and the next (a register
// after the last one's answer): on a machine whose idle CPUs halt, that
// append takes longer than one in a tight loop (bare.go).
func floorWAL(ctx context.Context, dir string, n int, pause time.Duration) ([]time.Duration, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("raft-wal floor: %w", err)
	}
	wal, err := raftwal.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("raft-wal floor: opening %s: %w", dir, err)
	}
	defer wal.Close()
	data, err := json.Marshal(benchVolume("bench-floor-0000"))
	if err != nil {
		return nil, err
	}
	samples := make([]time.Duration, 0, n)
	for i := range n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		l := &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: data}
		if pause > 0 {
			time.Sleep(pause)
		}
		start := time.Now()
		if err := wal.StoreLog(l); err != nil {
			return nil, fmt.Errorf("raft-wal floor: appending entry %d: %w", i+1, err)
		}
		samples = append(samples, time.Since(start))
	}
	return samples, nil
}

// grpcWarmup calls are made before timing: the first dials the socket.
const grpcWarmup = 20

// floorGRPC makes n sequential CSI Probe calls to the plugin listening on
// the unix socket sock, on one connection, and returns their latencies.
func floorGRPC(ctx context.Context, sock string, n int) ([]time.Duration, error) {
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("gRPC floor: connecting to %s: %w", sock, err)
	}
	defer conn.Close()
	id := csi.NewIdentityClient(conn)
	samples := make([]time.Duration, 0, n)
	for i := range grpcWarmup + n {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		start := time.Now()
		_, err := id.Probe(cctx, &csi.ProbeRequest{})
		d := time.Since(start)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("gRPC floor: Probe to %s: %w", sock, err)
		}
		if i >= grpcWarmup {
			samples = append(samples, d)
		}
	}
	return samples, nil
}

// floorMount bind-mounts a directory onto another and unmounts it, n
// times, with the raw syscalls, and returns each pair's latency.
func floorMount(ctx context.Context, dir string, n int) ([]time.Duration, error) {
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	for _, d := range []string{src, dst} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("bind mount floor: %w", err)
		}
	}
	samples := make([]time.Duration, 0, n)
	for range n {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		start := time.Now()
		if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
			return nil, fmt.Errorf("bind mount floor: mount %s on %s: %w", src, dst, err)
		}
		if err := unix.Unmount(dst, 0); err != nil {
			return nil, fmt.Errorf("bind mount floor: umount %s: %w", dst, err)
		}
		samples = append(samples, time.Since(start))
	}
	return samples, nil
}
