package builtin

import (
	"context"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

func TestDrivers(t *testing.T) {
	ds := Drivers(nil, t.TempDir())
	want := map[string]structs.MountConfigSupport{
		"raw_exec": structs.MountConfigSupportNone,
		"exec":     structs.MountConfigSupportAll,
	}
	must.MapLen(t, len(want), ds)
	for name, mc := range want {
		d, ok := ds[name]
		must.True(t, ok, must.Sprintf("no %s driver", name))
		must.Eq(t, name, d.Name())
		must.Eq(t, mc, d.Capabilities().MountConfig)
		must.NotNil(t, d.Fingerprint(context.Background()))
	}
}
