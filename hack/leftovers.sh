#!/usr/bin/env bash
# Finds what a test run left behind on this machine:
#   - processes of this session running from the test binaries' directories (KUBEBUILDER_ASSETS,
#     OCM_BINARIES_DIR, ARGOCD_BINARIES_DIR, NODE_BINARIES_DIR: API server, etcd, OCM, Argo CD,
#     kubelet...) or named containerd, containerd-shim-runc-v2 or runc, and the processes in a
#     real node's cgroups (/fleet-<node> in any hierarchy: the containers, which runc puts in
#     sessions of their own);
#   - what real nodes (test/node) make: network namespaces (nsfs mounts in a node's folder or
#     /run/netns/np-*), mounts in a node's folder (its netns bind, the kubelet's and containerd's),
#     host links np-*, cgroups /fleet-*, the kubelet's fixed paths (/var/lib/kubelet/device-plugins,
#     /var/log/containers/*, /var/lib/cni/results/*), and any host iptables or nft rule naming the
#     nodes' ranges (10.251., 10.244.) or links (np-): the nodes add none on the host.
#   hack/leftovers.sh list          prints what is there now, a word for each
#   hack/leftovers.sh check BEFORE  fails if anything is there now that is not in BEFORE (the
#                                   output of list), after printing it and removing what it
#                                   safely can: kills the processes (and removes their envtest
#                                   folders), kills the cgroups' tasks and removes the cgroups,
#                                   unmounts, deletes the links and the fixed paths' entries.
#                                   Rules are only reported.
#   LEFTOVERS_ONLY=REGEX              both look only at what its description matches (a test
#                                   of this script, beside a suite that runs fleets, checks
#                                   its own objects alone).
# Run after `go test` has returned: nothing of this session may still run by then. Another
# session's fleet may be running on the same machine: its processes are not looked at, what it
# had before `list` is in BEFORE, and the cgroups, folders and links of a node whose kubelet,
# containerd or API server runs in another session are left alone (a node another session is
# still preparing, with none of those running yet, is not recognised). A process is named by its
# pid and start time, since pids are reused.
set -euo pipefail
shopt -s nullglob
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

