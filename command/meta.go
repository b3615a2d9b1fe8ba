package command

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"text/template"

	"github.com/berth-io/berth/api"
)

// Meta holds the flags every API command shares and builds its client.
type Meta struct {
	ui *UI

	address   string
	token     string
	namespace string
	// HTTPS: -ca-cert, -client-cert, -client-key.
	caCert, clientCert, clientKey string

	// Output flags of read commands.
	json    bool
	tmpl    string
	verbose bool
}

// flagSet makes a flag set with the shared flags; reads adds -json, -t and
// -verbose.
func (m *Meta) flagSet(name string, reads bool) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&m.address, "address", "", "")
	fs.StringVar(&m.token, "token", "", "")
	fs.StringVar(&m.namespace, "namespace", "", "")
	fs.StringVar(&m.caCert, "ca-cert", "", "")
	fs.StringVar(&m.clientCert, "client-cert", "", "")
	fs.StringVar(&m.clientKey, "client-key", "", "")
	if reads {
		fs.BoolVar(&m.json, "json", false, "")
		fs.StringVar(&m.tmpl, "t", "", "")
		fs.BoolVar(&m.verbose, "verbose", false, "")
	}
	return fs
}

// client builds an API client from BERTH_ADDR/BERTH_TOKEN and the flags.
func (m *Meta) client() (*api.Client, error) {
	return api.NewClient(m.apiConfig())
}

// apiConfig is api.DefaultConfig (the environment) with the flags laid
// over it.
func (m *Meta) apiConfig() *api.Config {
	cfg := api.DefaultConfig()
	if m.address != "" {
		cfg.Address = m.address
	}
	if m.token != "" {
		cfg.Token = m.token
	}
	if m.namespace != "" {
		cfg.Namespace = m.namespace
	}
	if m.caCert != "" || m.clientCert != "" || m.clientKey != "" {
		t := api.TLSConfig{}
		if cfg.TLSConfig != nil {
			t = *cfg.TLSConfig
		}
		if m.caCert != "" {
			t.CACert = m.caCert
		}
		if m.clientCert != "" {
			t.ClientCert = m.clientCert
		}
		if m.clientKey != "" {
			t.ClientKey = m.clientKey
		}
		cfg.TLSConfig = &t
	}
	return cfg
}

// formatted prints obj as JSON (-json) or through a template (-t) and
// reports whether it did; otherwise the command prints its own table.
func (m *Meta) formatted(obj any) (bool, error) {
	switch {
	case m.json && m.tmpl != "":
		return true, fmt.Errorf("-json and -t cannot be used together")
	case m.json:
		b, err := json.MarshalIndent(obj, "", "    ")
		if err != nil {
			return true, fmt.Errorf("encoding JSON: %w", err)
		}
		m.ui.Output("%s", b)
		return true, nil
	case m.tmpl != "":
		t, err := template.New("out").Parse(m.tmpl)
		if err != nil {
			return true, fmt.Errorf("parsing template %q: %w", m.tmpl, err)
		}
		var buf bytes.Buffer
		if err := t.Execute(&buf, obj); err != nil {
			return true, fmt.Errorf("executing template: %w", err)
		}
		m.ui.Output("%s", buf.String())
		return true, nil
	}
	return false, nil
}

// sharedHelp documents the shared flags.
func sharedHelp(reads bool) string {
	s := `
General Options:

  -address=<addr>
    The agent's HTTP address: http://host:port or unix:///path.
    Defaults to BERTH_ADDR (NOMAD_ADDR), else http://127.0.0.1:4646.

  -token=<secret>
    ACL token; defaults to BERTH_TOKEN, else NOMAD_TOKEN.

  -namespace=<ns>
    Namespace; defaults to BERTH_NAMESPACE (NOMAD_NAMESPACE), else "default".

  -ca-cert=<path>
    CA certificate to verify the agent's HTTPS certificate with; defaults
    to BERTH_CACERT (NOMAD_CACERT).

  -client-cert=<path>
    Client certificate for agents with tls.verify_https_client; defaults
    to BERTH_CLIENT_CERT (NOMAD_CLIENT_CERT).

  -client-key=<path>
    The client certificate's key; defaults to BERTH_CLIENT_KEY
    (NOMAD_CLIENT_KEY).
`
	if reads {
		s += `
Output Options:

  -json
    Print the result as JSON.

  -t=<template>
    Format the result with a Go template.

  -verbose
    Show full IDs and more detail.
`
	}
	return s
}

// table renders rows as aligned columns; the first row is the header.
// Empty cells show as <none>.
func table(rows [][]string) string {
	var buf bytes.Buffer
	w := tabwriter.NewWriter(&buf, 0, 8, 2, ' ', 0)
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, c := range r {
			if c == "" {
				c = "<none>"
			}
			cells[i] = c
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	w.Flush()
	return strings.TrimRight(buf.String(), "\n")
}

// startNoArgs is the start of a command that takes no positional
// argument: it parses args into fs (flags may follow positionals, as in
// Nomad's CLI), refuses any positional and builds the API client. A nil
// client means the command is over, with the exit code returned; the
// error was printed.
func (m *Meta) startNoArgs(fs *flag.FlagSet, args []string, help string) (*api.Client, int) {
	if err := parseArgs(fs, args); err != nil {
		return nil, flagErr(m.ui, help, "Error parsing flags: %v", err)
	}
	if fs.NArg() != 0 {
		return nil, flagErr(m.ui, help, "This command takes no arguments.")
	}
	client, err := m.client()
	if err != nil {
		m.ui.Error("Error: %v", err)
		return nil, 1
	}
	return client, 0
}
