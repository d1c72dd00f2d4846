#!/usr/bin/env bash
# Finds the test binaries' processes (API server, etcd, OCM, Argo CD, Redis: whatever runs
# from the directories in KUBEBUILDER_ASSETS, OCM_BINARIES_DIR, ARGOCD_BINARIES_DIR and
# NODE_BINARIES_DIR: kubelet, kube-proxy, kube-scheduler) that a
# test run left behind.
#   hack/leftover-processes.sh list          prints those running now in this session
#   hack/leftover-processes.sh check BEFORE  fails, and stops them and removes their envtest
#                                            folders, for any running now in this session
#                                            that is not in BEFORE (the output of list)
# Run after `go test` has returned: every test process has ended by then, so any process of
# this session still running from those directories was left behind, handed to pid 1 (or to a
# subreaper), and nothing will stop it. A process is named by its pid and start time, since
# pids are reused; other sessions (a benchmark in another terminal) are not looked at.
set -euo pipefail

session_of() { # the session id of pid, from /proc/<pid>/stat after the command name
	local stat fields
	stat=$(cat "/proc/$1/stat")
	read -r -a fields <<<"${stat##*) }"
	echo "${fields[3]}"
}

ours() { # "pid:starttime" of each process of this session running from the binary directories
	local dirs=() exe pid d stat fields me
	me=$(session_of $$)
	for d in "${KUBEBUILDER_ASSETS:-}" "${OCM_BINARIES_DIR:-}" "${ARGOCD_BINARIES_DIR:-}" "${NODE_BINARIES_DIR:-}"; do
		[[ -n "$d" && -d "$d" ]] && dirs+=("$(cd "$d" && pwd -P)/")
	done
	((${#dirs[@]} > 0)) || return 0
	for exe in /proc/[0-9]*/exe; do
		pid=${exe#/proc/}
		pid=${pid%/exe}
		exe=$(readlink "$exe" 2>/dev/null) || continue
		for d in "${dirs[@]}"; do
			[[ "$exe" == "$d"* ]] || continue
			stat=$(cat "/proc/$pid/stat" 2>/dev/null) || break
			read -r -a fields <<<"${stat##*) }"
			# After the command name: state ppid pgrp session ... starttime is the 20th.
			[[ "${fields[3]}" == "$me" ]] && echo "$pid:${fields[19]}"
			break
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
	for p in $(ours); do
		[[ "$before" == *" $p "* ]] || left+=("${p%%:*}")
	done
	((${#left[@]} == 0)) && exit 0
	echo "the tests left these processes running (now stopped, with their envtest folders):" >&2
	dirs=()
	for pid in "${left[@]}"; do
		cmdline=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null) || continue
		echo "  $pid $(tr '\n' ' ' <<<"$cmdline" | cut -c1-160)" >&2
		# envtest's folders (etcd's data, the API server's certificates, those a restart kept)
		# go only when envtest stops the process.
		while IFS= read -r arg; do
			case "$arg" in
			--data-dir=*/k8s_test_framework_* | --cert-dir=*/k8s_test_framework_* | --cert-dir=*/apiserver-certs-*) dirs+=("${arg#*=}") ;;
			esac
		done <<<"$cmdline"
	done
	kill -9 "${left[@]}" 2>/dev/null || true
	if ((${#dirs[@]} > 0)); then
		sleep 1
		rm -rf "${dirs[@]}"
	fi
	exit 1
	;;
*)
	echo "usage: $0 list | check BEFORE" >&2
	exit 2
	;;
esac
