package shared

import (
	"testing"

	"github.com/shoenig/test/must"
)

func TestHookResources_CopiesBothWays(t *testing.T) {
	r := NewHookResources()
	must.MapEmpty(t, r.GetCSIMounts())

	in := map[string]*CSIMount{"data": {VolumeID: "vol1", Source: "/host/a"}}
	r.SetCSIMounts(in)
	in["data"].Source = "/changed-by-setter"

	got := r.GetCSIMounts()
	must.Eq(t, "/host/a", got["data"].Source)
	got["data"].Source = "/changed-by-getter"
	must.Eq(t, "/host/a", r.GetCSIMounts()["data"].Source)
}
