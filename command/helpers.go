package command

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/berth-io/berth/api"
)

// Helpers shared by the commands: ID prefixes, time and size formatting,
// "Key = Value" blocks, the allocation and placement-failure tables, and
// errors that tell the operator what to do.

// shortLen is how much of an ID the CLI shows without -verbose.
const shortLen = 8

// shortID returns the first 8 characters of id, or all of it with verbose.
func shortID(id string, verbose bool) string {
	if verbose || len(id) <= shortLen {
		return id
	}
	return id[:shortLen]
}

// pickByPrefix resolves prefix against items, as the CLI resolves every
// ID it is given: an exact match wins, then a unique prefix match. When
// it finds neither, matches holds every item that has the prefix (none,
// or more than one: the caller lists them). The servers filter lists by
// ?prefix= already; filtering again here keeps the answer right with a
// server that ignores it.
func pickByPrefix[T any](prefix string, items []T, id func(T) string) (one T, matches []T, ok bool) {
	for _, it := range items {
		if id(it) == prefix {
			return it, nil, true
		}
	}
	for _, it := range items {
		if strings.HasPrefix(id(it), prefix) {
			matches = append(matches, it)
		}
	}
	if len(matches) == 1 {
		return matches[0], nil, true
	}
	return one, matches, false
}

// notFound is the error for an ID or prefix that matched nothing; list
// is the command that lists the objects.
func notFound(kind, prefix, list string) error {
	return fmt.Errorf("No %s with prefix %q found. Run '%s' to list them.", kind, prefix, list)
}

// ambiguous is the error for a prefix that matched several objects;
// rows is their table.
func ambiguous(kind, prefix string, rows [][]string) error {
	return fmt.Errorf("Prefix %q matched multiple %ss; give more of the ID:\n\n%s", prefix, kind, table(rows))
}

// timeNow is the clock the commands read.
var timeNow = time.Now

// formatTime renders t as RFC 3339 in local time; the zero time is "".
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Local().Format(time.RFC3339)
}

// unixNano converts the API's integer nanosecond times; 0 is the zero time.
func unixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// formatUnixNano renders an API nanosecond time as formatTime does.
func formatUnixNano(ns int64) string { return formatTime(unixNano(ns)) }

// prettyTimeDiff says how long ago t was, in its two largest units:
// "3d2h ago", "5m10s ago", "12s ago"; a time in the future is "in 5m".
func prettyTimeDiff(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t).Round(time.Second)
	suffix := " ago"
	prefix := ""
	if d < 0 {
		d, prefix, suffix = -d, "in ", ""
	}
	if d < time.Second {
		return "just now"
	}
	units := []struct {
		name string
		size time.Duration
	}{{"d", 24 * time.Hour}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}}
	var parts []string
	for i, u := range units {
		n := d / u.size
		if n == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%d%s", n, u.name))
		// Add the next smaller unit when it is not zero, then stop.
		if i+1 < len(units) {
			if m := (d - n*u.size) / units[i+1].size; m > 0 {
				parts = append(parts, fmt.Sprintf("%d%s", m, units[i+1].name))
			}
		}
		break
	}
	return prefix + strings.Join(parts, "") + suffix
}

// ageOrTime shows a time as an age ("5m ago"), or in full with verbose.
func ageOrTime(ns int64, verbose bool) string {
	if verbose {
		return formatUnixNano(ns)
	}
	return prettyTimeDiff(unixNano(ns), timeNow())
}

