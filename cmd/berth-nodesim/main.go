// Command berth-nodesim runs many simulated client nodes in one process
// against a Berth server, to show how the servers scale with nodes, volumes
// and claims. Each simulated node is the real client (registration,
// heartbeats, the alloc watch and status sync, the CSI fingerprint and
// hook) with the minimal alloc runner (allocrunner.NewMinimal: no tasks)
// and a fake CSI node plugin of its own, which the client dials and calls
// through gRPC, served in memory (-plugin-socket: on a unix socket). It registers one per_alloc volume
// per alloc, runs one job whose allocs each claim their own, stops it, and
// prints a table. Every phase has a deadline and the whole run is bounded
// by -timeout; it stops by itself.
//
//	berth-nodesim -nodes 500 -allocs 1000            # in-process server
//	berth-nodesim -nodes 500 -address 127.0.0.1:4647 -pid $(pidof berth)
//
// Against a separate agent, start it with limits { rpc_max_conns_per_client
// = 0 }: every simulated node opens two RPC connections, as a real client
// would, all from 127.0.0.1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	_ "net/http/pprof" // -pprof
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-io/berth/plugins/csi"
)

func main() {
	var o options
	flag.IntVar(&o.nodes, "nodes", 500, "simulated client nodes")
	flag.IntVar(&o.allocs, "allocs", 1000, "allocs of the job, each claiming its own per_alloc volume")
	flag.StringVar(&o.address, "address", "", "a server's RPC address on this machine (empty: start one in this process)")
	flag.IntVar(&o.pid, "pid", 0, "with -address: the server's pid, to report its RSS")
	flag.BoolVar(&o.raftMem, "raft-mem", false, "in-process server: keep Raft in memory instead of on disk")
	flag.StringVar(&o.state, "client-state", "mem", "client state store: mem, or bolt (a state.db per node, fsynced as in production)")
	flag.BoolVar(&o.pluginSocket, "plugin-socket", false, "serve each node's fake plugin on a unix socket (two file descriptors a node) instead of in memory")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "hard bound on the whole run")
	flag.DurationVar(&o.settle, "settle", 0, "how long to watch heartbeats once every node is up (default: 1.5 heartbeat TTLs)")
	flag.IntVar(&o.startConcurrency, "start-concurrency", 32, "nodes started at once")
	flag.StringVar(&o.logLevel, "log-level", "off", "log level of the clients and server")
	flag.IntVar(&o.claimCommits, "claim-commits", 0, "in-process server: how many group commits of claim writes may be in Raft at once (0: the server's default)")
	flag.IntVar(&o.gogc, "gogc", 0, "this process's GOGC (garbage collection target percent; 0: as the environment says, Go's default 100); the table shows it")
	flag.StringVar(&o.clientDir, "client-dir", "", "where the simulated nodes' data dirs go (empty: the temporary dir); e.g. /dev/shm, so that the clients' mkdirs of staging and publish paths cost a tmpfs's, not a disk filesystem's")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the run (server and nodes) to this file")
	flag.StringVar(&o.claimsProfile, "cpuprofile-claims", "", "write a CPU profile of the place-and-claim phase only (job register → every volume published) to this file")
	pprofAddr := flag.String("pprof", "", "serve net/http/pprof on this loopback address (e.g. 127.0.0.1:6060), to see where a phase waits")
	flag.Parse()
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "berth-nodesim:", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	o.logger = hclog.New(&hclog.LoggerOptions{Name: "nodesim", Level: hclog.LevelFromString(o.logLevel), Output: os.Stderr})
	// Progress goes to stderr whatever -log-level says.
	progress := hclog.New(&hclog.LoggerOptions{Name: "nodesim", Level: hclog.Info, Output: os.Stderr})
	o.progress = progress
	if *pprofAddr != "" {
		if err := checkLoopback(*pprofAddr); err != nil {
			fmt.Fprintln(os.Stderr, "berth-nodesim: -pprof:", err)
			os.Exit(2)
		}
		// Lives as long as the process; a failure to listen is reported, not fatal.
		go func() {
			if err := http.ListenAndServe(*pprofAddr, nil); err != nil {
				progress.Error("pprof server stopped", "address", *pprofAddr, "error", err)
			}
		}()
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "berth-nodesim:", err)
			os.Exit(2)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "berth-nodesim:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	if o.gogc != 0 {
		debug.SetGCPercent(o.gogc)
	}
	res, cleanup, err := run(ctx, &o)
	res.print(os.Stdout, &o)
	cleanupCtx, cancelCleanup := context.WithTimeout(context.Background(), time.Minute)
	cleanup(cleanupCtx)
	cancelCleanup()
	if err != nil {
		fmt.Fprintln(os.Stderr, "berth-nodesim:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

type options struct {
	nodes, allocs    int
	address          string
	pid              int
	raftMem          bool
	pluginSocket     bool
	state            string
	timeout, settle  time.Duration
	startConcurrency int
	gogc             int
	claimCommits     int
	clientDir        string
	claimsProfile    string
	cpuProfile       string
	logLevel         string
	logger           hclog.Logger
	progress         hclog.Logger
}

func (o *options) validate() error {
	var errs []error
	if o.nodes < 1 {
		errs = append(errs, fmt.Errorf("-nodes %d: want at least 1", o.nodes))
	}
	if o.allocs < 0 {
		errs = append(errs, fmt.Errorf("-allocs %d: want 0 or more", o.allocs))
	}
	if o.state != "mem" && o.state != "bolt" {
		errs = append(errs, fmt.Errorf("-client-state %q: want mem or bolt", o.state))
	}
	if o.address != "" {
		if err := checkLoopback(o.address); err != nil {
			errs = append(errs, err)
		}
	} else if o.pid != 0 {
		errs = append(errs, errors.New("-pid only goes with -address (the in-process server's RSS is this process's)"))
	}
	if o.gogc < -1 {
		errs = append(errs, fmt.Errorf("-gogc %d: want a percent, or -1 to turn the collector off", o.gogc))
	}
	if o.clientDir != "" {
		// Each node's plugin socket path, checked by the client even when
		// the plugin is served in memory, must fit in sun_path.
		sock := filepath.Join(o.clientDir, "nodesim0123456789", "sim-00000", "csi.sock")
		if fi, err := os.Stat(o.clientDir); err != nil || !fi.IsDir() {
			errs = append(errs, fmt.Errorf("-client-dir %q: want an existing directory", o.clientDir))
		} else if len(sock) > csi.MaxSocketPathLen {
			errs = append(errs, fmt.Errorf("-client-dir %q: the nodes' plugin socket paths under it (%s) would be over %d bytes; pick a shorter dir", o.clientDir, sock, csi.MaxSocketPathLen))
		}
	}
	if o.claimsProfile != "" && o.cpuProfile != "" {
		errs = append(errs, errors.New("-cpuprofile-claims and -cpuprofile: one CPU profile at a time; pick one"))
	}
	if o.startConcurrency < 1 {
		o.startConcurrency = 1
	}
	return errors.Join(errs...)
}
