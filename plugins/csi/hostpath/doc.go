// Package hostpath is Berth's own CSI plugin: volumes are directories under a
// root directory, and publishing (and, with Config.Stage, staging) is a bind
// mount. It is run as
// `berth plugin hostpath` and serves the CSI Identity, Controller and Node
// services on a unix socket, depending on its Mode.
//
// It exists to give Berth a real plugin that mounts things, for end-to-end
// tests and for single-machine clusters, and to act as a witness in Berth's
// safety tests: it refuses, with FailedPrecondition, to let a volume whose
// access mode allows a single node be attached, staged or published on a
// second node. Several plugin processes that share one root directory (several
// Berth client nodes on one machine) share their state, so the check holds
// across processes.
//
// Layout of the root directory:
//
//	<root>/.lock            flock(2) held around every state read and write
//	<root>/state.json       checkpoint of the state, written at compaction (see store.go)
//	<root>/state.journal    changes since the checkpoint, one JSON line each
//	<root>/volumes/<id>/    one directory per volume (block.img in it for
//	                        the block access type: published as a loop
//	                        device, see block.go)
//	<root>/snapshots/<id>/  one directory per snapshot (a recursive copy)
//
// The life of a volume on a node, as this plugin sees it (NodeStage and
// NodeUnstage only with Config.Stage, the -stage flag):
//
//	CreateVolume ──► ControllerPublish(node) ──► [NodeStage(staging path)] ──► NodePublish(target)
//	                                                                                │
//	DeleteVolume ◄── ControllerUnpublish(node) ◄── [NodeUnstage] ◄──────── NodeUnpublish
//
// Staging is off by default: a directory gains nothing from being staged
// before it is published (the kubernetes-csi hostpath driver advertises
// STAGE_UNSTAGE_VOLUME with a NodeStage that does nothing), and each stage
// cost the CO a plugin round trip on its claim path. Without it,
// NodePublish binds the volume directory itself and makes the checks
// NodeStage makes otherwise. The e2e scenarios run it with -stage, so the
// CO's staging path stays exercised against a real plugin.
//
// A volume the CO registered without CreateVolume (statically provisioned)
// starts at ControllerPublish with Config.StaticVolumes, or at its first
// NodeStage (NodePublish without staging) in node mode: its directory is
// created empty on that first use.
//
// Every step is idempotent, and each step refuses to run out of order
// (NodePublish before NodeStage when staging, NodeUnstage while published, NodeStage of a
// controller-created volume that is not controller-published to the node), so
// a CO that skips a step gets a FailedPrecondition naming the volume and what
// is missing instead of silently working.
package hostpath
