#!/usr/bin/env bash
# Finds the test binaries' processes (API server, etcd, OCM, Argo CD, Redis: whatever runs
# from the directories in KUBEBUILDER_ASSETS, OCM_BINARIES_DIR and ARGOCD_BINARIES_DIR) that a
# test run left behind.
#   hack/leftover-processes.sh list          prints the pids of those running now
#   hack/leftover-processes.sh check PIDS    fails, and stops them, for any running now that
#                                            is not in PIDS and whose parent is gone
# A process whose parent is gone has been handed to pid 1, and nothing will stop it: on a CI
# machine it outlives the job.
set -euo pipefail

ours() {
	local dirs=() pid exe d
	for d in "${KUBEBUILDER_ASSETS:-}" "${OCM_BINARIES_DIR:-}" "${ARGOCD_BINARIES_DIR:-}"; do
		[[ -n "$d" ]] && dirs+=("$(cd "$d" && pwd -P)/")
	done
	for exe in /proc/[0-9]*/exe; do
		pid=${exe#/proc/}
		pid=${pid%/exe}
		exe=$(readlink "$exe" 2>/dev/null) || continue
		for d in "${dirs[@]}"; do
			if [[ "$exe" == "$d"* ]]; then
				echo "$pid"
				break
			fi
		done
	done
}

case "${1:-}" in
list)
	ours | tr '\n' ' '
	;;
check)
	before=" ${2:-} "
	left=()
	for pid in $(ours); do
		[[ "$before" == *" $pid "* ]] && continue
		ppid=$(awk '{print $4}' "/proc/$pid/stat" 2>/dev/null) || continue
		[[ "$ppid" == 1 ]] && left+=("$pid")
	done
	if ((${#left[@]} > 0)); then
		echo "the tests left these processes running (now stopped, with their envtest folders):" >&2
		dirs=()
		for pid in "${left[@]}"; do
			echo "  $pid $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-160)" >&2
			# envtest's own folders (etcd's data, the API server's certificates) die with it
			# only when it is stopped.
			while IFS= read -r -d '' arg; do
				case "$arg" in
				--data-dir=*/k8s_test_framework_* | --cert-dir=*/k8s_test_framework_*) dirs+=("${arg#*=}") ;;
				esac
			done <"/proc/$pid/cmdline"
		done
		kill -9 "${left[@]}" 2>/dev/null || true
		if ((${#dirs[@]} > 0)); then
			sleep 1
			rm -rf "${dirs[@]}"
		fi
		exit 1
	fi
	;;
*)
	echo "usage: $0 list | check PIDS" >&2
	exit 2
	;;
esac
