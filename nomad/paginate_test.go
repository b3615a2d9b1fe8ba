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

// TestLookupExact: single-object reads are exact, as Nomad's are; a
// prefix names nothing (the CLI resolves prefixes with ?prefix= lists),
// and across namespaces an ID that exists in several is refused.
func TestLookupExact(t *testing.T) {
	s := pageStore(t)
	must.NoError(t, s.UpsertCSIVolumes(11, []*structs.CSIVolume{
		{Namespace: "a", ID: "many-1", PluginID: "p"}, {Namespace: "a", ID: "many-10", PluginID: "p"},
		{Namespace: "b", ID: "many-1", PluginID: "p"}, {Namespace: "b", ID: "only-b", PluginID: "p"},
	}))
	lookup := func(ns, id string) (*structs.CSIVolume, error) {
		return lookupExact("volume", id,
			func() (*structs.CSIVolume, error) {
				if ns == structs.AllNamespaces {
					return nil, nil
				}
				return s.CSIVolumeByID(nil, ns, id)
			},
			func() (memdb.ResultIterator, error) { return s.CSIVolumesByIDPrefix(nil, ns, id) },
			func(v *structs.CSIVolume) string { return v.ID })
	}
	cases := []struct {
		ns, id, want, err string
	}{
		{ns: "a", id: "v1", want: "a/v1"},
		{ns: "a", id: "v", want: "", err: ""},
		{ns: "a", id: "many-1", want: "a/many-1"},
		{ns: "a", id: "many", want: ""},
		{ns: "*", id: "only-b", want: "b/only-b"},
		{ns: "*", id: "only", want: ""},
		{ns: "*", id: "many-1", err: `volume ID "many-1" exists in 2 namespaces; name the namespace`},
		{ns: "a", id: "zzz", want: ""},
	}
	for _, tc := range cases {
		t.Run(tc.ns+"/"+tc.id, func(t *testing.T) {
			v, err := lookup(tc.ns, tc.id)
			if tc.err != "" {
				must.True(t, errors.Is(err, structs.ErrInvalid))
				must.StrContains(t, err.Error(), tc.err)
				return
			}
			must.NoError(t, err)
			if tc.want == "" {
				must.Nil(t, v, must.Sprint("a prefix names nothing"))
				return
			}
			must.Eq(t, tc.want, v.Namespace+"/"+v.ID)
		})
	}
}
