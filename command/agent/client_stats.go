package agent

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-io/berth/client"
	"github.com/berth-io/berth/nomad/structs"
)

// Resource usage of this agent's client, in the shapes of Nomad's API:
//
//	GET /v1/client/stats                      the host: CPU, memory, disks, uptime
//	GET /v1/client/allocation/:id/stats       each task's process tree: CPU and memory
//
// Both read /proc. CPU percentages need two readings, so each request
// takes two statsSample apart.

// statsSample is the interval between the two readings of a CPU figure.
const statsSample = 100 * time.Millisecond

// clockTicks is USER_HZ, the unit of /proc CPU times (100 on every Linux
// architecture Go supports).
const clockTicks = 100

type hostStats struct {
	Memory           *hostMemoryStats
	CPU              []*hostCPUStats
	DiskStats        []*hostDiskStats
	AllocDirStats    *hostDiskStats
	DeviceStats      []struct{}
	Uptime           uint64
	CPUTicksConsumed float64
	Timestamp        int64
}

type hostMemoryStats struct{ Total, Available, Used, Free uint64 }

type hostCPUStats struct {
	CPU                string
	User, System, Idle float64
}

type hostDiskStats struct {
	Device, Mountpoint    string
	Size, Used, Available uint64
	UsedPercent           float64
	InodesUsedPercent     float64
}

type memoryStats struct {
	RSS, Cache, Swap, Usage, MaxUsage, KernelUsage, KernelMaxUsage uint64
	Measured                                                       []string
}

type cpuStats struct {
	SystemMode, UserMode, TotalTicks float64
	ThrottledPeriods, ThrottledTime  uint64
	Percent                          float64
	Measured                         []string
}

type resourceUsage struct {
	MemoryStats *memoryStats
	CpuStats    *cpuStats //nolint:revive // Nomad's name
	DeviceStats []struct{}
}

type taskResourceUsage struct {
	ResourceUsage *resourceUsage
	Timestamp     int64
	Pids          map[string]*resourceUsage
}

type allocResourceUsage struct {
	ResourceUsage *resourceUsage
	Tasks         map[string]*taskResourceUsage
	Timestamp     int64
}

// localClient is the agent's client, or a 400 naming why there is none.
func (s *HTTPServer) localClient(r *http.Request) (*client.Client, error) {
	c := s.agent.client
	if c == nil {
		return nil, CodedError(http.StatusBadRequest, "this agent runs no client: ask the agent of the node whose stats you want")
	}
	if id := r.URL.Query().Get("node_id"); id != "" && id != c.NodeID() {
		return nil, CodedError(http.StatusBadRequest, fmt.Sprintf(
			"node %s is not this agent's node (%s): ask that node's agent (its HTTPAddr in node status)", id, c.NodeID()))
	}
	return c, nil
}

func (s *HTTPServer) clientStats(w http.ResponseWriter, r *http.Request) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	c, err := s.localClient(r)
	if err != nil {
		return nil, err
	}
	if err := s.authorizeHTTP(r, structs.HTTPClientStats, ""); err != nil {
		return nil, err
	}
	return readHostStats(r, c.DataDir())
}

func readHostStats(r *http.Request, dataDir string) (*hostStats, error) {
	before, err := readCPUTimes()
	if err != nil {
		return nil, err
	}
	select {
	case <-time.After(statsSample):
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	after, err := readCPUTimes()
	if err != nil {
		return nil, err
	}
	out := &hostStats{Timestamp: time.Now().UnixNano(), DeviceStats: []struct{}{}}
	mhz := cpuMHz()
	for name, a := range after {
		b, ok := before[name]
		total := a.total() - b.total()
		if !ok || total <= 0 {
			continue
		}
		st := &hostCPUStats{CPU: name,
			User:   100 * (a.user - b.user) / total,
			System: 100 * (a.system - b.system) / total,
			Idle:   100 * (a.idle - b.idle) / total,
		}
		out.CPU = append(out.CPU, st)
		out.CPUTicksConsumed += (100 - st.Idle) / 100 * mhz
	}
	if out.Memory, err = readMemInfo(); err != nil {
		return nil, err
	}
	if b, err := os.ReadFile("/proc/uptime"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			up, _ := strconv.ParseFloat(f[0], 64)
			out.Uptime = uint64(up)
		}
	}
	if d := diskStats("/"); d != nil {
		out.DiskStats = append(out.DiskStats, d)
	}
	out.AllocDirStats = diskStats(dataDir)
	return out, nil
}

