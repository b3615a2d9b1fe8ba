package command

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/berth-io/berth/api"
)

// The `acl` commands: bootstrap, policies and tokens, as Nomad has them.

func init() {
	register("acl bootstrap", func(ui *UI) Command { return &ACLBootstrapCommand{Meta: Meta{ui: ui}} })
	register("acl policy apply", func(ui *UI) Command { return &ACLPolicyApplyCommand{Meta: Meta{ui: ui}} })
	register("acl policy list", func(ui *UI) Command { return &ACLPolicyListCommand{Meta: Meta{ui: ui}} })
	register("acl policy info", func(ui *UI) Command { return &ACLPolicyInfoCommand{Meta: Meta{ui: ui}} })
	register("acl policy delete", func(ui *UI) Command { return &ACLPolicyDeleteCommand{Meta: Meta{ui: ui}} })
	register("acl token create", func(ui *UI) Command { return &ACLTokenWriteCommand{Meta: Meta{ui: ui}} })
	register("acl token update", func(ui *UI) Command { return &ACLTokenWriteCommand{Meta: Meta{ui: ui}, update: true} })
	register("acl token list", func(ui *UI) Command { return &ACLTokenListCommand{Meta: Meta{ui: ui}} })
	register("acl token info", func(ui *UI) Command { return &ACLTokenInfoCommand{Meta: Meta{ui: ui}} })
	register("acl token self", func(ui *UI) Command { return &ACLTokenInfoCommand{Meta: Meta{ui: ui}, self: true} })
	register("acl token delete", func(ui *UI) Command { return &ACLTokenDeleteCommand{Meta: Meta{ui: ui}} })
}

// ACLBootstrapCommand creates the first management token.
type ACLBootstrapCommand struct{ Meta }

func (c *ACLBootstrapCommand) Synopsis() string { return "Bootstrap the ACL system" }

func (c *ACLBootstrapCommand) Help() string {
	return `Usage: berth acl bootstrap [options] [<path>]

  Creates the cluster's first management token. It works once per cluster;
  keep the Secret ID it prints: it is never shown again.

  For automation, the secret can be chosen in advance: put it in a file and
  pass its path ("-" reads stdin), or set BERTH_ACL_BOOTSTRAP_TOKEN.
` + sharedHelp(true)
}

func (c *ACLBootstrapCommand) Run(args []string) int {
	fs := c.flagSet("acl bootstrap", true)
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if fs.NArg() > 1 {
		return flagErr(c.ui, c.Help(), "This command takes at most one argument: <path>")
	}
	secret := os.Getenv("BERTH_ACL_BOOTSTRAP_TOKEN")
	if fs.NArg() == 1 {
		b, err := readFileOrStdin(fs.Arg(0))
		if err != nil {
			c.ui.Error("Error reading bootstrap secret: %v", err)
			return 1
		}
		secret = strings.TrimSpace(string(b))
		if secret == "" {
			c.ui.Error("Error: %s is empty; write the secret (a UUID) into it", fs.Arg(0))
			return 1
		}
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	tok, _, err := client.ACLTokens().BootstrapOpts(secret, nil)
	if err != nil {
		c.ui.Error("%s", c.apiErr("bootstrapping ACLs", err))
		return 1
	}
	return c.printToken(tok)
}

func readFileOrStdin(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	}
	return os.ReadFile(path)
}

func (m *Meta) printToken(t *api.ACLToken) int {
	if done, err := m.formatted(t); done {
		return m.fmtResult(err)
	}
	exp := ""
	if t.ExpirationTime != nil {
		exp = formatTime(*t.ExpirationTime)
	}
	secret := t.SecretID
	if secret == "" {
		secret = "<hidden>"
	}
	policies := "n/a"
	if t.Type != "management" {
		policies = "[" + strings.Join(t.Policies, " ") + "]"
	}
	m.ui.Output("%s", kv([][2]string{
		{"Accessor ID", t.AccessorID},
		{"Secret ID", secret},
		{"Name", t.Name},
		{"Type", t.Type},
		{"Global", strconv.FormatBool(t.Global)},
		{"Create Time", formatTime(t.CreateTime)},
		{"Expiry Time", exp},
		{"Create Index", strconv.FormatUint(t.CreateIndex, 10)},
		{"Modify Index", strconv.FormatUint(t.ModifyIndex, 10)},
		{"Policies", policies},
	}))
	return 0
}

// ACLPolicyApplyCommand creates or replaces a policy from a file.
type ACLPolicyApplyCommand struct{ Meta }

