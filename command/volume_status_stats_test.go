package command

import (
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

func TestVolumeStatus_UsageAndExpansion(t *testing.T) {
	c := &VolumeStatusCommand{}
	out := c.formatVolume(&api.CSIVolume{
		ID: "db", Capacity: 2 << 30,
		Stats: map[string]*api.CSIVolumeStats{
			"node-bbbbbbbb-1": {UsedBytes: 3 << 20, AvailableBytes: 1 << 30, TotalBytes: 2 << 30, UsedInodes: 1, AvailableInodes: -1,
				Condition: &api.CSIVolumeCondition{Abnormal: true, Message: "I/O errors"}, SampledAt: 1},
			"node-aaaaaaaa-2": {UsedBytes: 0, AvailableBytes: -1, TotalBytes: -1, UsedInodes: -1, AvailableInodes: -1, SampledAt: 1},
		},
		Expansion: &api.CSIVolumeExpansion{RequestedBytes: 2 << 30, ControllerDone: true, CapacityBytes: 2 << 30,
			NodeRequired: true, Nodes: map[string]string{"node-aaaaaaaa-2": "pending"}, Time: 1},
	})
	usage := out[strings.Index(out, "Usage\n"):]
	lines := strings.Split(usage, "\n")
	must.StrContains(t, lines[1], "Used")
	must.StrContains(t, lines[2], "node-aaa")
	must.StrContains(t, lines[2], "0 B")
	must.StrContains(t, lines[3], "3 MiB")
	must.StrContains(t, lines[3], "abnormal: I/O errors")
	exp := out[strings.Index(out, "Expansion\n"):]
	must.StrContains(t, exp, "expanded to 2 GiB")
	must.StrContains(t, exp, "node-aaa pending")
}

func TestVolumeStatus_MutableParameters(t *testing.T) {
	c := &VolumeStatusCommand{}
	out := c.formatVolume(&api.CSIVolume{ID: "db"})
	must.StrNotContains(t, out, "Mutable Parameters")
	out = c.formatVolume(&api.CSIVolume{
		ID: "db", MutableParameters: map[string]string{"note": "b", "tier": "x"},
		Modification: &api.CSIVolumeModification{Parameters: map[string]string{"iops": "9000"}, Error: "bad iops", Time: 1},
	})
	mod := out[strings.Index(out, "Mutable Parameters\n"):]
	must.StrContains(t, mod, "note")
	must.StrContains(t, mod, "tier")
	must.StrContains(t, mod, "refused iops=9000: bad iops")
}
