// Package compat checks that existing Nomad tooling works against Berth:
// its tests start an in-process Berth agent and drive it with the
// upstream github.com/hashicorp/nomad/api client (MPL-2.0, used
// unmodified as a test dependency). It is its own Go module so that the
// upstream client's dependencies never reach Berth's.
package compat
