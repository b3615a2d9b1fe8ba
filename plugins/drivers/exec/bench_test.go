package exec

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/testutil"
)

// BenchmarkTaskCPU starts and waits for exec tasks running /bin/true
// under the berth binary as executor (and init), and reports the CPU
// (user+sys) of the executor, its init and the task per task: what this
// process reaped, so load on the machine changes it far less than wall
// time. BERTH_BENCH_EXECUTOR names another berth binary to measure
// (an older build: Launch's protocol with the executor is the same).
//
//	go test -run '^$' -bench TaskCPU -benchtime 100x ./plugins/drivers/exec/
func BenchmarkTaskCPU(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("the exec driver needs root (mount namespaces, bind mounts, chroot)")
	}
	bin := os.Getenv("BERTH_BENCH_EXECUTOR")
	if bin == "" {
		bin = testutil.BuildBerth(b)
	}
	d := New(hclog.NewNullLogger(), Config{StateDir: b.TempDir(), ExecutorPath: bin})
	base := b.TempDir()
	var before unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_CHILDREN, &before); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("t%d", i)
		cfg := &drivers.TaskConfig{
			ID: "alloc-" + name + "/" + name, AllocID: "alloc-" + name, Name: name,
			Config:   map[string]any{"command": "/bin/true"},
			AllocDir: filepath.Join(base, name, "alloc"), TaskDir: filepath.Join(base, name, name),
			StdoutPath: filepath.Join(base, name, "stdout"), StderrPath: filepath.Join(base, name, "stderr"),
		}
		if err := os.MkdirAll(cfg.AllocDir, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(cfg.TaskDir, "local"), 0o755); err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
		if _, err := d.StartTask(ctx, cfg); err != nil {
			b.Fatal(err)
		}
		ch, err := d.WaitTask(ctx, cfg.ID)
		if err != nil {
			b.Fatal(err)
		}
		res, ok := <-ch
		if !ok || !res.Successful() {
			b.Fatalf("task %s: %+v", name, res)
		}
		if err := d.DestroyTask(ctx, cfg.ID, true); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
	b.StopTimer()
	var after unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_CHILDREN, &after); err != nil {
		b.Fatal(err)
	}
	cpu := time.Duration(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) / time.Duration(b.N)
	b.ReportMetric(float64(cpu.Microseconds())/1000, "cpu-ms/task")
}