func (c *ACLPolicyApplyCommand) Synopsis() string { return "Create or update an ACL policy" }

func (c *ACLPolicyApplyCommand) Help() string {
	return `Usage: berth acl policy apply [options] <name> <path>

  Creates or replaces the policy <name> with the rules in <path> ("-" reads
  stdin). Rules use Nomad's language (namespace, node, agent, operator,
  plugin and host_volume blocks); the servers refuse a policy that does
  not parse and say where.

Apply Options:

  -description=<text>
    What the policy is for.
` + sharedHelp(false)
}

func (c *ACLPolicyApplyCommand) Run(args []string) int {
	fs := c.flagSet("acl policy apply", false)
	desc := fs.String("description", "", "")
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if fs.NArg() != 2 {
		return flagErr(c.ui, c.Help(), "This command takes two arguments: <name> <path>")
	}
	rules, err := readFileOrStdin(fs.Arg(1))
	if err != nil {
		c.ui.Error("Error reading policy: %v", err)
		return 1
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	p := &api.ACLPolicy{Name: fs.Arg(0), Description: *desc, Rules: string(rules)}
	if _, err := client.ACLPolicies().Upsert(p, nil); err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("writing policy %q", p.Name), err))
		return 1
	}
	c.ui.Output("Successfully wrote %q ACL policy!", p.Name)
	return 0
}

// ACLPolicyListCommand lists policies.
type ACLPolicyListCommand struct{ Meta }

func (c *ACLPolicyListCommand) Synopsis() string { return "List ACL policies" }

func (c *ACLPolicyListCommand) Help() string {
	return `Usage: berth acl policy list [options]

  Lists the policies (a client token sees the ones it holds).
` + sharedHelp(true)
}

func (c *ACLPolicyListCommand) Run(args []string) int {
	fs := c.flagSet("acl policy list", true)
	client, code := c.startNoArgs(fs, args, c.Help())
	if client == nil {
		return code
	}
	ps, _, err := client.ACLPolicies().List(nil)
	if err != nil {
		c.ui.Error("%s", c.apiErr("listing ACL policies", err))
		return 1
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	if ps == nil {
		ps = []*api.ACLPolicyListStub{}
	}
	if done, err := c.formatted(ps); done {
		return c.fmtResult(err)
	}
	if len(ps) == 0 {
		c.ui.Output("No policies found")
		return 0
	}
	rows := [][]string{{"Name", "Description"}}
	for _, p := range ps {
		rows = append(rows, []string{p.Name, p.Description})
	}
	c.ui.Output("%s", table(rows))
	return 0
}

// ACLPolicyInfoCommand shows a policy.
type ACLPolicyInfoCommand struct{ Meta }

func (c *ACLPolicyInfoCommand) Synopsis() string { return "Show an ACL policy" }

func (c *ACLPolicyInfoCommand) Help() string {
	return `Usage: berth acl policy info [options] <name>

  Shows a policy and its rules.
` + sharedHelp(true)
}

func (c *ACLPolicyInfoCommand) Run(args []string) int {
	fs := c.flagSet("acl policy info", true)
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if fs.NArg() != 1 {
		return flagErr(c.ui, c.Help(), "This command takes one argument: <name>")
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	p, _, err := client.ACLPolicies().Info(fs.Arg(0), nil)
	if err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("reading policy %q", fs.Arg(0)), err))
		return 1
	}
	if done, err := c.formatted(p); done {
		return c.fmtResult(err)
	}
	c.ui.Output("%s\n\nRules\n\n%s", kv([][2]string{
		{"Name", p.Name},
		{"Description", p.Description},
		{"CreateIndex", strconv.FormatUint(p.CreateIndex, 10)},
		{"ModifyIndex", strconv.FormatUint(p.ModifyIndex, 10)},
	}), strings.TrimRight(p.Rules, "\n"))
	return 0
}

// ACLPolicyDeleteCommand deletes a policy.
type ACLPolicyDeleteCommand struct{ Meta }

func (c *ACLPolicyDeleteCommand) Synopsis() string { return "Delete an ACL policy" }

func (c *ACLPolicyDeleteCommand) Help() string {
	return `Usage: berth acl policy delete [options] <name>

  Deletes a policy. Tokens that name it lose what it granted.
` + sharedHelp(false)
}

