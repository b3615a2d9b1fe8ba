package helper

// Version is the Berth version, set at build time with
// -ldflags "-X github.com/berth-io/berth/helper.Version=...". Clients
// report it as the node attribute "nomad.version" (Nomad's CLI shows that
// key), agents in /v1/agent/self and /v1/agent/members.
var Version = "0.1.0-dev"
