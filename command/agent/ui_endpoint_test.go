package agent

import (
	"net/http"
	"testing"

	"github.com/shoenig/test/must"
)

// TestHTTP_UIShowsNothingWithoutRights: with ACLs on, the UI's pages are
// served to anyone, because they hold no data: a job's page, asked for
// without a token, carries none of the job's fields, while the API the
// page's script reads refuses the same caller. / leads to the UI.
func TestHTTP_UIShowsNothingWithoutRights(t *testing.T) {
	a, _ := newACLAgent(t)
	boot, _, err := apiClient(t, a, "").ACLTokens().Bootstrap(nil)
	must.NoError(t, err)
	mgmt := apiClient(t, a, boot.SecretID)
	const secretName = "payroll-db-7f3a"
	job := sparseJob("pay")
	job.Meta = map[string]string{"owner": secretName}
	_, _, err = mgmt.Jobs().Register(job, nil)
	must.NoError(t, err)
	got, _, err := mgmt.Jobs().Info("pay", nil)
	must.NoError(t, err)
	must.Eq(t, secretName, got.Meta["owner"])

	resp, body := get(t, a, "/ui/job/pay")
	must.Eq(t, http.StatusOK, resp.StatusCode)
	must.StrContains(t, body, `data-page="job" data-id="pay"`)
	must.StrNotContains(t, body, secretName)
	resp, body = get(t, a, "/v1/job/pay")
	must.Eq(t, http.StatusForbidden, resp.StatusCode)
	must.StrNotContains(t, body, secretName)

	resp, body = get(t, a, "/") // follows the redirect
	must.Eq(t, http.StatusOK, resp.StatusCode)
	must.Eq(t, "/ui/volumes", resp.Request.URL.Path)
	must.StrContains(t, body, `data-page="volumes"`)
}
