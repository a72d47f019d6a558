#!/bin/sh
# The image's entrypoint: the secrets mounted in /run/secrets (compose's secrets, a Kubernetes
# Secret volume) copied into /run/a2a as files of this user, mode 0600, then the command run.
#
# Why a copy: the agents take a secret file only when it is their own user's and nobody
# else's to read, and open a key file only when it is no symlink, keeping their pins beside
# it. Mounted secrets are none of these: compose bind-mounts the host's file (the host
# user's), Kubernetes links root's files (group-readable under fsGroup) into a read-only
# directory.
set -eu
from="${A2A_SECRETS_FROM:-/run/secrets}"
to="${A2A_SECRETS_TO:-/run/a2a}"
if [ -d "$from" ]; then
    umask 077
    mkdir -p "$to"
    for file in "$from"/*; do
        if [ -f "$file" ]; then
            install -m 0600 "$file" "$to/"
        fi
    done
fi
exec "$@"
