#!/bin/sh
# Offline recipe for the agentflow sandbox base image: a minimal Debian root filesystem built with
# debootstrap from the host's configured apt mirror, then turned into an image with `docker import`.
# Usage: rootfs.sh TARGET_DIR MIRROR_URL [SUITE]     (run as root; agentflow calls it from `sandbox build`)
set -eu
target="$1"
mirror="$2"
suite="${3:-bookworm}"
packages="python3,python3-pytest,python3-pip,git,patch,ripgrep,procps,ca-certificates"

debootstrap --variant=minbase --include="$packages" "$suite" "$target" "$mirror"

# A non-root user for everything that runs in the sandbox.
chroot "$target" groupadd --gid 1000 agent
chroot "$target" useradd --uid 1000 --gid 1000 --create-home --shell /bin/bash agent
# Mount points for the writable workspace and the agent's private state (root itself is read-only).
mkdir -p "$target/workspace" "$target/run/agentflow" "$target/var/lib/agentflow/store"
chown 1000:1000 "$target/workspace" "$target/run/agentflow" "$target/var/lib/agentflow/store"
# Git refuses repositories owned by someone else unless told otherwise; the workspace is ours.
printf '[safe]\n\tdirectory = *\n[user]\n\tname = agentflow\n\temail = agentflow@localhost\n' > "$target/etc/gitconfig"
# Keep the image small: no apt lists, caches, docs or man pages.
rm -rf "$target/var/lib/apt/lists"/* "$target/var/cache/apt"/*.bin "$target/var/cache/apt/archives"/*.deb \
       "$target/usr/share/doc"/* "$target/usr/share/man"/* "$target/usr/share/info"/*
