#!/usr/bin/env bash
# Prints the module's packages for `go test`, the longest-running first. go test runs the
# packages it is given in that order, -p at a time, so starting the long ones first keeps
# the last minutes from being spent on one package while the other cores idle. The list is
# from a make test on 2 cores (seconds per package in its output), the pull model's times from
# go test -p 2 ./pkg/pullmodel/... on 2 cores; a package missing from it still runs, after them.
set -euo pipefail
cd "$(dirname "$0")/.."
# test/e2e is not among them: make test runs it alone, after these.
slow=(
	test/node                  # 120 to 740 s, real nodes; mostly waiting on kubelets, little CPU
	pkg/gitopscluster          # 400 to 780 s
	test/fleet                 # ~280 s, real nodes
	test/chart                 # ~230 s
	test/fault                 # ~190 s
	pkg/pullmodel/propagation  # ~110 s
	pkg/ledger                 # 110 to 220 s
	pkg/pullmodel/clusters     # ~70 s
	pkg/pullmodel/setup        # ~70 s
	test/certmanager
	pkg/pullmodel/status       # ~30 s
	pkg/pullmodel/report       # ~20 s
	pkg/pullmodel/resourcelist # ~15 s
)
module=$(go list -m)
exclude=()
for p in "${slow[@]}"; do
	echo "./$p/"
	exclude+=(-e "$module/$p")
done
go list ./... | grep -v -x -F "${exclude[@]}" -e "$module/test/e2e" | sed "s#^$module#.#"
