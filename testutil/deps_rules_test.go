package testutil

// The import rules: DESIGN.md §1 is generated from this file (run
// `BERTH_UPDATE_DESIGN=1 go test ./testutil -run TestDesignTable`), and
// TestDependencies (deps_test.go) holds the code to them.
//
// To add a package: add a row to importRules (longest prefix wins, so a
// sub-package without a row of its own follows its parent's), list the
// Berth packages and third-party modules it may import, say why, and
// regenerate the doc. A new third-party module also needs a line in
// thirdParty saying why Berth depends on it at all.

// importRule says what one package's production (non-_test.go) files may
// import. A package may always import itself, its sub-packages and the
// standard library (minus noStd).
type importRule struct {
	pkg   string   // package path under the module
	what  string   // what lives there
	berth []string // Berth package path prefixes it may import ("" = any)
	third []string // third-party modules it may import: keys of thirdParty
	noStd []string // standard library path prefixes it must not import
	// doubles lets a tool whose subject is simulated (berth-nodesim)
	// import test doubles, as test code may.
	doubles bool
	why     string // why the arrows are what they are
}

var importRules = []importRule{
	{pkg: "cmd/berth", what: "`main` only",
		berth: []string{"command", "plugins/drivers/executor/early"},
		why:   "main only dispatches to command; an executor runs from package early's init, before the rest of the binary initialises"},
	{pkg: "cmd/berth-bench", what: "the CSI latency table next to floors measured in the same run",
		berth: []string{"api", "helper/steptrace"},
		third: []string{"github.com/hashicorp/raft", "github.com/hashicorp/raft-wal", "github.com/container-storage-interface/spec", "google.golang.org/grpc", "golang.org/x/sys"},
		why:   "it drives a real agent through the HTTP API as an outside program would; the floors use the same libraries Berth does; it reads the agent's step trace, whose names helper/steptrace owns"},
	{pkg: "cmd/berth-nodesim", what: "thousands of simulated client nodes (the real client, the minimal alloc runner, a fake CSI node plugin each) against one server",
		berth:   []string{"client", "nomad", "plugins/csi", "plugins/csi/fake", "plugins/drivers"},
		third:   []string{"github.com/hashicorp/go-hclog", "github.com/hashicorp/go-metrics", "github.com/hashicorp/raft", "google.golang.org/grpc"},
		doubles: true,
		why:     "it measures the servers with the real client code, so it wires client and server like the agent does; the fake plugin and mock driver stand in for a node's storage and workloads, so it alone of the production packages may import test doubles"},
	{pkg: "command", what: "one file per CLI verb",
		berth: []string{"api", "jobspec", "helper", "command/agent", "plugins/csi/hostpath", "plugins/drivers/executor"},
		third: []string{"github.com/hashicorp/go-hclog", "github.com/gorilla/websocket", "golang.org/x/sys"},
		why:   "the CLI speaks the HTTP API; only command/agent wires the server and client; the hostpath plugin and the task executor run from the same binary"},
	{pkg: "command/agent", what: "`berth agent`: wires server, client and the HTTP API; the agent config",
		berth: []string{"api", "jobspec", "helper", "nomad", "client", "plugins"},
		third: []string{"github.com/hashicorp/go-hclog", "github.com/hashicorp/go-metrics", "github.com/hashicorp/hcl", "github.com/zclconf/go-cty", "github.com/gorilla/websocket"},
		why:   "the agent wires everything"},
	{pkg: "api", what: "Go HTTP client and wire types, usable by outsiders",
		why: "outsiders import api: nothing internal, no dependencies"},
	{pkg: "jobspec", what: "HCL2 → `api.Job`; volume spec files → `api.CSIVolume`",
		berth: []string{"api"},
		third: []string{"github.com/hashicorp/hcl", "github.com/zclconf/go-cty"},
		why:   "jobspecs become api types"},
	{pkg: "nomad", what: "the server: Raft, RPC and forwarding, node sessions, the FSM, the endpoints; sub-packages without a row of their own follow this row",
		berth: []string{"nomad", "plugins/csi", "helper"},
		third: []string{"github.com/hashicorp/go-bexpr", "github.com/hashicorp/go-hclog", "github.com/hashicorp/go-memdb", "github.com/hashicorp/go-metrics", "github.com/hashicorp/go-msgpack", "github.com/hashicorp/raft", "github.com/hashicorp/raft-wal"},
		why:   "the server never imports the client or the CLI"},
	{pkg: "nomad/structs", what: "the internal data model, one file per resource; pure methods only",
		berth: []string{"helper"},
		noStd: []string{"net", "os", "syscall", "unsafe", "reflect"},
		why:   "structs is a leaf: data and pure methods, no encoding, no I/O"},
	{pkg: "nomad/msgpack", what: "the msgpack encoding of the data model (Raft entries, snapshots, client state) and the net/rpc codec",
		berth: []string{"nomad/structs"},
		third: []string{"github.com/hashicorp/go-msgpack"},
		why:   "servers and clients share the encoding; structs stays free of it"},
	{pkg: "nomad/acl", what: "the ACL policy language",
		berth: []string{"helper"},
		third: []string{"github.com/hashicorp/hcl"},
		why:   "the policy language knows nothing of tokens, Raft or endpoints"},
	{pkg: "nomad/auth", what: "the endpoint table (every RPC and HTTP-only endpoint with its rule) and token resolution",
		berth: []string{"nomad/acl", "nomad/structs", "helper"},
		third: []string{"github.com/hashicorp/go-memdb"},
		why:   "authorization sees state through a narrow interface and decides; it applies nothing"},
	{pkg: "nomad/audit", what: "the audit log: JSON lines per server, rotated by size",
		why: "a leaf: entries in, lines out"},
	{pkg: "nomad/connlimit", what: "per-source caps on open RPC connections, idle deadlines, accept backoff",
		berth: []string{"helper"},
		third: []string{"github.com/hashicorp/go-hclog"},
		why:   "a listener wrapper knows connections, not the server"},
	{pkg: "nomad/state", what: "the go-memdb schema and state store",
		berth: []string{"nomad/structs", "helper"},
		third: []string{"github.com/hashicorp/go-memdb", "github.com/hashicorp/go-hclog"},
		why:   "the state store knows only the data model"},
	{pkg: "nomad/claims", what: "the claim state machine: what happens next to a claim, as pure functions",
		berth: []string{"nomad/structs", "helper"},
		why:   "the claim state machine is pure decisions over the data model"},
	{pkg: "nomad/volumewatcher", what: "the leader's claim reaper",
		berth: []string{"nomad/claims", "nomad/state", "nomad/structs", "helper"},
		third: []string{"github.com/hashicorp/go-memdb", "github.com/hashicorp/go-hclog", "github.com/hashicorp/go-metrics"},
		why:   "leader loops see state through narrow interfaces"},
	{pkg: "nomad/explain", what: "why a volume cannot be claimed or released, and the next action, in words",
		berth: []string{"nomad/claims", "nomad/structs"},
		why:   "it only words what nomad/claims decides, so it never disagrees with the servers"},
	{pkg: "nomad/stream", what: "the event stream: state changes as events in a ring buffer, subscriptions",
		berth: []string{"nomad/state", "nomad/structs", "helper"},
		third: []string{"github.com/hashicorp/go-memdb"},
		why:   "events are made from the store's committed changes; the stream never reaches back into the server"},
	{pkg: "nomad/scheduler", what: "the schedulers: service, batch, system",
		berth: []string{"nomad/claims", "nomad/state", "nomad/structs", "helper"},
		third: []string{"github.com/hashicorp/go-memdb", "github.com/hashicorp/go-hclog"},
		why:   "schedulers see state through narrow interfaces"},
	{pkg: "nomad/leader", what: "the leader runtime: eval broker, blocked evals, plan queue and applier, heartbeats, drainer, workers",
		berth: []string{"nomad/state", "nomad/structs", "nomad/scheduler", "helper"},
		third: []string{"github.com/hashicorp/go-memdb", "github.com/hashicorp/go-hclog", "github.com/hashicorp/go-metrics"},
		why:   "the leader runtime sees the server through narrow interfaces (a state func, a Raft applier), never package nomad"},
	{pkg: "nomad/raftguard", what: "screens inbound Raft RPCs before hashicorp/raft sees them",
		berth: []string{"nomad/structs", "helper"},
		third: []string{"github.com/hashicorp/raft", "github.com/hashicorp/go-hclog"},
		why:   "it knows Raft's wire and the cluster's configuration, not the server"},
	{pkg: "nomad/raftlog", what: "opens the servers' Raft log (raft-wal), repairing segments raft-wal v0.4.0 leaves unreadable after a suffix truncation",
		third: []string{"github.com/hashicorp/raft-wal", "github.com/hashicorp/go-hclog"},
		why:   "it knows raft-wal's files, not the server"},
	{pkg: "client", what: "the client agent: alloc and task runners, CSI manager, plugin registry, node session",
		berth: []string{"nomad/structs", "nomad/msgpack", "plugins", "helper"},
		third: []string{"github.com/hashicorp/go-hclog", "golang.org/x/sys"},
		why:   "the client never reaches into the server's packages"},
	{pkg: "client/state", what: "the client's bbolt state file",
		berth: []string{"nomad/structs", "nomad/msgpack", "plugins/drivers", "helper"},
		third: []string{"go.etcd.io/bbolt", "github.com/hashicorp/go-msgpack"},
		why:   "state persists data-model values and driver handles, nothing else"},
	{pkg: "client/pluginmanager/csimanager", what: "one manager per CSI plugin: fingerprints, stage/publish, mount bookkeeping",
		berth: []string{"client", "nomad/structs", "plugins/csi", "helper"},
		third: []string{"github.com/hashicorp/go-hclog", "golang.org/x/sys", "google.golang.org/grpc"},
		why:   "it calls plugins through plugins/csi and reads their gRPC status codes"},
	{pkg: "plugins/csi", what: "the CSI gRPC client wrapper: type translation, timeouts, error classes, retries",
		berth: []string{"nomad/structs", "helper"},
		third: []string{"github.com/container-storage-interface/spec", "google.golang.org/grpc", "github.com/hashicorp/go-hclog", "github.com/hashicorp/go-metrics"},
		why:   "the CSI wrapper translates at the boundary only"},
	{pkg: "plugins/csi/fake", what: "an in-process CSI plugin with fault hooks, for tests",
		berth: []string{"nomad/structs", "helper"},
		third: []string{"github.com/container-storage-interface/spec", "google.golang.org/grpc", "google.golang.org/protobuf"},
		why:   "a test double that speaks the CSI spec"},
	{pkg: "plugins/csi/hostpath", what: "Berth's own CSI plugin (real mounts), run as `berth plugin hostpath`",
		third: []string{"github.com/container-storage-interface/spec", "google.golang.org/grpc", "google.golang.org/protobuf", "github.com/hashicorp/go-hclog", "golang.org/x/sys"},
		why:   "the hostpath plugin speaks only the CSI spec"},
	{pkg: "plugins/drivers", what: "the task driver interface, `raw_exec`, `exec`, the executor; `mock` for tests",
		berth: []string{"nomad/structs", "helper"},
		third: []string{"github.com/hashicorp/go-hclog", "golang.org/x/sys"},
		why:   "drivers know only the data model"},
	{pkg: "helper", what: "small leaf utilities: backoff, keyed lock, delay queue, uuid",
		why: "helper is a leaf: the standard library only"},
	{pkg: "testutil", what: "in-process servers and clusters, wait helpers, the test binary build",
		berth: []string{""},
		third: []string{"github.com/hashicorp/go-hclog", "github.com/hashicorp/raft"},
		why:   "test helpers may import any Berth package; production code never imports them"},
	{pkg: "testutil/sim", what: "the fault-schedule simulator: seeded schedules, a witness of plugin calls, checkers, shrinking",
		berth: []string{""},
		third: []string{"github.com/container-storage-interface/spec", "google.golang.org/grpc", "github.com/hashicorp/raft"},
		why:   "its witness reads CSI requests and injects gRPC error codes into the fake plugin; its lossy network wraps Raft's transport"},
	{pkg: "e2e", what: "end-to-end tests with the real binary, Raft on disk and real mounts (all in _test.go)",
		why: "the package itself is only its doc"},
	{pkg: "compat", what: "the upstream Nomad api client against Berth; its own Go module (all in _test.go)",
		why: "the package itself is only its doc; its module keeps the upstream client's dependencies out of Berth's"},
}

