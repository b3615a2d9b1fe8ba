package command

import (
	"bytes"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

func TestJobStop_PurgeAndMonitor(t *testing.T) {
	f := newFakeAPI(t)
	f.update(func(f *fakeAPI) { f.jobs["web"] = webJob("web") })
	f.script(func(f *fakeAPI) { f.evalOf().Status = api.EvalStatusComplete })
	code, out, errOut := f.run("job", "stop", "-purge", "web")
	must.Eq(t, 0, code, must.Sprintf("stderr: %s", errOut))
	write, _, _ := f.lastWrite()
	must.StrHasPrefix(t, "DELETE /v1/job/web?", write)
	must.StrContains(t, write, "purge=true")
	mustOrder(t, out,
		`Monitoring evaluation "e0a1b2c3"`,
		`Evaluation status changed: "pending" -> "complete"`,
		`Evaluation "e0a1b2c3" finished with status "complete"`)
	must.GreaterEq(t, 1, f.blocking)
}

func TestJobStop_Detach(t *testing.T) {
	f := newFakeAPI(t)
	f.update(func(f *fakeAPI) { f.jobs["web"] = webJob("web") })
	code, out, _ := f.run("job", "stop", "-detach", "web")
	must.Eq(t, 0, code)
	must.StrHasPrefix(t, "e0a1b2c3-", out)
	write, _, _ := f.lastWrite()
	must.StrContains(t, write, "purge=false")
}

func TestJobStop_PrefixAsksForConfirmation(t *testing.T) {
	f := newFakeAPI(t)
	f.update(func(f *fakeAPI) { f.jobs["web"] = webJob("web") })

	var out, errOut bytes.Buffer
	cmd := &JobStopCommand{Meta: Meta{ui: &UI{Out: &out, Err: &errOut}}, stdin: strings.NewReader("n\n")}
	must.Eq(t, 0, cmd.Run([]string{"-detach", "we"}))
	must.StrContains(t, out.String(), `Are you sure you want to stop job "web"? [y/N]`)
	must.StrContains(t, out.String(), "Cancelled")
	write, _, _ := f.lastWrite()
	must.Eq(t, "", write)

	out.Reset()
	cmd = &JobStopCommand{Meta: Meta{ui: &UI{Out: &out, Err: &errOut}}, stdin: strings.NewReader("y\n")}
	must.Eq(t, 0, cmd.Run([]string{"-detach", "we"}))
	write, _, _ = f.lastWrite()
	must.StrHasPrefix(t, "DELETE /v1/job/web", write)
}

func TestJobStop_UnknownAndAmbiguous(t *testing.T) {
	f := newFakeAPI(t)
	seedCluster(f)
	code, _, errOut := f.run("job", "stop", "nope")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, `No job with prefix "nope" found`)
	code, _, errOut = f.run("job", "stop", "-yes", "w")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, `Prefix "w" matched multiple jobs`)
	write, _, _ := f.lastWrite()
	must.Eq(t, "", write)
}