func (c *ACLPolicyDeleteCommand) Run(args []string) int {
	fs := c.flagSet("acl policy delete", false)
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if fs.NArg() != 1 {
		return flagErr(c.ui, c.Help(), "This command takes one argument: <name>")
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	if _, err := client.ACLPolicies().Delete(fs.Arg(0), nil); err != nil {
		c.ui.Error("%s", c.apiErr(fmt.Sprintf("deleting policy %q", fs.Arg(0)), err))
		return 1
	}
	c.ui.Output("Successfully deleted %q ACL policy!", fs.Arg(0))
	return 0
}

// stringsFlag is a repeatable string flag.
type stringsFlag []string

func (f *stringsFlag) String() string     { return strings.Join(*f, ",") }
func (f *stringsFlag) Set(s string) error { *f = append(*f, s); return nil }

// ACLTokenWriteCommand creates or updates a token.
type ACLTokenWriteCommand struct {
	Meta
	update bool
}

func (c *ACLTokenWriteCommand) Synopsis() string {
	if c.update {
		return "Update an ACL token"
	}
	return "Create an ACL token"
}

func (c *ACLTokenWriteCommand) Help() string {
	if c.update {
		return `Usage: berth acl token update [options] <accessor_id>

  Changes a token's name or policies (never its secret or type).

Update Options:

  -name=<name>
    New name.

  -policy=<name>
    Policy to hold; repeat for several. Replaces the token's policies.
` + sharedHelp(true)
	}
	return `Usage: berth acl token create [options]

  Creates a token and prints its Secret ID, the only time it is shown.

Create Options:

  -name=<name>
    What the token is for.

  -type=client|management
    A client token holds policies; a management token may do everything.
    Defaults to client.

  -policy=<name>
    Policy the token holds; repeat for several.

  -ttl=<duration>
    The token expires after this long (e.g. 8h); at least 1m.
` + sharedHelp(true)
}

func (c *ACLTokenWriteCommand) Run(args []string) int {
	name := "acl token create"
	if c.update {
		name = "acl token update"
	}
	fs := c.flagSet(name, true)
	tokName := fs.String("name", "", "")
	typ := fs.String("type", "client", "")
	ttl := fs.Duration("ttl", 0, "")
	var policies stringsFlag
	fs.Var(&policies, "policy", "")
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	if c.update {
		if fs.NArg() != 1 {
			return flagErr(c.ui, c.Help(), "This command takes one argument: <accessor_id>")
		}
		cur, _, err := client.ACLTokens().Info(fs.Arg(0), nil)
		if err != nil {
			c.ui.Error("%s", c.apiErr("reading token", err))
			return 1
		}
		if *tokName != "" {
			cur.Name = *tokName
		}
		if len(policies) > 0 {
			cur.Policies = policies
		}
		tok, _, err := client.ACLTokens().Update(cur, nil)
		if err != nil {
			c.ui.Error("%s", c.apiErr("updating token", err))
			return 1
		}
		return c.printToken(tok)
	}
	if fs.NArg() != 0 {
		return flagErr(c.ui, c.Help(), "This command takes no arguments.")
	}
	tok, _, err := client.ACLTokens().Create(&api.ACLToken{
		Name: *tokName, Type: *typ, Policies: policies, ExpirationTTL: *ttl,
	}, nil)
	if err != nil {
		c.ui.Error("%s", c.apiErr("creating token", err))
		return 1
	}
	return c.printToken(tok)
}

// ACLTokenListCommand lists tokens.
type ACLTokenListCommand struct{ Meta }

func (c *ACLTokenListCommand) Synopsis() string { return "List ACL tokens" }

func (c *ACLTokenListCommand) Help() string {
	return `Usage: berth acl token list [options]

  Lists tokens (needs a management token). Secrets are never listed.
` + sharedHelp(true)
}

func (c *ACLTokenListCommand) Run(args []string) int {
	fs := c.flagSet("acl token list", true)
	client, code := c.startNoArgs(fs, args, c.Help())
	if client == nil {
		return code
	}
	ts, _, err := client.ACLTokens().List(nil)
	if err != nil {
		c.ui.Error("%s", c.apiErr("listing ACL tokens", err))
		return 1
	}
	if ts == nil {
		ts = []*api.ACLTokenListStub{}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].CreateIndex < ts[j].CreateIndex })
	if done, err := c.formatted(ts); done {
		return c.fmtResult(err)
	}
	if len(ts) == 0 {
		c.ui.Output("No tokens found")
		return 0
	}
	rows := [][]string{{"Name", "Type", "Global", "Accessor ID", "Expired"}}
	now := time.Now()
	for _, t := range ts {
		expired := t.ExpirationTime != nil && !now.Before(*t.ExpirationTime)
		rows = append(rows, []string{t.Name, t.Type, strconv.FormatBool(t.Global), t.AccessorID, strconv.FormatBool(expired)})
	}
	c.ui.Output("%s", table(rows))
	return 0
}

