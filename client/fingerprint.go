package client

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

// hostFingerprint is what the machine offers, read once at start.
type hostFingerprint struct {
	Attributes map[string]string
	Resources  *structs.NodeResources
}

// fingerprintHost reads /proc and /etc for CPU, memory, kernel and OS
// facts. Missing files leave attributes out rather than failing: a node
// with fewer attributes can still run tasks.
func fingerprintHost(networkIP string) *hostFingerprint {
	attrs := map[string]string{
		"kernel.name": runtime.GOOS,
		"cpu.arch":    runtime.GOARCH,
		// Nomad's CLI reads the agent version from this key.
		"nomad.version": helper.Version,
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		attrs["kernel.version"] = strings.TrimSpace(string(b))
	}
	if f, err := os.Open("/etc/os-release"); err == nil {
		name, version := parseOSRelease(f)
		f.Close()
		if name != "" {
			attrs["os.name"] = name
		}
		if version != "" {
			attrs["os.version"] = version
		}
	}
	if host, err := os.Hostname(); err == nil {
		attrs["unique.hostname"] = host
	}
	if networkIP == "" {
		networkIP = firstNetworkIP()
	}
	if networkIP != "" {
		attrs["unique.network.ip-address"] = networkIP
	}

	res := &structs.NodeResources{}
	cpu := cpuInfo{Cores: runtime.NumCPU()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		cpu = parseCPUInfo(f)
		f.Close()
	}
	if cpu.Cores == 0 {
		cpu.Cores = runtime.NumCPU()
	}
	if cpu.MHz == 0 {
		cpu.MHz = maxFreqMHz()
	}
	attrs["cpu.numcores"] = strconv.Itoa(cpu.Cores)
	if cpu.Model != "" {
		attrs["cpu.modelname"] = cpu.Model
	}
	if cpu.MHz > 0 {
		res.CPU = int64(cpu.MHz) * int64(cpu.Cores)
		attrs["cpu.frequency"] = strconv.Itoa(int(cpu.MHz))
		attrs["cpu.totalcompute"] = strconv.FormatInt(res.CPU, 10)
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		if total, err := parseMemInfo(f); err == nil {
			res.MemoryMB = int64(total >> 20)
			attrs["memory.totalbytes"] = strconv.FormatUint(total, 10)
		}
		f.Close()
	}
	return &hostFingerprint{Attributes: attrs, Resources: res}
}

// cpuInfo is what /proc/cpuinfo says.
type cpuInfo struct {
	Cores int
	MHz   float64
	Model string
}

// parseCPUInfo counts processors and reads the first "cpu MHz" and
// "model name".
func parseCPUInfo(r io.Reader) cpuInfo {
	var ci cpuInfo
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "processor":
			ci.Cores++
		case "cpu MHz":
			if ci.MHz == 0 {
				ci.MHz, _ = strconv.ParseFloat(v, 64)
			}
		case "model name":
			if ci.Model == "" {
				ci.Model = v
			}
		}
	}
	return ci
}

// maxFreqMHz reads cpufreq for machines whose cpuinfo has no MHz (arm64).
func maxFreqMHz() float64 {
	b, err := os.ReadFile("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
	if err != nil {
		return 0
	}
	khz, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
	if err != nil {
		return 0
	}
	return khz / 1000
}

// parseMemInfo returns MemTotal in bytes.
func parseMemInfo(r io.Reader) (uint64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			break
		}
		n, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parsing MemTotal %q: %w", rest, err)
		}
		if len(fields) > 1 && strings.EqualFold(fields[1], "kB") {
			n *= 1024
		}
		return n, nil
	}
	return 0, fmt.Errorf("no MemTotal in meminfo")
}

// parseOSRelease returns ID and VERSION_ID from os-release.
func parseOSRelease(r io.Reader) (id, version string) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok {
			continue
		}
		v = strings.Trim(v, `"'`)
		switch k {
		case "ID":
			id = v
		case "VERSION_ID":
			version = v
		}
	}
	return id, version
}

// firstNetworkIP returns the first global unicast address of an up,
// non-loopback interface, IPv4 preferred.
func firstNetworkIP() string {
	ifaces, err := net.Interfaces()
	if err != nil {
		return ""
	}
	var v6 string
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok || !ipn.IP.IsGlobalUnicast() {
				continue
			}
			if ipn.IP.To4() != nil {
				return ipn.IP.String()
			}
			if v6 == "" {
				v6 = ipn.IP.String()
			}
		}
	}
	return v6
}

// fingerprintDrivers asks every driver for its fingerprint.
func fingerprintDrivers(ctx context.Context, ds map[string]drivers.Driver) map[string]*structs.DriverInfo {
	out := make(map[string]*structs.DriverInfo, len(ds))
	for name, d := range ds {
		info := d.Fingerprint(ctx)
		if info == nil {
			info = &structs.DriverInfo{HealthDescription: "driver returned no fingerprint"}
		}
		out[name] = info
	}
	return out
}

// driversEqual reports whether two driver fingerprints say the same.
func driversEqual(a, b map[string]*structs.DriverInfo) bool {
	return maps.EqualFunc(a, b, func(x, y *structs.DriverInfo) bool {
		return x.Detected == y.Detected && x.Healthy == y.Healthy && x.MountConfig == y.MountConfig &&
			x.HealthDescription == y.HealthDescription && maps.Equal(x.Attributes, y.Attributes)
	})
}