type cpuTimes struct{ user, system, idle, other float64 }

func (c cpuTimes) total() float64 { return c.user + c.system + c.idle + c.other }

// readCPUTimes reads each CPU's line of /proc/stat ("cpu0 user nice system
// idle iowait irq softirq steal ...").
func readCPUTimes() (map[string]cpuTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return nil, fmt.Errorf("reading host CPU times: %w", err)
	}
	out := map[string]cpuTimes{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
			continue
		}
		var v [8]float64
		for i := 1; i < len(f) && i <= 8; i++ {
			v[i-1], _ = strconv.ParseFloat(f[i], 64)
		}
		out[f[0]] = cpuTimes{user: v[0] + v[1], system: v[2] + v[5] + v[6], idle: v[3] + v[4], other: v[7]}
	}
	return out, nil
}

// cpuMHz is one CPU's clock, from /proc/cpuinfo (0 when unknown).
func cpuMHz() float64 {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "cpu MHz" {
			mhz, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return mhz
		}
	}
	return 0
}

func readMemInfo() (*hostMemoryStats, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return nil, fmt.Errorf("reading host memory: %w", err)
	}
	kb := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		kb[k] = n * 1024
	}
	m := &hostMemoryStats{Total: kb["MemTotal"], Available: kb["MemAvailable"], Free: kb["MemFree"]}
	m.Used = m.Total - m.Available
	return m, nil
}

func diskStats(path string) *hostDiskStats {
	var st syscall.Statfs_t
	if path == "" || syscall.Statfs(path, &st) != nil {
		return nil
	}
	bs := uint64(st.Bsize)
	d := &hostDiskStats{Device: path, Mountpoint: path, Size: st.Blocks * bs, Available: st.Bavail * bs}
	d.Used = d.Size - st.Bfree*bs
	if d.Used+d.Available > 0 {
		d.UsedPercent = 100 * float64(d.Used) / float64(d.Used+d.Available)
	}
	if st.Files > 0 {
		d.InodesUsedPercent = 100 * float64(st.Files-st.Ffree) / float64(st.Files)
	}
	return d
}

