package hostpath

import (
	"testing"

	"github.com/shoenig/test/must"
)

func TestPage(t *testing.T) {
	ids := []string{"a", "b", "c", "d", "e"}
	self := func(s string) string { return s }
	cases := []struct {
		name     string
		token    string
		max      int32
		want     []string
		wantNext string
		wantErr  string
	}{
		{name: "all", want: ids},
		{name: "first page", max: 2, want: []string{"a", "b"}, wantNext: pageToken("c")},
		{name: "middle page", token: pageToken("c"), max: 2, want: []string{"c", "d"}, wantNext: pageToken("e")},
		{name: "last page exactly", token: pageToken("d"), max: 2, want: []string{"d", "e"}},
		{name: "rest", token: pageToken("b"), want: []string{"b", "c", "d", "e"}},
		{name: "token of a deleted entry", token: pageToken("bb"), max: 1, want: []string{"c"}, wantNext: pageToken("d")},
		{name: "token past the end", token: pageToken("z"), want: []string{}},
		{name: "foreign token", token: "invalid-token", wantErr: "was not returned by this plugin"},
		{name: "negative max", max: -1, wantErr: "must not be negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, next, err := page(ids, self, tc.token, tc.max)
			if tc.wantErr != "" {
				must.ErrorContains(t, err, tc.wantErr)
				return
			}
			must.NoError(t, err)
			must.Eq(t, tc.want, got)
			must.EqOp(t, tc.wantNext, next)
		})
	}
}
