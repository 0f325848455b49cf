# A real etcd release for lockcheck's docker runtime, on a machine that can
# pull from a registry: the official image, pinned, with etcd as its
# entrypoint. (Without a registry, `lockcheck images build` makes
# lockcheck/etcd:local, where lockcheck's own embedded etcd member, the same
# server version as in go.mod, answers to the name etcd.)
#
#   docker build -f docker/etcd.Dockerfile -t lockcheck/etcd:v3.6.16 docker/
#   docker build -f docker/etcd.Dockerfile --build-arg ETCD_REPO=quay.io/coreos/etcd -t lockcheck/etcd:v3.6.16 docker/
#   lockcheck run --runtime docker --backend etcd --etcd-image lockcheck/etcd:v3.6.16
#
# Pin a digest with --build-arg ETCD_VERSION=v3.6.16@sha256:...
#
# lockcheck needs nothing added: it replaces the entrypoint with "etcd",
# which the official image (distroless, no shell) has at /usr/local/bin/etcd
# on its PATH, passes etcd's own flags (--name, --data-dir,
# --listen-client-urls, --initial-cluster, --heartbeat-interval,
# --log-outputs FILE, ...), and runs it as your uid:gid in a node directory
# mounted from the host, so the image's /var/lib/etcd is never used.
# `docker pull gcr.io/etcd-development/etcd:v3.6.16` and passing that to
# --etcd-image works as well; this file only fixes the version and makes
# `docker run IMAGE --name ...` work like lockcheck's own image, whose
# entrypoint is etcd (the official one has it as CMD).
ARG ETCD_REPO=gcr.io/etcd-development/etcd
ARG ETCD_VERSION=v3.6.16
FROM ${ETCD_REPO}:${ETCD_VERSION}

ENTRYPOINT ["/usr/local/bin/etcd"]
CMD []

LABEL org.opencontainers.image.description="Official etcd release image, for lockcheck --runtime docker"