// clientAllocStats is the usage of each running task of an alloc on this
// client: the task's process and its descendants, summed.
func (s *HTTPServer) clientAllocStats(w http.ResponseWriter, r *http.Request, allocID string) (any, error) {
	if r.Method != http.MethodGet {
		return nil, methodNotAllowed(r)
	}
	c := s.agent.client
	if c == nil {
		return nil, CodedError(http.StatusBadRequest, "this agent runs no client: ask the agent of the alloc's node")
	}
	// Authorized in the alloc's own namespace, which the servers look up.
	full := resolveLocalAlloc(c.AllocIDs(), allocID)
	args := structs.ACLAuthorizeRequest{Endpoint: structs.HTTPClientAllocStats, AllocID: full,
		QueryOptions: structs.QueryOptions{AuthToken: authToken(r)}}
	if err := s.agent.authRPC(structs.MethodACLAuthorize, &args, &structs.ACLAuthorizeResponse{}); err != nil {
		return nil, err
	}
	pids, err := c.AllocTaskPIDs(full)
	if err != nil {
		return nil, CodedError(http.StatusNotFound, fmt.Sprintf("alloc %s is not running on this agent's node", allocID))
	}
	before := map[string]procUsage{}
	for task, pid := range pids {
		before[task] = treeUsage(pid)
	}
	select {
	case <-time.After(statsSample):
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	now := time.Now()
	out := &allocResourceUsage{Tasks: map[string]*taskResourceUsage{}, Timestamp: now.UnixNano(),
		ResourceUsage: &resourceUsage{MemoryStats: &memoryStats{Measured: memMeasured}, CpuStats: &cpuStats{Measured: cpuMeasured}}}
	for task, pid := range pids {
		a := treeUsage(pid)
		ru := a.usage(before[task], statsSample)
		out.Tasks[task] = &taskResourceUsage{ResourceUsage: ru, Timestamp: now.UnixNano(), Pids: map[string]*resourceUsage{}}
		sum := out.ResourceUsage
		sum.MemoryStats.RSS += ru.MemoryStats.RSS
		sum.MemoryStats.Swap += ru.MemoryStats.Swap
		sum.MemoryStats.Usage += ru.MemoryStats.Usage
		sum.CpuStats.UserMode += ru.CpuStats.UserMode
		sum.CpuStats.SystemMode += ru.CpuStats.SystemMode
		sum.CpuStats.Percent += ru.CpuStats.Percent
		sum.CpuStats.TotalTicks += ru.CpuStats.TotalTicks
	}
	return out, nil
}

var (
	memMeasured = []string{"RSS", "Swap", "Usage"}
	cpuMeasured = []string{"System Mode", "User Mode", "Percent", "Total Ticks"}
)

// procUsage is a process tree's CPU time (seconds) and memory (bytes).
type procUsage struct {
	user, system float64
	rss, swap    uint64
}

// usage turns two readings interval apart into Nomad's ResourceUsage:
// CPU as percentages of one core over the interval, ticks in MHz.
func (u procUsage) usage(before procUsage, interval time.Duration) *resourceUsage {
	secs := interval.Seconds()
	userPct := 100 * (u.user - before.user) / secs
	sysPct := 100 * (u.system - before.system) / secs
	mhz := cpuMHz()
	return &resourceUsage{
		MemoryStats: &memoryStats{RSS: u.rss, Swap: u.swap, Usage: u.rss + u.swap, Measured: memMeasured},
		CpuStats: &cpuStats{UserMode: userPct, SystemMode: sysPct, Percent: userPct + sysPct,
			TotalTicks: (userPct + sysPct) / 100 * mhz, Measured: cpuMeasured},
	}
}

// treeUsage sums the usage of pid and every process descended from it.
func treeUsage(pid int) procUsage {
	children := map[int][]int{}
	if ents, err := os.ReadDir("/proc"); err == nil {
		for _, e := range ents {
			p, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if st, ok := readProcStat(p); ok {
				children[st.ppid] = append(children[st.ppid], p)
			}
		}
	}
	var out procUsage
	seen := map[int]bool{}
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if seen[p] {
			continue
		}
		seen[p] = true
		if st, ok := readProcStat(p); ok {
			out.user += st.utime / clockTicks
			out.system += st.stime / clockTicks
		}
		rss, swap := readProcMem(p)
		out.rss += rss
		out.swap += swap
		queue = append(queue, children[p]...)
	}
	return out
}

type procStat struct {
	ppid         int
	utime, stime float64
}

// readProcStat reads /proc/<pid>/stat; the command name, in parentheses,
// may hold spaces, so fields are counted after its closing one.
func readProcStat(pid int) (procStat, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
	if len(f) < 13 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	ut, _ := strconv.ParseFloat(f[11], 64)
	stt, _ := strconv.ParseFloat(f[12], 64)
	return procStat{ppid: ppid, utime: ut, stime: stt}, true
}

func readProcMem(pid int) (rss, swap uint64) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rss = n * 1024
		case "VmSwap":
			swap = n * 1024
		}
	}
	return rss, swap
}
