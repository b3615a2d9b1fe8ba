package client

import (
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

func TestParseCPUInfo(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want cpuInfo
	}{
		{
			name: "x86 two cores",
			in: "processor\t: 0\nmodel name\t: AMD EPYC\ncpu MHz\t\t: 2596.132\n\n" +
				"processor\t: 1\nmodel name\t: AMD EPYC\ncpu MHz\t\t: 2400.000\n",
			want: cpuInfo{Cores: 2, MHz: 2596.132, Model: "AMD EPYC"},
		},
		{
			name: "arm without MHz",
			in:   "processor\t: 0\nBogoMIPS\t: 50.00\n\nprocessor\t: 1\nBogoMIPS\t: 50.00\n",
			want: cpuInfo{Cores: 2},
		},
		{name: "empty", in: "", want: cpuInfo{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, tc.want, parseCPUInfo(strings.NewReader(tc.in)))
		})
	}
}

func TestParseMemInfo(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    uint64
		wantErr bool
	}{
		{name: "kB", in: "MemTotal:       24684096 kB\nMemFree: 1 kB\n", want: 24684096 * 1024},
		{name: "missing", in: "MemFree: 1 kB\n", wantErr: true},
		{name: "garbage", in: "MemTotal: lots kB\n", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMemInfo(strings.NewReader(tc.in))
			if tc.wantErr {
				must.Error(t, err)
				return
			}
			must.NoError(t, err)
			must.Eq(t, tc.want, got)
		})
	}
}

func TestParseOSRelease(t *testing.T) {
	id, v := parseOSRelease(strings.NewReader("NAME=\"Ubuntu\"\nID=ubuntu\nVERSION_ID=\"24.04\"\n"))
	must.Eq(t, "ubuntu", id)
	must.Eq(t, "24.04", v)
}

func TestFingerprintHost(t *testing.T) {
	fp := fingerprintHost("10.1.2.3")
	must.Eq(t, "10.1.2.3", fp.Attributes["unique.network.ip-address"])
	for _, k := range []string{"kernel.name", "cpu.arch", "cpu.numcores", "unique.hostname"} {
		must.MapContainsKey(t, fp.Attributes, k)
	}
	must.Positive(t, fp.Resources.CPU)
	must.Positive(t, fp.Resources.MemoryMB)
}

func TestDriversEqual(t *testing.T) {
	a := map[string]*structs.DriverInfo{"mock": {Detected: true, Healthy: true}}
	b := map[string]*structs.DriverInfo{"mock": {Detected: true, Healthy: false}}
	must.True(t, driversEqual(a, a))
	must.False(t, driversEqual(a, b))
	must.False(t, driversEqual(a, nil))
}