// ACLTokenInfoCommand shows a token by accessor, or the caller's own.
type ACLTokenInfoCommand struct {
	Meta
	self bool
}

func (c *ACLTokenInfoCommand) Synopsis() string {
	if c.self {
		return "Show the token in use"
	}
	return "Show an ACL token"
}

func (c *ACLTokenInfoCommand) Help() string {
	if c.self {
		return `Usage: berth acl token self [options]

  Shows the token the CLI sends (-token, BERTH_TOKEN or NOMAD_TOKEN).
` + sharedHelp(true)
	}
	return `Usage: berth acl token info [options] <accessor_id>

  Shows a token; its secret is never shown after creation.
` + sharedHelp(true)
}

func (c *ACLTokenInfoCommand) Run(args []string) int {
	name := "acl token info"
	if c.self {
		name = "acl token self"
	}
	fs := c.flagSet(name, true)
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	want := 1
	if c.self {
		want = 0
	}
	if fs.NArg() != want {
		return flagErr(c.ui, c.Help(), "Wrong number of arguments.")
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	var tok *api.ACLToken
	if c.self {
		tok, _, err = client.ACLTokens().Self(nil)
	} else {
		tok, _, err = client.ACLTokens().Info(fs.Arg(0), nil)
	}
	if err != nil {
		c.ui.Error("%s", c.apiErr("reading token", err))
		return 1
	}
	return c.printToken(tok)
}

// ACLTokenDeleteCommand deletes a token.
type ACLTokenDeleteCommand struct{ Meta }

func (c *ACLTokenDeleteCommand) Synopsis() string { return "Delete an ACL token" }

func (c *ACLTokenDeleteCommand) Help() string {
	return `Usage: berth acl token delete [options] <accessor_id>

  Deletes a token; requests carrying its secret are refused from then on.
` + sharedHelp(false)
}

func (c *ACLTokenDeleteCommand) Run(args []string) int {
	fs := c.flagSet("acl token delete", false)
	if err := parseArgs(fs, args); err != nil {
		return flagErr(c.ui, c.Help(), "Error parsing flags: %v", err)
	}
	if fs.NArg() != 1 {
		return flagErr(c.ui, c.Help(), "This command takes one argument: <accessor_id>")
	}
	client, err := c.client()
	if err != nil {
		c.ui.Error("Error: %v", err)
		return 1
	}
	if _, err := client.ACLTokens().Delete(fs.Arg(0), nil); err != nil {
		c.ui.Error("%s", c.apiErr("deleting token", err))
		return 1
	}
	c.ui.Output("Token %s successfully deleted", fs.Arg(0))
	return 0
}

func init() {
	register("operator audit", func(ui *UI) Command { return &OperatorAuditCommand{Meta: Meta{ui: ui}} })
}

// OperatorAuditCommand shows a server's recent audit log entries.
type OperatorAuditCommand struct{ Meta }

func (c *OperatorAuditCommand) Synopsis() string { return "Show the audit log of writes" }

func (c *OperatorAuditCommand) Help() string {
	return `Usage: berth operator audit [options]

  Shows the newest entries of the audit log of the server the agent runs:
  every write it applied as leader (time, token accessor, endpoint, object,
  result) and every write it refused, with the reason. Each server keeps
  its own log; needs a management token.

Audit Options:

  -n=<count>
    How many entries to show (default 50).
` + sharedHelp(true)
}

func (c *OperatorAuditCommand) Run(args []string) int {
	fs := c.flagSet("operator audit", true)
	n := fs.Int("n", 50, "")
	client, code := c.startNoArgs(fs, args, c.Help())
	if client == nil {
		return code
	}
	entries, err := client.Operator().AuditLog(*n, nil)
	if err != nil {
		c.ui.Error("%s", c.apiErr("reading the audit log", err))
		return 1
	}
	if entries == nil {
		entries = []*api.AuditEntry{}
	}
	if done, err := c.formatted(entries); done {
		return c.fmtResult(err)
	}
	if len(entries) == 0 {
		c.ui.Output("No audit entries")
		return 0
	}
	rows := [][]string{{"Time", "Accessor", "Endpoint", "Object", "Result"}}
	for _, e := range entries {
		res := e.Result
		if e.Error != "" {
			res += ": " + oneLine(e.Error)
		}
		rows = append(rows, []string{formatTime(e.Time), e.Accessor, e.Endpoint, e.Object, res})
	}
	c.ui.Output("%s", table(rows))
	return 0
}
