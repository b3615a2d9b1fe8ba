package agent

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

// BenchmarkHTTP_VolumeList1000 is the list of 1,000 volumes through the
// HTTP API of a dev agent (DESIGN §7; berth-bench measures the same on an
// agent with Raft on disk). go test -run '^$' -bench VolumeList ./command/agent/
func BenchmarkHTTP_VolumeList1000(b *testing.B) {
	a := newDevAgent(b)
	registerPluginNode(b, a, 1, "hostpath", false)
	for i := range 1000 {
		id := fmt.Sprintf("vol-%04d", i)
		resp, body := do(b, a, http.MethodPut, "/v1/volume/csi/"+id, api.CSIVolumeRegisterRequest{Volumes: []*api.CSIVolume{apiVolume(id, "hostpath")}})
		must.Eq(b, http.StatusOK, resp.StatusCode, must.Sprint(body))
	}
	url := "http://" + a.HTTPAddr() + "/v1/volumes?type=csi"
	b.ResetTimer()
	for b.Loop() {
		resp, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || n < 1000 {
			b.Fatalf("list: %d, %d bytes", resp.StatusCode, n)
		}
	}
}

// BenchmarkHTTP_VolumeRegister is one volume register through the HTTP API
// of a dev agent (in-memory Raft: the HTTP, RPC and FSM path alone).
func BenchmarkHTTP_VolumeRegister(b *testing.B) {
	a := newDevAgent(b)
	registerPluginNode(b, a, 1, "hostpath", false)
	i := 0
	for b.Loop() {
		id := fmt.Sprintf("vol-%06d", i)
		i++
		resp, body := do(b, a, http.MethodPut, "/v1/volume/csi/"+id, api.CSIVolumeRegisterRequest{Volumes: []*api.CSIVolume{apiVolume(id, "hostpath")}})
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("register: %d %s", resp.StatusCode, body)
		}
	}
}

// BenchmarkHTTP_OversizedBody sends a 64 MB chunked body (no
// Content-Length, so the agent must read to find out) to /v1/jobs and
// reports the agent's heap growth per request: the body limit keeps it
// near the 8 MiB limit however large the body.
// go test -run '^$' -bench OversizedBody -benchtime 20x ./command/agent/
func BenchmarkHTTP_OversizedBody(b *testing.B) {
	a := newDevAgent(b)
	url := "http://" + a.HTTPAddr() + "/v1/jobs"
	const size = 64 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for range b.N {
		req, err := http.NewRequest(http.MethodPut, url, io.LimitReader(zeros{}, size))
		must.NoError(b, err)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			must.Eq(b, http.StatusRequestEntityTooLarge, resp.StatusCode)
			resp.Body.Close()
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/(1<<20), "MiB-alloc/op")
	b.ReportMetric(float64(after.HeapInuse)/(1<<20), "MiB-heap-inuse")
}

// zeros is an endless body.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// BenchmarkAPI_VolumeList1000 is BenchmarkHTTP_VolumeList1000 through the
// api package, decoding included, as berth-bench and the CLI list.
func BenchmarkAPI_VolumeList1000(b *testing.B) {
	a := newDevAgent(b)
	registerPluginNode(b, a, 1, "hostpath", false)
	for i := range 1000 {
		id := fmt.Sprintf("vol-%04d", i)
		resp, body := do(b, a, http.MethodPut, "/v1/volume/csi/"+id, api.CSIVolumeRegisterRequest{Volumes: []*api.CSIVolume{apiVolume(id, "hostpath")}})
		must.Eq(b, http.StatusOK, resp.StatusCode, must.Sprint(body))
	}
	c, err := api.NewClient(&api.Config{Address: "http://" + a.HTTPAddr()})
	must.NoError(b, err)
	b.ResetTimer()
	for b.Loop() {
		vols, _, err := c.CSIVolumes().List(nil)
		if err != nil || len(vols) != 1000 {
			b.Fatalf("list: %d volumes, %v", len(vols), err)
		}
	}
}

// BenchmarkHTTP_VolumeRegister1000 registers 1,000 new volumes in one
// request through the HTTP API of a dev agent: one Raft entry, and an
// answer of 1,000 volumes built from one read of the plugins.
func BenchmarkHTTP_VolumeRegister1000(b *testing.B) {
	a := newDevAgent(b)
	registerPluginNode(b, a, 1, "hostpath", false)
	round := 0
	for b.Loop() {
		vols := make([]*api.CSIVolume, 1000)
		for i := range vols {
			vols[i] = apiVolume(fmt.Sprintf("vol-%03d-%04d", round, i), "hostpath")
		}
		round++
		resp, body := do(b, a, http.MethodPut, "/v1/volume/csi/"+vols[0].ID, api.CSIVolumeRegisterRequest{Volumes: vols})
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("register: %d %s", resp.StatusCode, body)
		}
	}
}
