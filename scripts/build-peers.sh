#!/usr/bin/env bash
# build-peers.sh builds the independent CSI peers Berth is tested against
# into $BIN (default: <repo>/.bin). Each peer is pinned by its own throwaway
# tools module under tools/, outside the main module's package graph.
#
# Idempotent: a binary already built from the pinned version is kept.
#
# Exit status: 0 built (or already there), 1 build failed, 3 the pinned
# modules could not be downloaded (no network and an empty module cache).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${BIN:-$repo/.bin}
mkdir -p "$BIN"
BIN=$(cd "$BIN" && pwd)

# The tools modules stand alone: no workspace, no vendoring.
export GOWORK=off
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly"

log() { echo "build-peers: $*" >&2; }

# build_peer NAME TOOLS_DIR MODULE PACKAGE builds PACKAGE (from MODULE, at
# the version TOOLS_DIR/go.mod pins) into $BIN/NAME.
build_peer() {
	local name=$1 dir=$repo/$2 module=$3 pkg=$4
	local want have out tmp

	if [[ ! -f $dir/go.mod ]]; then
		log "$name: missing tools module $dir/go.mod"
		return 1
	fi
	want=$(awk -v m="$module" '$1 == m { print $2; exit }' "$dir/go.mod")
	if [[ -z $want ]]; then
		log "$name: $dir/go.mod does not require $module"
		return 1
	fi

	if [[ -x $BIN/$name ]]; then
		have=$(go version -m "$BIN/$name" 2>/dev/null |
			awk -v m="$module" '($1 == "mod" || $1 == "dep") && $2 == m { print $3; exit }')
		if [[ $have == "$want" ]]; then
			log "$name $want already built at $BIN/$name"
			return 0
		fi
	fi

	log "$name: downloading $module@$want"
	if ! out=$(cd "$dir" && go mod download 2>&1); then
		log "$name: cannot download the modules pinned in $dir/go.mod (no network?):"
		echo "$out" >&2
		return 3
	fi

	log "$name: building $pkg@$want into $BIN/$name"
	tmp=$(mktemp "$BIN/.$name.XXXXXX")
	if ! (cd "$dir" && go build -o "$tmp" "$pkg"); then
		rm -f "$tmp"
		log "$name: build of $pkg@$want failed"
		return 1
	fi
	mv -f "$tmp" "$BIN/$name" # atomic: concurrent runs never see half a binary
}

build_peer mock-driver tools/mock-driver \
	github.com/kubernetes-csi/csi-test/v4 github.com/kubernetes-csi/csi-test/v4/cmd/mock-driver
