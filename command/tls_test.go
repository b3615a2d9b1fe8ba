package command

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/helper/tlsutil"
)

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// The dev PKI: files named like Nomad's, certificates that load and name
// their role, and no file ever overwritten.
func TestTLSCreate_WritesAWorkingPKI(t *testing.T) {
	t.Chdir(t.TempDir())
	code, out, errOut := runCmd(t, "tls", "cert", "create", "-server")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, "Run 'berth tls ca create' first")

	code, out, errOut = runCmd(t, "tls", "ca", "create")
	must.Eq(t, 0, code, must.Sprint(errOut))
	must.StrContains(t, out, "berth-agent-ca.pem")

	code, _, errOut = runCmd(t, "tls", "ca", "create")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, "berth-agent-ca.pem already exists")

	cases := []struct {
		args       []string
		base       string
		role       tlsutil.Role
		region     string
		extraNames []string
	}{
		{[]string{"-server"}, "global-server-berth", tlsutil.RoleServer, "global", nil},
		{[]string{"-server", "-region", "eu", "-additional-dnsname", "s1.example", "-additional-ipaddress", "10.1.2.3"}, "eu-server-berth", tlsutil.RoleServer, "eu", []string{"s1.example"}},
		{[]string{"-client"}, "global-client-berth", tlsutil.RoleClient, "global", nil},
		{[]string{"-cli"}, "global-cli-berth", tlsutil.RoleCLI, "global", nil},
	}
	for _, tc := range cases {
		code, out, errOut := runCmd(t, append([]string{"tls", "cert", "create"}, tc.args...)...)
		must.Eq(t, 0, code, must.Sprint(errOut))
		must.StrContains(t, out, tc.base+".pem")
		r, err := tlsutil.NewReloader(tlsutil.Files{CAFile: "berth-agent-ca.pem", CertFile: tc.base + ".pem", KeyFile: tc.base + "-key.pem"})
		must.NoError(t, err)
		must.True(t, r.HasRole(tc.role, tc.region), must.Sprintf("%s names %v", tc.base, r.Leaf().DNSNames))
		for _, n := range tc.extraNames {
			must.NoError(t, r.Leaf().VerifyHostname(n))
		}
		if tc.role == tlsutil.RoleServer {
			must.NoError(t, r.Leaf().VerifyHostname("localhost"))
			must.NoError(t, r.Leaf().VerifyHostname("127.0.0.1"))
		}
		fi, err := os.Stat(tc.base + "-key.pem")
		must.NoError(t, err)
		must.Eq(t, os.FileMode(0o600), fi.Mode().Perm())
	}
	must.NoError(t, func() error {
		r, err := tlsutil.NewReloader(tlsutil.Files{CAFile: "berth-agent-ca.pem", CertFile: "global-client-berth.pem", KeyFile: "global-client-berth-key.pem"})
		if err == nil && r.HasRole(tlsutil.RoleServer, "global") {
			t.Fatalf("a client certificate must not name the server role")
		}
		return err
	}())

	before, err := os.ReadFile("global-server-berth.pem")
	must.NoError(t, err)
	code, _, errOut = runCmd(t, "tls", "cert", "create", "-server")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, "global-server-berth.pem already exists")
	after, err := os.ReadFile("global-server-berth.pem")
	must.NoError(t, err)
	must.Eq(t, before, after)

	for _, bad := range [][]string{{}, {"-server", "-client"}, {"-cli", "-additional-ipaddress", "nope"}, {"-cli", "-region", ""}} {
		code, _, errOut := runCmd(t, append([]string{"tls", "cert", "create"}, bad...)...)
		must.Eq(t, 1, code, must.Sprintf("%v", bad))
		must.NotEq(t, "", errOut)
	}
}

// Each TLS mismatch between the CLI and an HTTPS agent gets a hint naming
// what to set; other errors get none.
func TestTLSHint(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"no client certificate", fmt.Errorf("GET /v1/x: %w", &url.Error{Op: "Get", URL: "https://x", Err: &net.OpError{Op: "remote error", Err: errors.New("tls: certificate required")}}), "-client-cert and -client-key"},
		{"connection refused", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, ""},
		{"unknown CA", &url.Error{Op: "Get", URL: "https://x", Err: x509.UnknownAuthorityError{}}, "-ca-cert (or BERTH_CACERT)"},
		{"wrong name", x509.HostnameError{Certificate: &x509.Certificate{}, Host: "10.0.0.1"}, "BERTH_TLS_SERVER_NAME"},
		{"plain HTTP", &api.StatusError{Code: 400, Body: "Client sent an HTTP request to an HTTPS server.\n"}, "use https:// in -address or BERTH_ADDR"},
		{"other 400", &api.StatusError{Code: 400, Body: "missing job ID"}, ""},
		{"other", errors.New("boom"), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tlsHint(tc.err)
			if tc.want == "" {
				must.Eq(t, "", got)
				return
			}
			must.StrContains(t, got, tc.want)
		})
	}
}
