package nomad

import (
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

func TestPluginsToGC(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	empty := func(id string) *structs.CSIPlugin { return &structs.CSIPlugin{ID: id} }
	// As the store's summary row has it: counts, no instance maps.
	running := &structs.CSIPlugin{ID: "running", NodesExpected: 1}

	cases := []struct {
		name       string
		plugins    []*structs.CSIPlugin
		claimed    map[string]bool
		emptySince map[string]time.Time
		force      bool
		want       []string
		wantSince  map[string]time.Time
	}{
		{
			name:      "newly empty: the clock starts",
			plugins:   []*structs.CSIPlugin{empty("a"), running},
			wantSince: map[string]time.Time{"a": now},
		},
		{
			name:       "empty past the threshold",
			plugins:    []*structs.CSIPlugin{empty("a"), empty("b")},
			emptySince: map[string]time.Time{"a": now.Add(-time.Hour), "b": now.Add(-time.Hour + time.Second)},
			want:       []string{"a"},
			wantSince:  map[string]time.Time{"a": now.Add(-time.Hour), "b": now.Add(-time.Hour + time.Second)},
		},
		{
			name:       "running again: the clock stops",
			plugins:    []*structs.CSIPlugin{running},
			emptySince: map[string]time.Time{"running": now.Add(-2 * time.Hour), "deleted": now},
			wantSince:  map[string]time.Time{},
		},
		{
			name:       "a plugin whose volumes hold claims is kept",
			plugins:    []*structs.CSIPlugin{empty("a")},
			claimed:    map[string]bool{"a": true},
			emptySince: map[string]time.Time{"a": now.Add(-2 * time.Hour)},
			wantSince:  map[string]time.Time{"a": now.Add(-2 * time.Hour)},
		},
		{
			name:    "force ignores the threshold, not the claims",
			plugins: []*structs.CSIPlugin{empty("b"), empty("a"), empty("c"), running},
			claimed: map[string]bool{"c": true},
			force:   true,
			want:    []string{"a", "b"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			since := tc.emptySince
			if since == nil && !tc.force {
				since = map[string]time.Time{}
			}
			got := pluginsToGC(tc.plugins, tc.claimed, since, time.Hour, now, tc.force)
			must.Eq(t, tc.want, got)
			if !tc.force {
				must.Eq(t, tc.wantSince, since)
			}
		})
	}
}
