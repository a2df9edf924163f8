#!/bin/sh
# tests/test_install.sh BUILD_DIR CONSUMER_DIR: `cmake --install` into a temporary prefix,
# then build a downstream project with find_package(lowp) and with pkg-config, and run it.
set -eu
build=$1
consumer=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
test -f "$tmp/prefix/include/lowp/format.h"
cmake -S "$consumer" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" > "$tmp/cfg.log"
cmake --build "$tmp/build" > "$tmp/build.log"
LD_LIBRARY_PATH="$tmp/prefix/lib:${LD_LIBRARY_PATH:-}" "$tmp/build/consumer"
"$tmp/build/consumer_static"
pcdir=$(dirname "$(find "$tmp/prefix" -name lowp.pc | head -1)")
flags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs lowp)
# shellcheck disable=SC2086
cc -o "$tmp/pc_consumer" "$consumer/main.c" $flags
LD_LIBRARY_PATH="$tmp/prefix/lib:${LD_LIBRARY_PATH:-}" "$tmp/pc_consumer"
echo "install: 3 passed, 0 failed"
