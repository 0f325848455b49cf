#!/bin/sh
# compose.sh TOPOLOGY [COMMAND [ARGS...]]
#
# Runs one of lockcheck's topologies (redis, sentinel, redlock, etcd) from
# docker/compose.yaml as the Compose project lockcheck-TOPOLOGY.
#
#   up [ARGS]    (the default) make the node directories under docker/.run/,
#                owned by you and mounted at /data in each container, with
#                each sentinel's writable sentinel.conf and each Redlock
#                node's faketime file; then `up -d` and list the addresses
#   down [ARGS]  remove the containers and the network, then the node
#                directories
#   OTHER ...    any other docker-compose command: ps, logs, stop, start,
#                restart, pause, unpause, kill -s SIGSTOP redis-0, ...
#
# The images have no shell, so these files are made here on the host rather
# than by the containers. Images: LOCKCHECK_REDIS_IMAGE (default
# lockcheck/redis:local) and LOCKCHECK_ETCD_IMAGE (lockcheck/etcd:local).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
run_dir=$here/.run

usage() {
	sed -n '2,18s/^# \{0,1\}//p' "$0" >&2
	exit 2
}

[ $# -ge 1 ] || usage
topology=$1
shift
case $topology in
# The subnets match the addresses in compose.yaml and docker/sentinel/.
redis) nodes="redis" subnet=172.30.240.0/24 ;;
sentinel) nodes="redis-0 redis-1 redis-2 sentinel-0 sentinel-1 sentinel-2" subnet=172.30.241.0/24 ;;
redlock) nodes="redlock-1 redlock-2 redlock-3 redlock-4 redlock-5" subnet=172.30.242.0/24 ;;
etcd) nodes="etcd-0 etcd-1 etcd-2" subnet=172.30.243.0/24 ;;
-h | --help | help) usage ;;
*)
	echo "compose.sh: unknown topology \"$topology\" (want redis, sentinel, redlock or etcd)" >&2
	exit 2
	;;
esac
command=${1:-up}
[ $# -eq 0 ] || shift

if command -v docker-compose >/dev/null 2>&1; then
	compose=docker-compose
elif docker compose version >/dev/null 2>&1; then
	compose="docker compose"
else
	echo "compose.sh: neither docker-compose nor the docker compose plugin is installed" >&2
	exit 1
fi

# The containers run as you, like lockcheck's, so that what they write under
# docker/.run/ is yours to read and remove. Under sudo, "you" is the user who
# ran sudo; LOCKCHECK_UID and LOCKCHECK_GID choose another.
LOCKCHECK_UID=${LOCKCHECK_UID:-${SUDO_UID:-$(id -u)}}
LOCKCHECK_GID=${LOCKCHECK_GID:-${SUDO_GID:-$(id -g)}}
LOCKCHECK_TOPOLOGY=$topology
LOCKCHECK_SUBNET=$subnet
export LOCKCHECK_UID LOCKCHECK_GID LOCKCHECK_TOPOLOGY LOCKCHECK_SUBNET

project() {
	# $compose is two words for the plugin.
	# shellcheck disable=SC2086
	$compose -f "$here/compose.yaml" -p "lockcheck-$topology" --profile "$topology" "$@"
}

prepare() {
	case $topology in
	etcd) image=${LOCKCHECK_ETCD_IMAGE:-lockcheck/etcd:local} ;;
	*) image=${LOCKCHECK_REDIS_IMAGE:-lockcheck/redis:local} ;;
	esac
	# Compose would try to pull a missing image; say how to get it instead.
	if ! docker image inspect "$image" >/dev/null 2>&1; then
		echo "compose.sh: image $image is not in the Docker engine: run \"lockcheck images build\"" >&2
		echo "  (or build one from docker/redis.Dockerfile / docker/etcd.Dockerfile and set LOCKCHECK_REDIS_IMAGE / LOCKCHECK_ETCD_IMAGE)" >&2
		exit 1
	fi
	for node in $nodes; do
		dir=$run_dir/$node
		mkdir -p "$dir"
		case $node in
		sentinel-*)
			# A sentinel rewrites its config, so it gets its own copy; a
			# copy that is there already is what it learned last time.
			[ -e "$dir/sentinel.conf" ] || cp "$here/sentinel/$node.conf" "$dir/sentinel.conf"
			;;
		redlock-*)
			# libfaketime's relative format: seconds ahead (+) or behind (-).
			[ -e "$dir/faketime" ] || echo "+0.000" >"$dir/faketime"
			;;
		esac
		if [ "$(id -u)" -eq 0 ] && [ "$LOCKCHECK_UID" -ne 0 ]; then
			chown -R "$LOCKCHECK_UID:$LOCKCHECK_GID" "$run_dir" "$dir"
		fi
	done
}

addresses() {
	ids=$(project ps -q)
	[ -n "$ids" ] || return 0
	# shellcheck disable=SC2086
	docker inspect -f '{{slice .Name 1}} {{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}} {{.State.Status}}' $ids | sort
}

case $command in
up)
	prepare
	project up -d "$@"
	addresses
	;;
down)
	project down --remove-orphans "$@"
	for node in $nodes; do
		rm -rf "${run_dir:?}/$node"
	done
	rmdir "$run_dir" 2>/dev/null || true
	;;
*)
	project "$command" "$@"
	;;
esac