read_stat() { # sets st_state, st_session, st_start for pid; fails if it is gone
	local stat f
	{ read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
	# After the command name (which may hold spaces): state ppid pgrp session ...
	read -r -a f <<<"${stat##*) }"
	st_state=${f[0]} st_session=${f[3]} st_start=${f[19]}
}

# Words hold no white space: it is percent-encoded (mount points keep mountinfo's escapes).
enc() { REPLY=${1//%/%25}; REPLY=${REPLY// /%20}; REPLY=${REPLY//$'\t'/%09}; REPLY=${REPLY//$'\n'/%0A}; }
dec() { REPLY=${1//%0A/$'\n'}; REPLY=${REPLY//%09/$'\t'}; REPLY=${REPLY//%20/ }; REPLY=${REPLY//%25/%}; }
unesc() { REPLY=${1//\\040/ }; REPLY=${REPLY//\\011/$'\t'}; REPLY=${REPLY//\\012/$'\n'}; REPLY=${REPLY//\\134/\\}; }

read_stat $$
me=$st_session

declare -A before=() found=()
order=()
add() { # adds word $1 unless BEFORE has it, or LEFTOVERS_ONLY is set and its description does not match
	[[ -n "${before[$1]+x}" || -n "${found[$1]+x}" ]] && return 0
	if [[ -n "${LEFTOVERS_ONLY:-}" ]] && ! [[ "$(describe "$1")" =~ ${LEFTOVERS_ONLY} ]]; then
		return 0
	fi
	found[$1]=1
	order+=("$1")
}

# What another session's live nodes hold: their cgroup names, host links and folders. `list`
# takes them in all the same, so that once such a node has stopped, what it was still removing
# is in BEFORE.
declare -A foreign_names=() foreign_links=() foreign_dirs=()
foreign_kubelet=0 foreign_runtime=0 listing=0
foreign() { # name|link|dir key: another session's live node holds it, while checking
	((!listing)) || return 1
	case "$1" in
	name) [[ -n "${foreign_names[$2]+x}" ]] ;;
	link) [[ -n "${foreign_links[$2]+x}" ]] ;;
	dir) [[ -n "${foreign_dirs[$2]+x}" ]] ;;
	*) return 1 ;;
	esac
}
note_foreign() { # pid basename: a kubelet, containerd or API server of another session
	local args a prev=""
	mapfile -d '' -t args 2>/dev/null <"/proc/$1/cmdline" || return 0
	[[ "$2" != kube-apiserver ]] && foreign_runtime=1
	[[ "$2" == kubelet ]] && foreign_kubelet=1
	for a in "${args[@]}"; do
		case "$a" in
		--hostname-override=*) foreign_names[${a#*=}]=1 ;;
		--node-ip=10.251.*.2) a=${a#--node-ip=10.251.} && foreign_links[np-h${a%.2}]=1 ;;
		# A node's API server starts before its kubelet, right after its link is made.
		--bind-address=10.251.*.1) a=${a#--bind-address=10.251.} && foreign_links[np-h${a%.1}]=1 ;;
		--root-dir=*/kubelet/root) a=${a#*=} && note_foreign_dir "${a%/kubelet/root}" ;;
		*/containerd/config.toml) [[ "$prev" == --config ]] && note_foreign_dir "${a%/containerd/config.toml}" ;;
		esac
		prev=$a
	done
}

# A node's folder: its kubelet's configuration, written before containerd starts, names the
# node's cgroup and address.
note_foreign_dir() {
	local key value
	foreign_dirs[$1]=1
	while read -r key value; do
		case "$key $value" in
		"cgroupRoot: /fleet-"*) foreign_names[${value#/fleet-}]=1 ;;
		"address: 10.251."*.2) value=${value#10.251.} && foreign_links[np-h${value%.2}]=1 ;;
		esac
	done 2>/dev/null <"$1/kubelet/config.yaml" || true
}

scan_processes() {
	local dirs=() d pid exe base match
	for d in "${KUBEBUILDER_ASSETS:-}" "${OCM_BINARIES_DIR:-}" "${ARGOCD_BINARIES_DIR:-}" "${NODE_BINARIES_DIR:-}"; do
		[[ -n "$d" && -d "$d" ]] && dirs+=("$(cd "$d" && pwd -P)/")
	done
	# One find reads every exe link (a fork per process would be slow on a busy machine).
	while read -r pid exe; do
		pid=${pid#/proc/}
		base=${exe##*/}
		match=0
		case "$base" in containerd | containerd-shim-runc-v2 | runc) match=1 ;; esac
		for d in "${dirs[@]}"; do [[ "$exe" == "$d"* ]] && match=1; done
		[[ $match == 1 || "$base" == kubelet || "$base" == kube-apiserver ]] || continue
		read_stat "$pid" || continue
		[[ "$st_state" == [ZX] ]] && continue # a zombie holds nothing
		if [[ "$st_session" == "$me" ]]; then
			((match)) && add "p:$pid:$st_start"
		elif [[ "$base" == kubelet || "$base" == containerd || "$base" == kube-apiserver ]]; then
			note_foreign "$pid" "$base"
		fi
	done < <(find /proc/[0-9]*/exe -maxdepth 0 -printf '%h %l\n' 2>/dev/null)
}

cgroup_mounts=() node_mounts=()
read_mounts() {
	local mp rest fstype
	while read -r _ _ _ _ mp rest; do
		fstype=${rest#* - }
		fstype=${fstype%% *}
		case "$fstype" in
		cgroup | cgroup2) unesc "$mp" && cgroup_mounts+=("$REPLY") ;;
		*) node_mounts+=("$fstype $mp") ;;
		esac
	done </proc/self/mountinfo
}

node_dir() { # sets REPLY to the folder of the node whose layout path $1 is in, or fails
	local p=$1 d seg
	for seg in /kubelet/ /containerd/ /ns/; do
		[[ "$p" == *"$seg"* ]] || continue
		d=${p%%"$seg"*}
		# A node's folder always has ns/ (Prepare makes it first); /var/lib/kubelet's has not.
		if [[ "$d" == /?* && -d "$d/ns" ]] && [[ -e "$d/ns/net" || -d "$d/kubelet" || -d "$d/containerd" ]]; then
			REPLY=$d
			return 0
		fi
	done
	[[ "$p" == /?*/ns && -e "$p/net" ]] && REPLY=${p%/ns} && return 0
	return 1
}

scan_mounts() {
	local m fstype mp
	for m in "${node_mounts[@]}"; do
		fstype=${m%% *} mp=${m#* }
		unesc "$mp"
		if [[ "$fstype" == nsfs && "$REPLY" == /run/netns/np-* ]]; then
			add "n:$mp"
		elif node_dir "$REPLY"; then
			foreign dir "$REPLY" && continue
			if [[ "$fstype" == nsfs ]]; then add "n:$mp"; else add "m:$mp"; fi
		fi
	done
}

fleet_cgroups=()
scan_cgroups() {
	local m c name line pid
	declare -A protected=()
	for c in "${!before[@]}"; do [[ "$c" == c:*/fleet-* ]] && protected[${c##*/fleet-}]=1; done
	for m in "${cgroup_mounts[@]}"; do
		for c in "$m"/fleet-*; do
			[[ -d "$c" ]] || continue
			fleet_cgroups+=("$c")
			name=${c##*/fleet-}
			foreign name "$name" || add "c:$c"
		done
	done
	((${#fleet_cgroups[@]} > 0)) || return 0
	while IFS= read -r line; do
		pid=${line##*:}
		name=${line#*/fleet-}
		name=${name%%/*}
		read_stat "$pid" || continue
		[[ "$st_state" == [ZX] ]] && continue
		# The containers run in sessions of their own: a node's cgroup tells whose they are.
		if [[ "$st_session" == "$me" ]] || { [[ -z "${protected[$name]+x}" ]] && ! foreign name "$name"; }; then
			add "p:$pid:$st_start"
		fi
	done < <(find "${fleet_cgroups[@]}" -name cgroup.procs -exec grep -H . {} + 2>/dev/null)
}

scan_links() {
	local l
	for l in /sys/class/net/np-*; do
		l=${l##*/}
		foreign link "$l" || add "l:$l"
	done
}

rule_filter() { # prefix: the matching lines of a ruleset, with their table and chain
	awk -v prefix="$1" '
		/^\*/ { table = substr($0, 2) }                     # iptables-save
		$1 == "table" { table = $2 " " $3 }                 # nft
		$1 == "chain" || $1 == "set" || $1 == "map" { chain = $2 }
		/10\.251\.|10\.244\.|np-/ && !/^#/ {
			line = $0
			sub(/^[ \t]+/, "", line)
			gsub(/\[[0-9]+:[0-9]+\]/, "", line)         # counters change between runs
			print prefix " " table " " chain ": " line
		}'
}

host_rules() { # the host's matching rules, each once
	local s legacy=0
	# nft shows the rules iptables-nft adds too, so only the legacy ones are asked of iptables.
	# -s leaves out counters, which change between runs.
	if command -v nft >/dev/null; then nft -s list ruleset 2>/dev/null | rule_filter nft || true; fi
	for s in iptables-legacy-save ip6tables-legacy-save; do
		if command -v "$s" >/dev/null; then
			legacy=1
			"$s" 2>/dev/null | rule_filter "$s" || true
		fi
	done
	if ((!legacy)) && ! command -v nft >/dev/null && command -v iptables-save >/dev/null; then
		iptables-save 2>/dev/null | rule_filter iptables || true
	fi
}

scan_rules() {
	local line
	while IFS= read -r line; do
		enc "$line"
		add "r:$REPLY"
	done < <(host_rules)
}

scan_fixed() {
	local e
	# Shared by every kubelet on the machine: only a leftover when none runs.
	if [[ -d /var/lib/kubelet/device-plugins ]] && ((listing || !foreign_kubelet)); then
		add f:/var/lib/kubelet/device-plugins
	fi
	for e in /var/log/containers/* /var/lib/cni/results/*; do
		# While another session's node runs, only what points nowhere is surely not its.
		if ((foreign_runtime && !listing)) && ! [[ -L "$e" && ! -e "$e" ]]; then continue; fi
		enc "$e"
		add "f:$REPLY"
	done
}

scan() {
	found=() order=() cgroup_mounts=() node_mounts=() fleet_cgroups=()
	foreign_names=() foreign_links=() foreign_dirs=() foreign_kubelet=0 foreign_runtime=0
	scan_processes
	read_mounts
	scan_cgroups
	scan_mounts
	scan_links
	scan_rules
	scan_fixed
}

describe() { # prints word $1 for people
	local w=$1 pid cmd
	case "$w" in
	p:*)
		pid=${w#p:}
		pid=${pid%%:*}
		cmd=$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") || cmd="(gone)"
		echo "process $pid: ${cmd:0:160}"
		;;
	c:*) echo "cgroup ${w#c:}" ;;
	n:*) unesc "${w#n:}" && echo "network namespace $REPLY" ;;
	m:*) unesc "${w#m:}" && echo "mount $REPLY" ;;
	l:*) echo "link ${w#l:}" ;;
	r:*) dec "${w#r:}" && echo "rule (remove it by hand) $REPLY" ;;
	f:*) dec "${w#f:}" && echo "file $REPLY" ;;
	esac
}

same_process() { # word p:pid:start still names a live process
	local pid=${1#p:} start
	start=${pid#*:} pid=${pid%%:*}
	read_stat "$pid" && [[ "$st_start" == "$start" && "$st_state" != [ZX] ]]
}

any_live() { # some process of the words found still runs
	local w
	for w in "${order[@]}"; do [[ "$w" == p:* ]] && same_process "$w" && return 0; done
	return 1
}

any_dir() {
	local d
	for d in "$@"; do [[ -d "$d" ]] && return 0; done
	return 1
}

kill_cgroup_tasks() {
	local pid
	while read -r pid; do kill -9 "$pid" 2>/dev/null || true; done < <(find "$@" -name cgroup.procs -exec cat {} + 2>/dev/null)
}

clean() {
	local w pid arg i cmdline pids=() dirs=() cgroups=() mps=() links=() files=()
	for w in "${order[@]}"; do
		case "$w" in
		p:*) same_process "$w" && pid=${w#p:} && pids+=("${pid%%:*}") ;;
		c:*) cgroups+=("${w#c:}") ;;
		n:* | m:*) mps+=("${w#?:}") ;;
		l:*) links+=("${w#l:}") ;;
		f:*) dec "${w#f:}" && files+=("$REPLY") ;;
		esac
	done
	for pid in "${pids[@]}"; do
		# envtest's folders (etcd's data, the API server's certificates, those a restart kept)
		# go only when envtest stops the process.
		mapfile -d '' -t cmdline 2>/dev/null <"/proc/$pid/cmdline" || continue
		for arg in "${cmdline[@]}"; do
			case "$arg" in
			--data-dir=*/k8s_test_framework_* | --cert-dir=*/k8s_test_framework_* | --cert-dir=*/apiserver-certs-*) dirs+=("${arg#*=}") ;;
			esac
		done
	done
	if ((${#pids[@]} > 0)); then
		kill -9 "${pids[@]}" 2>/dev/null || true
		# Their mounts and cgroups are busy until they are gone.
		for ((i = 0; i < 100; i++)); do
			any_live || break
			sleep 0.05
		done
	fi
	((${#dirs[@]} == 0)) || rm -rf "${dirs[@]}"
	if ((${#cgroups[@]} > 0)); then
		for ((i = 0; i < 50; i++)); do
			kill_cgroup_tasks "${cgroups[@]}"
			# -depth: the children before their parent, which only an empty cgroup allows.
			find "${cgroups[@]}" -depth -type d -exec rmdir {} + 2>/dev/null || true
			any_dir "${cgroups[@]}" || break
			sleep 0.1
		done
	fi
	if ((${#mps[@]} > 0)); then
		# The deepest mounts first: a reverse sort puts a folder's mounts before its own.
		while IFS= read -r w; do
			unesc "$w"
			umount "$REPLY" 2>/dev/null || umount -l "$REPLY" 2>/dev/null || true
			# What `ip netns del` does after its unmount.
			if [[ "$REPLY" == /run/netns/np-* ]]; then rm -f "$REPLY"; fi
		done < <(printf '%s\n' "${mps[@]}" | sort -r)
	fi
	# A veth's host end goes by itself once its namespace is freed, which may take a moment.
	for w in "${links[@]}"; do ip link del "$w" 2>/dev/null || true; done
	((${#files[@]} == 0)) || rm -rf "${files[@]}"
}

case "${1:-}" in
list)
	listing=1
	scan
	printf '%s ' "${order[@]}"
	;;
check)
	read -r -d '' -a words <<<"${2:-}" || true
	for w in "${words[@]}"; do before[$w]=1; done
	scan
	((${#order[@]} == 0)) && exit 0
	echo "the tests left these behind (stopping and removing them):" >&2
	for w in "${order[@]}"; do echo "  $(describe "$w")" >&2; done
	clean
	scan
	if ((${#order[@]} > 0)); then
		echo "still there after that:" >&2
		for w in "${order[@]}"; do echo "  $(describe "$w")" >&2; done
	fi
	exit 1
	;;
*)
	echo "usage: $0 list | check BEFORE" >&2
	exit 2
	;;
esac
