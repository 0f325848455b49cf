# The official Redis image plus libfaketime, for lockcheck's docker runtime
# on a machine that can pull from a registry. (Without one, `lockcheck images
# build` makes lockcheck/redis:local from the redis-server installed here.)
#
#   docker build -f docker/redis.Dockerfile -t lockcheck/redis:7.2 docker/
#   docker build -f docker/redis.Dockerfile --build-arg REDIS_VERSION=7.4 -t lockcheck/redis:7.4 docker/
#   lockcheck run --runtime docker --backend redlock --redis-image lockcheck/redis:7.2
#
# REDIS_REPO may name a mirror of the official image. REDIS_VERSION must be
# a Debian (bookworm) tag of it, not an -alpine one: lockcheck preloads
# Debian's libfaketime and glibc's debug malloc at the paths checked below.
#
# lockcheck runs every node with the entrypoint replaced by redis-server
# (/usr/local/bin, on PATH; redis-sentinel is a link to it and lockcheck
# passes --sentinel anyway), as your own uid:gid, in its node directory
# mounted from the host. So the image's docker-entrypoint.sh, which would
# chown /data and drop to the redis user, never runs, and nothing in the
# image needs to be writable. The entrypoint is left as it is so that
# `docker run` of this image still behaves like the official one.
ARG REDIS_REPO=redis
ARG REDIS_VERSION=7.2
FROM ${REDIS_REPO}:${REDIS_VERSION}

# libfaketime moves one node's wall clock for clock faults (the Redlock
# clock-jump scenarios): lockcheck starts such a node with
#   LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0:/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
# and refuses an image that lacks either file. libc_malloc_debug.so.0 comes
# with libc6 on bookworm (/lib is /usr/lib there); preloading it first keeps
# the jemalloc-linked redis-server from hanging under libfaketime. The paths
# are amd64's, as lockcheck expects them.
RUN set -eux; \
	apt-get update; \
	apt-get install -y --no-install-recommends libfaketime; \
	rm -rf /var/lib/apt/lists/*; \
	test -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1; \
	test -e /usr/lib/x86_64-linux-gnu/libc_malloc_debug.so.0; \
	redis-server --version

LABEL org.opencontainers.image.description="Official Redis image with libfaketime, for lockcheck --runtime docker"
