#!/bin/sh
# The stand-in's entry point, doing what the official image's does: the command given runs
# (under node when its first word is an option or not a command), exec'd, so that it receives
# the container's signals itself.
set -e
case "$1" in -*) set -- node "$@" ;; esac
command -v "$1" >/dev/null 2>&1 || set -- node "$@"
exec "$@"
