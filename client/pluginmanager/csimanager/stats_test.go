package csimanager

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/client/dynamicplugins"
	"github.com/berth-io/berth/client/state"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi/fake"
)

type abnormalCall struct {
	allocs  []string
	volume  string
	message string
}

// TestManager_VolumeStats: the manager samples each published volume
// through its node plugin at a publish path, reports both units, asks
// only while the plugin advertises GET_VOLUME_STATS, passes the
// condition only with VOLUME_CONDITION, tells OnAbnormal once per
// abnormal message, and stops sampling a volume once it is unpublished.
func TestManager_VolumeStats(t *testing.T) {
	sock := socketPath(t)
	p := fake.Start(t, sock)
	db, root := state.NewMemDB(), t.TempDir()
	var (
		lock     sync.Mutex
		abnormal []abnormalCall
	)
	h := newManagerHarness(t, db, root, func(c *Config) {
		c.OnAbnormal = func(allocs []string, ns, vol, msg string) {
			lock.Lock()
			defer lock.Unlock()
			abnormal = append(abnormal, abnormalCall{allocs, vol, msg})
		}
	})
	h.register("fakeplug", dynamicplugins.PluginTypeCSINode, sock, "plugin-alloc")
	vm := h.nodePlugin("fakeplug")
	ctx := context.Background()

	must.SliceEmpty(t, h.mgr.SampleStats(ctx), must.Sprint("nothing published yet"))
	must.Eq(t, 0, p.Calls("NodeGetVolumeStats"))

	_, err := vm.MountVolume(ctx, testVolume("vol1"), alloc("alloc-a"), rwUsage, nil)
	must.NoError(t, err)
	samples := h.mgr.SampleStats(ctx)
	must.Len(t, 1, samples)
	s := samples[0]
	must.Eq(t, "default", s.Namespace)
	must.Eq(t, "vol1", s.VolumeID)
	must.Eq(t, int64(1<<28), s.Stats.UsedBytes)
	must.Eq(t, int64(1<<30-1<<28), s.Stats.AvailableBytes)
	must.Eq(t, int64(1<<30), s.Stats.TotalBytes)
	must.Eq(t, int64(1<<8), s.Stats.UsedInodes)
	must.Eq(t, int64(1<<16-1<<8), s.Stats.AvailableInodes)
	must.Nil(t, s.Stats.Condition, must.Sprint("no VOLUME_CONDITION advertised"))
	must.Positive(t, s.Stats.SampledAt)
	req := p.LastRequest("NodeGetVolumeStats").(*csipb.NodeGetVolumeStatsRequest)
	must.Eq(t, "ext-vol1", req.GetVolumeId())
	must.Eq(t, filepath.Join(root, "fakeplug/per-alloc/alloc-a/vol1/rw-file-system-multi-node-multi-writer"), req.GetVolumePath())
	must.Eq(t, filepath.Join(root, "fakeplug/staging/default/vol1/rw-file-system-multi-node-multi-writer"), req.GetStagingTargetPath())

	// An abnormal condition, advertised: reported, and told once.
	p.Configure(func(s *fake.Settings) {
		s.NodeCapabilities = append(s.NodeCapabilities, csipb.NodeServiceCapability_RPC_VOLUME_CONDITION)
	})
	p.SetResponse("NodeGetVolumeStats", &csipb.NodeGetVolumeStatsResponse{
		Usage:           []*csipb.VolumeUsage{{Unit: csipb.VolumeUsage_BYTES, Total: 100, Used: 40, Available: 60}},
		VolumeCondition: &csipb.VolumeCondition{Abnormal: true, Message: "disk has I/O errors"},
	})
	abn := map[string]string{}
	for range 2 {
		samples = h.mgr.sampleStats(ctx, abn)
		must.Len(t, 1, samples)
	}
	must.Eq(t, &structs.CSIVolumeCondition{Abnormal: true, Message: "disk has I/O errors"}, samples[0].Stats.Condition)
	must.Eq(t, int64(-1), samples[0].Stats.UsedInodes, must.Sprint("a unit the plugin did not report"))
	lock.Lock()
	must.Eq(t, []abnormalCall{{[]string{"alloc-a"}, "vol1", "disk has I/O errors"}}, abnormal, must.Sprint("told once, not every interval"))
	lock.Unlock()

	// Without GET_VOLUME_STATS the plugin is not asked.
	calls := p.Calls("NodeGetVolumeStats")
	p.Configure(func(s *fake.Settings) {
		s.NodeCapabilities = slices.DeleteFunc(s.NodeCapabilities, func(c csipb.NodeServiceCapability_RPC_Type) bool {
			return c == csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS
		})
	})
	must.SliceEmpty(t, h.mgr.SampleStats(ctx))
	must.Eq(t, calls, p.Calls("NodeGetVolumeStats"))

	// Unpublished: no longer sampled.
	p.Configure(func(s *fake.Settings) { *s = fake.DefaultSettings() })
	must.Len(t, 1, h.mgr.SampleStats(ctx))
	must.NoError(t, vm.UnmountVolume(ctx, VolumeRef{Namespace: "default", ID: "vol1", ExternalID: "ext-vol1"}, "alloc-a", rwUsage))
	must.SliceEmpty(t, h.mgr.SampleStats(ctx))
}

func TestNew_StatsIntervalBound(t *testing.T) {
	reg, err := dynamicplugins.New(state.NewMemDB(), nil)
	must.NoError(t, err)
	_, err = New(Config{Registry: reg, DB: state.NewMemDB(), Root: t.TempDir(), StatsInterval: 2 * structs.MaxCSIStatsInterval})
	must.ErrorContains(t, err, "stats interval")
}

// ExpandVolume grows a published volume at its publish and staging paths;
// a volume not published here has nothing to expand.
func TestVolumeManager_ExpandVolume(t *testing.T) {
	sock := socketPath(t)
	p := fake.Start(t, sock)
	db, root := state.NewMemDB(), t.TempDir()
	h := newManagerHarness(t, db, root, nil)
	h.register("fakeplug", dynamicplugins.PluginTypeCSINode, sock, "plugin-alloc")
	vm := h.nodePlugin("fakeplug").(*volumeManager)
	ctx := context.Background()

	_, err := vm.ExpandVolume(ctx, "default", "vol1", "ext-vol1", 2<<30, 0, nil)
	must.ErrorIs(t, err, ErrNotPublished)
	must.Eq(t, 0, p.Calls("NodeExpandVolume"))

	_, err = vm.MountVolume(ctx, testVolume("vol1"), alloc("alloc-a"), rwUsage, nil)
	must.NoError(t, err)
	size, err := vm.ExpandVolume(ctx, "default", "vol1", "ext-vol1", 2<<30, 0, structs.CSISecrets{"k": "v"})
	must.NoError(t, err)
	must.Eq(t, int64(2<<30), size)
	req := p.LastRequest("NodeExpandVolume").(*csipb.NodeExpandVolumeRequest)
	must.Eq(t, "ext-vol1", req.GetVolumeId())
	must.Eq(t, int64(2<<30), req.GetCapacityRange().GetRequiredBytes())
	must.Eq(t, filepath.Join(root, "fakeplug/per-alloc/alloc-a/vol1/rw-file-system-multi-node-multi-writer"), req.GetVolumePath())
	must.Eq(t, filepath.Join(root, "fakeplug/staging/default/vol1/rw-file-system-multi-node-multi-writer"), req.GetStagingTargetPath())
	must.Eq(t, map[string]string{"k": "v"}, req.GetSecrets())
}
