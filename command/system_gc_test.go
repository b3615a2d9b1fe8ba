package command

import (
	"testing"

	"github.com/shoenig/test/must"
)

func TestSystemGC(t *testing.T) {
	f := newFakeAPI(t)
	code, out, _ := f.run("system", "gc")
	must.Eq(t, 0, code)
	must.StrContains(t, out, "Garbage collection requested")
	write, _, _ := f.lastWrite()
	must.StrHasPrefix(t, "PUT /v1/system/gc", write)

	f.update(func(f *fakeAPI) { f.failCode, f.failBody = 403, "Permission denied" })
	code, _, errOut := f.run("system", "gc")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, "Error running garbage collection: Unexpected response code: 403 (Permission denied)")
}
