package nomad

import (
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/go-memdb"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// pageStore holds volumes in namespaces whose names sort differently as
// "<ns>.<id>" strings than in the index ("a-b" vs "a").
func pageStore(t *testing.T) *state.StateStore {
	t.Helper()
	s, err := state.NewStateStore(nil)
	must.NoError(t, err)
	var vols []*structs.CSIVolume
	for _, nsID := range [][2]string{{"a", "v1"}, {"a", "v2"}, {"a-b", "v1"}, {"a-b", "x.y"}, {"b", "v1"}} {
		vols = append(vols, &structs.CSIVolume{Namespace: nsID[0], ID: nsID[1], PluginID: "p-" + nsID[0]})
	}
	must.NoError(t, s.UpsertCSIVolumes(10, vols))
	return s
}

func TestPaginate(t *testing.T) {
	s := pageStore(t)
	cases := []struct {
		name      string
		q         structs.QueryOptions
		want      []string
		wantToken string
	}{
		{name: "everything in index order", want: []string{"a/v1", "a/v2", "a-b/v1", "a-b/x.y", "b/v1"}},
		{name: "first page", q: structs.QueryOptions{PerPage: 2},
			want: []string{"a/v1", "a/v2"}, wantToken: "a-b.v1"},
		{name: "page from a token", q: structs.QueryOptions{PerPage: 2, NextToken: "a-b.v1"},
			want: []string{"a-b/v1", "a-b/x.y"}, wantToken: "b.v1"},
		{name: "token of an id with a dot", q: structs.QueryOptions{PerPage: 2, NextToken: "a-b.x.y"},
			want: []string{"a-b/x.y", "b/v1"}},
		{name: "token of a deleted object", q: structs.QueryOptions{NextToken: "a.v3"},
			want: []string{"a-b/v1", "a-b/x.y", "b/v1"}},
		{name: "page exactly full", q: structs.QueryOptions{PerPage: 5},
			want: []string{"a/v1", "a/v2", "a-b/v1", "a-b/x.y", "b/v1"}},
		{name: "filter counts only matches", q: structs.QueryOptions{PerPage: 1, Filter: `ID == "v1"`},
			want: []string{"a/v1"}, wantToken: "a-b.v1"},
		{name: "filter and token", q: structs.QueryOptions{Filter: `ID == "v1"`, NextToken: "a-b.v1"},
			want: []string{"a-b/v1", "b/v1"}},
		{name: "filter on a typed field", q: structs.QueryOptions{Filter: `PluginID matches "^p-a"`},
			want: []string{"a/v1", "a/v2", "a-b/v1", "a-b/x.y"}},
		{name: "reverse", q: structs.QueryOptions{Reverse: true, PerPage: 2},
			want: []string{"b/v1", "a-b/x.y"}, wantToken: "a-b.v1"},
		{name: "reverse from a token", q: structs.QueryOptions{Reverse: true, PerPage: 2, NextToken: "a-b.v1"},
			want: []string{"a-b/v1", "a/v2"}, wantToken: "a.v1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			iter, err := s.CSIVolumes(nil, structs.AllNamespaces)
			must.NoError(t, err)
			p, err := paginate(iter, &tc.q,
				func(v *structs.CSIVolume) pageKey { return nsKey(v.Namespace, v.ID) },
				(*structs.CSIVolume).Stub)
			must.NoError(t, err)
			got := []string{}
			for _, v := range p.Items {
				got = append(got, v.Namespace+"/"+v.ID)
			}
			must.Eq(t, tc.want, got)
			must.Eq(t, tc.wantToken, p.NextToken)
		})
	}
}

func TestPaginate_BadFilter(t *testing.T) {
	s := pageStore(t)
	for _, expr := range []string{`ID ==`, `NoSuchField == "x"`} {
		iter, err := s.CSIVolumes(nil, structs.AllNamespaces)
		must.NoError(t, err)
		_, err = paginate(iter, &structs.QueryOptions{Filter: expr},
			func(v *structs.CSIVolume) pageKey { return nsKey(v.Namespace, v.ID) },
			(*structs.CSIVolume).Stub)
		must.True(t, errors.Is(err, structs.ErrInvalid), must.Sprintf("%s: got %v", expr, err))
		must.StrContains(t, err.Error(), fmt.Sprintf("invalid filter %q", expr))
	}
	// An empty result is [] on the wire, not null.
	iter, err := s.CSIVolumes(nil, "none")
	must.NoError(t, err)
	p, err := paginate(iter, &structs.QueryOptions{}, func(v *structs.CSIVolume) pageKey { return nsKey(v.Namespace, v.ID) }, (*structs.CSIVolume).Stub)
	must.NoError(t, err)
	must.NotNil(t, p.Items)
}

func TestLookupByPrefix(t *testing.T) {
	s := pageStore(t)
	ids := make([]string, 12)
	vols := make([]*structs.CSIVolume, 12)
	for i := range vols {
		ids[i] = fmt.Sprintf("many-%02d", i)
		vols[i] = &structs.CSIVolume{Namespace: "a", ID: ids[i], PluginID: "p"}
	}
	must.NoError(t, s.UpsertCSIVolumes(11, vols))
	lookup := func(id string) (*structs.CSIVolume, error) {
		return lookupByPrefix("volume", id,
			func() (*structs.CSIVolume, error) { return s.CSIVolumeByID(nil, "a", id) },
			func() (memdb.ResultIterator, error) { return s.CSIVolumesByIDPrefix(nil, "a", id) },
			func(v *structs.CSIVolume) string { return v.ID })
	}
	cases := []struct {
		id, want, err string
	}{
		{id: "v1", want: "v1"},
		{id: "v", err: `volume ID prefix "v" is ambiguous: it matches 2 volumes (v1, v2); give more of the ID`},
		{id: "many-1", err: "matches 2 volumes (many-10, many-11)"},
		{id: "many-11", want: "many-11"},
		{id: "many", err: "matches 12 volumes (many-00, many-01, many-02, many-03, many-04, many-05, many-06, many-07, many-08, many-09 and 2 more)"},
		{id: "zzz", want: ""},
	}
	for _, tc := range cases {
		t.Run(tc.id, func(t *testing.T) {
			v, err := lookup(tc.id)
			if tc.err != "" {
				must.True(t, errors.Is(err, structs.ErrInvalid))
				must.StrContains(t, err.Error(), tc.err)
				return
			}
			must.NoError(t, err)
			if tc.want == "" {
				must.Nil(t, v)
				return
			}
			must.Eq(t, tc.want, v.ID)
		})
	}
}