// thirdParty is every third-party module that production code may import,
// with why Berth depends on it. A rule may list only modules named here.
var thirdParty = map[string]string{
	"github.com/container-storage-interface/spec": "the CSI gRPC bindings: what storage plugins speak",
	"github.com/gorilla/websocket":                "alloc exec's stream, a websocket as Nomad's /v1/client/allocation/:id/exec (the upstream api client speaks it)",
	"github.com/hashicorp/go-bexpr":               "`?filter=` expressions, as Nomad's API takes them",
	"github.com/hashicorp/go-hclog":               "the one structured logger",
	"github.com/hashicorp/go-memdb":               "the state store: indexed MVCC tables with watch sets for blocking queries",
	"github.com/hashicorp/go-metrics":             "the gauges and timers served at /v1/metrics",
	"github.com/hashicorp/go-msgpack":             "the encoding of Raft entries, snapshots, RPC and client state",
	"github.com/hashicorp/hcl":                    "HCL2 jobspecs, volume specs, agent config and ACL policies",
	"github.com/hashicorp/raft":                   "consensus",
	"github.com/hashicorp/raft-wal":               "the Raft log on disk",
	"github.com/zclconf/go-cty":                   "HCL2's values",
	"go.etcd.io/bbolt":                            "the client's state file",
	"golang.org/x/sys":                            "mount(2), namespaces and other system calls the standard library lacks",
	"google.golang.org/grpc":                      "the CSI transport",
	"google.golang.org/protobuf":                  "CSI messages' well-known types (timestamps, wrappers)",
}

// bannedInTests are modules no file of the main module may import, tests
// included, with why.
var bannedInTests = map[string]string{
	"github.com/hashicorp/nomad": "Nomad is BUSL; only the compat module may import its MPL api client, unmodified, in tests",
}
