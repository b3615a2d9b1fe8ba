package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/helper/steptrace"
)

// The register's floor: one volume register with no Berth code in it.
// The bench starts itself again as a bare net/http server, so the layout
// is the bench's and the agent's (two processes, loopback TCP, one
// keep-alive connection, net/http on both ends). Its PUT handler reads
// the body, appends it to a raft-wal in the agent's file system (one write
// and fsync) and answers it back; the bench calls it with the api
// package's Register, as it registers volumes on the agent, one after the
// other. What a register takes above this is Berth's own work.
//
// Why the WAL append's own floor is not enough: on this kind of machine a
// process that sleeps between requests pays to be woken, and an fsync
// issued after an idle spell takes longer than one in a tight loop (a
// Firecracker VM whose vCPUs halt when idle: 0.24–0.27 ms against
// 0.10–0.17 ms for the same append, session 9). A lone register pays
// both, on each side of the connection.

// bareRegisterEnv, set to a directory, makes berth-bench the bare server
// instead of the bench (the raft-wal lives in that directory).
const bareRegisterEnv = "BERTH_BENCH_BARE_REGISTER"

// bareWarmup calls are made before timing: the first dials.
const bareWarmup = 20

// bareMain runs the bare server when the environment asks for it (the
// bench started this binary as one): ok says it did, code is the exit
// status.
func bareMain() (code int, ok bool) {
	dir := os.Getenv(bareRegisterEnv)
	if dir == "" {
		return 0, false
	}
	if err := serveBareRegister(dir, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "berth-bench: bare register server:", err)
		return 1, true
	}
	return 0, true
}

// serveBareRegister is the bare server: it prints its address on stdout
// and serves until its stdin closes (the bench exits or is done with it).
func serveBareRegister(dir string, stdin io.Reader, stdout io.Writer) error {
	wal, err := raftwal.Open(dir)
	if err != nil {
		return fmt.Errorf("opening the raft-wal in %s: %w", dir, err)
	}
	defer wal.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var (
		mu    sync.Mutex
		index uint64
	)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The agent's step names, keyed as the agent keys them (the
		// path's volume ID): the bench splits both the same way.
		id := strings.TrimPrefix(r.URL.Path, "/v1/volume/csi/")
		steptrace.Mark(id, steptrace.RegisterReceived)
		body, err := io.ReadAll(r.Body)
		if err == nil {
			steptrace.Mark(id, steptrace.RegisterProposed)
			mu.Lock()
			index++
			err = wal.StoreLog(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: body})
			mu.Unlock()
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		steptrace.Mark(id, steptrace.RegisterCommitted)
		// The request is {"Volumes": [...]}: the answer's shape.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})}
	go func() {
		io.Copy(io.Discard, stdin)
		srv.Close()
	}()
	fmt.Fprintln(stdout, ln.Addr().String())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// bareRegisterPath is the bare server's steps: the HTTP request in, the
// body read, the WAL append, the answer out (legs named as the agent's).
var bareRegisterPath = []string{stepRegSent, steptrace.RegisterReceived, steptrace.RegisterProposed,
	steptrace.RegisterCommitted, stepRegDone}

// floorRegister starts the bare server with its raft-wal and its step
// trace (bareTraceName) in dir and makes n register calls to it, one at a
// time; it returns each call's latency and when it was sent and returned
// (volume ID → sent, returned), as registerVolumes does.
func floorRegister(ctx context.Context, dir string, n int) ([]time.Duration, map[string][2]time.Time, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("register floor: finding this binary: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("register floor: %w", err)
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), bareRegisterEnv+"="+dir, steptrace.EnvFile+"="+filepath.Join(dir, bareTraceName))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("register floor: starting the bare server: %w", err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return nil, nil, fmt.Errorf("register floor: reading the bare server's address: %w", err)
	}
	c, err := api.NewClient(&api.Config{Address: "http://" + strings.TrimSpace(addr)})
	if err != nil {
		return nil, nil, err
	}
	samples := make([]time.Duration, 0, n)
	times := make(map[string][2]time.Time, n)
	for i := range bareWarmup + n {
		v := benchVolume(fmt.Sprintf("bench-floor-%04d", i))
		start := time.Now()
		if _, err := c.CSIVolumes().Register(v, writeOpts(ctx)); err != nil {
			return nil, nil, fmt.Errorf("register floor: call %d: %w", i+1, err)
		}
		if i >= bareWarmup {
			done := time.Now()
			samples = append(samples, done.Sub(start))
			times[v.ID] = [2]time.Time{start, done}
		}
	}
	return samples, times, nil
}

// bareTraceName is the bare server's step trace file in its dir.
const bareTraceName = "steps.trace"