// humanBytes renders a size with IEC units: "10 GiB", "512 MiB", "100 B";
// 0 is "" (unknown).
func humanBytes(n int64) string {
	if n <= 0 {
		return ""
	}
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v, i := float64(n), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 || v == float64(int64(v)) {
		return fmt.Sprintf("%d %s", int64(v), units[i])
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// kv renders "Key = Value" lines with the "=" aligned; an empty value
// shows as <none>.
func kv(pairs [][2]string) string {
	width := 0
	for _, p := range pairs {
		width = max(width, len(p[0]))
	}
	var b strings.Builder
	for i, p := range pairs {
		v := p[1]
		if v == "" {
			v = "<none>"
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%-*s = %s", width, p[0], v)
	}
	return b.String()
}

// oneLine folds a multi-line message (a wrapped error) onto one line so
// it cannot break a table.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// allocTable is the allocation table of job, volume, plugin and node
// status: newest first.
func allocTable(allocs []*api.AllocationListStub, verbose bool) string {
	sorted := slices.Clone(allocs)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].CreateIndex > sorted[j].CreateIndex })
	rows := [][]string{{"ID", "Node ID", "Task Group", "Version", "Desired", "Status", "Created", "Modified"}}
	for _, a := range sorted {
		rows = append(rows, []string{
			shortID(a.ID, verbose), shortID(a.NodeID, verbose), a.TaskGroup,
			strconv.FormatUint(a.JobVersion, 10), a.DesiredStatus, a.ClientStatus,
			ageOrTime(a.CreateTime, verbose), ageOrTime(a.ModifyTime, verbose),
		})
	}
	return table(rows)
}

// placementFailures explains, per task group, why an evaluation could
// not place allocations: the scheduler's filter and exhaustion counts,
// CSI checks among them ("CSI volume data has exhausted its available
// writer claims"). indent prefixes every line.
func placementFailures(failed map[string]*api.AllocationMetric, indent string) string {
	var b strings.Builder
	for i, tg := range sortedKeys(failed) {
		m := failed[tg]
		if m == nil {
			continue
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		n := m.CoalescedFailures + 1
		plural := "s"
		if n == 1 {
			plural = ""
		}
		fmt.Fprintf(&b, "%sTask Group %q (failed to place %d allocation%s):", indent, tg, n, plural)
		for _, line := range metricLines(m) {
			fmt.Fprintf(&b, "\n%s  * %s", indent, line)
		}
	}
	return b.String()
}

// metricLines are the reasons in one AllocationMetric.
func metricLines(m *api.AllocationMetric) []string {
	var out []string
	if m.NodesEvaluated == 0 {
		out = append(out, "No nodes were eligible for evaluation")
	}
	for _, dc := range sortedKeys(m.NodesAvailable) {
		if m.NodesAvailable[dc] == 0 {
			out = append(out, fmt.Sprintf("No nodes are available in datacenter %q", dc))
		}
	}
	for _, c := range sortedKeys(m.ClassFiltered) {
		out = append(out, fmt.Sprintf("Class %q: %d nodes excluded by filter", c, m.ClassFiltered[c]))
	}
	for _, c := range sortedKeys(m.ConstraintFiltered) {
		out = append(out, fmt.Sprintf("Constraint %q: %d nodes excluded by filter", c, m.ConstraintFiltered[c]))
	}
	if m.NodesExhausted > 0 {
		out = append(out, fmt.Sprintf("Resources exhausted on %d nodes", m.NodesExhausted))
	}
	for _, c := range sortedKeys(m.ClassExhausted) {
		out = append(out, fmt.Sprintf("Class %q exhausted on %d nodes", c, m.ClassExhausted[c]))
	}
	for _, d := range sortedKeys(m.DimensionExhausted) {
		out = append(out, fmt.Sprintf("Dimension %q exhausted on %d nodes", d, m.DimensionExhausted[d]))
	}
	for _, q := range m.QuotaExhausted {
		out = append(out, fmt.Sprintf("Quota limit hit %q", q))
	}
	return out
}

// eventDescription is what a task event says, in words.
func eventDescription(e *api.TaskEvent) string {
	if e.DisplayMessage != "" {
		return e.DisplayMessage
	}
	switch e.Type {
	case api.TaskSetupFailure:
		if e.SetupError != "" {
			return e.SetupError
		}
	case api.TaskDriverFailure:
		if e.DriverError != "" {
			return e.DriverError
		}
	case api.TaskDriverMessage:
		if e.DriverMessage != "" {
			return e.DriverMessage
		}
	case api.TaskReceived:
		return "Task received by client"
	case api.TaskStarted:
		return "Task started by client"
	case api.TaskTerminated:
		s := fmt.Sprintf("Exit Code: %d", e.ExitCode)
		if e.Signal != 0 {
			s += fmt.Sprintf(", Signal: %d", e.Signal)
		}
		if e.Message != "" {
			s += ", Exit Message: " + strconv.Quote(e.Message)
		}
		return s
	case api.TaskRestarting:
		s := fmt.Sprintf("Task restarting in %s", time.Duration(e.StartDelay))
		if e.RestartReason != "" {
			s = e.RestartReason + " - " + s
		}
		return s
	case api.TaskNotRestarting:
		if e.RestartReason != "" {
			return e.RestartReason
		}
		return "Task exceeded restart policy"
	case api.TaskKilling:
		if e.KillReason != "" {
			return "Killing task: " + e.KillReason
		}
		return fmt.Sprintf("Sent interrupt. Waiting %s before force killing", e.KillTimeout)
	case api.TaskKilled:
		if e.KillError != "" {
			return e.KillError
		}
		return "Task successfully killed"
	case api.TaskSiblingFailed:
		if e.FailedSibling != "" {
			return fmt.Sprintf("Task's sibling %q failed", e.FailedSibling)
		}
	}
	return e.Message
}

// notableEvent reports whether a task event is worth showing while a
// command follows an allocation without -verbose: failures and restarts.
func notableEvent(e *api.TaskEvent) bool {
	if e.FailsTask {
		return true
	}
	switch e.Type {
	case api.TaskSetupFailure, api.TaskDriverFailure, api.TaskFailedValidation,
		api.TaskRestarting, api.TaskNotRestarting, api.TaskSiblingFailed, api.TaskPluginUnhealthy:
		return true
	case api.TaskTerminated:
		return e.ExitCode != 0 || e.Signal != 0
	}
	return false
}

// flagErr reports a flag problem with the command's usage line.
func flagErr(ui *UI, help string, format string, a ...any) int {
	ui.Error(format, a...)
	if usage, _, _ := strings.Cut(strings.TrimSpace(help), "\n"); usage != "" {
		ui.Error("\n%s\nRun with -h for the options.", usage)
	}
	return 1
}

// apiErr describes an API failure: what was being done, the server's
// answer, and for a connection failure where the CLI looked and how to
// point it elsewhere.
func (m *Meta) apiErr(doing string, err error) string {
	msg := fmt.Sprintf("Error %s: %v", doing, err)
	if isConnErr(err) {
		addr := m.address
		if addr == "" {
			addr = api.DefaultConfig().Address
		}
		msg += fmt.Sprintf("\nIs a Berth agent running at %s? Point the CLI at one with -address or BERTH_ADDR (NOMAD_ADDR).", addr)
	}
	if hint := tlsHint(err); hint != "" {
		msg += "\n" + hint
	}
	return msg
}

// tlsHint says what to set when err is a TLS mismatch between the CLI and
// an agent with tls.http; "" otherwise.
func tlsHint(err error) string {
	var op *net.OpError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var status *api.StatusError
	switch {
	case errors.As(err, &op) && op.Op == "remote error":
		// crypto/tls reports the agent's alert this way; the agent refuses
		// a handshake when the CLI's certificate is missing or not its CA's.
		return "The agent refused the TLS handshake: it requires a client certificate from its CA: set -client-cert and -client-key (or BERTH_CLIENT_CERT and BERTH_CLIENT_KEY)."
	case errors.As(err, &unknownCA):
		return "The agent's certificate is not signed by a CA the CLI trusts: set -ca-cert (or BERTH_CACERT) to the cluster's CA file."
	case errors.As(err, &hostname):
		return "The agent's certificate does not name this address: use one it names (localhost or 127.0.0.1 for berth's dev certificates) or set BERTH_TLS_SERVER_NAME."
	case errors.As(err, &status) && status.Code == http.StatusBadRequest &&
		// net/http's fixed answer to plain HTTP on a TLS port.
		strings.Contains(status.Body, "HTTP request to an HTTPS server"):
		return "The agent serves HTTPS: use https:// in -address or BERTH_ADDR."
	}
	return ""
}

// isConnErr reports whether err is a failure to reach the agent at all.
func isConnErr(err error) bool {
	var op *net.OpError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) ||
		(errors.As(err, &op) && op.Op == "dial")
}

// confirm asks a yes/no question on in; only "y" or "yes" agrees.
func confirm(ui *UI, in io.Reader, question string) bool {
	if in == nil {
		in = os.Stdin
	}
	fmt.Fprintf(ui.Out, "%s [y/N]: ", question)
	line, _ := bufio.NewReader(in).ReadString('\n')
	ans := strings.ToLower(strings.TrimSpace(line))
	return ans == "y" || ans == "yes"
}

// kvFlag is a repeatable "-flag key=value" option.
type kvFlag map[string]string

func (f kvFlag) String() string { return api.EncodeCSISecrets(api.CSISecrets(f)) }

func (f kvFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	f[k] = v
	return nil
}

// ---- raw HTTP, for the routes api.Client does not wrap -------------------

// agentTarget resolves addr (http://, https:// or unix://; "" is the
// configured agent; no scheme means http) to the URL to ask, with the
// dialer and TLS config that reach it. A unix socket comes back as
// http://unix with a dialer for the socket.
func agentTarget(cfg *api.Config, addr string) (*url.URL, func(ctx context.Context, network, address string) (net.Conn, error), *tls.Config, error) {
	if addr == "" {
		addr = cfg.Address
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("invalid address %q: %w", addr, err)
	}
	var tc *tls.Config
	if cfg.TLSConfig != nil {
		if tc, err = cfg.TLSConfig.ClientConfig(); err != nil {
			return nil, nil, nil, fmt.Errorf("tls: %w", err)
		}
	}
	dial := (&net.Dialer{Timeout: 5 * time.Second}).DialContext
	switch u.Scheme {
	case "http", "https":
	case "unix":
		sock := u.Path
		dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}
		u = &url.URL{Scheme: "http", Host: "unix"}
	default:
		return nil, nil, nil, fmt.Errorf("invalid address %q: scheme must be http, https or unix", addr)
	}
	return u, dial, tc, nil
}

// rawGet sends GET path?params to addr (http://, https:// or unix://;
// "" is the configured agent) with the CLI's token and namespace, and
// returns the open response. A non-2xx answer comes back as
// *api.StatusError, as the api package reports it.
func (m *Meta) rawGet(ctx context.Context, addr, path string, params url.Values) (*http.Response, error) {
	cfg := m.apiConfig()
	u, dial, tc, err := agentTarget(cfg, addr)
	if err != nil {
		return nil, err
	}
	transport := &http.Transport{Proxy: nil, DialContext: dial, TLSClientConfig: tc}
	if params == nil {
		params = url.Values{}
	}
	if cfg.Namespace != "" && params.Get("namespace") == "" {
		params.Set("namespace", cfg.Namespace)
	}
	u.Path = path
	u.RawQuery = params.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if cfg.Token != "" {
		req.Header.Set("X-Nomad-Token", cfg.Token)
	}
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, &api.StatusError{Code: resp.StatusCode, Body: string(b)}
	}
	return resp, nil
}

// ---- blocking queries -----------------------------------------------------

// maxBlock is the longest one blocking query waits; the servers cap it
// at 5 minutes anyway.
const maxBlock = 5 * time.Minute

// blockingOpts is a blocking query that waits for an index above index,
// at most until ctx ends.
func blockingOpts(ctx context.Context, index uint64) *api.QueryOptions {
	q := &api.QueryOptions{WaitIndex: index, WaitTime: maxBlock}
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); left < maxBlock {
			q.WaitTime = max(left, time.Millisecond)
		}
	}
	return q.WithContext(ctx)
}

// nextIndex is the index the next blocking query waits on. An index that
// went backwards (a restored snapshot) starts over. A server that sends
// no index cannot block; nextIndex then waits a second (or until ctx
// ends) so that following it does not spin.
func nextIndex(ctx context.Context, prev uint64, qm *api.QueryMeta) uint64 {
	if qm == nil || qm.LastIndex == 0 {
		t := time.NewTimer(time.Second)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		return prev
	}
	if qm.LastIndex < prev {
		return 0
	}
	return qm.LastIndex
}

// parseArgs parses args with fs, taking flags wherever they stand: before,
// between or after the positional arguments (`volume status vol-1
// -verbose`), as operators type them. What follows "--" is positional
// even if it looks like a flag. fs.Args() then holds the positional
// arguments in order.
func parseArgs(fs *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		rest := fs.Args()
		// flag stops at "--" (consumed) or at the first positional.
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	// Parse once more so fs.Args() is the positionals: "--" ends flag
	// parsing at once and is dropped.
	return fs.Parse(append([]string{"--"}, pos...))
}
