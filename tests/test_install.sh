#!/bin/sh
# tests/test_install.sh BUILD_DIR CONSUMER_DIR [CFLAGS]: `cmake --install` into a temporary
# prefix, then build a downstream project with find_package(lowp) and with pkg-config, and
# run it. CFLAGS (e.g. the sanitizer flags of a sanitized lowp) go to the consumer's build.
set -eu
build=$1
consumer=$2
flags=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
test -f "$tmp/prefix/include/lowp/format.h"
cmake -S "$consumer" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="$flags" > "$tmp/cfg.log"
cmake --build "$tmp/build" > "$tmp/build.log"
LD_LIBRARY_PATH="$tmp/prefix/lib:${LD_LIBRARY_PATH:-}" "$tmp/build/consumer"
"$tmp/build/consumer_static"
pcdir=$(dirname "$(find "$tmp/prefix" -name lowp.pc | head -1)")
pcflags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs lowp)
# shellcheck disable=SC2086
cc $flags -o "$tmp/pc_consumer" "$consumer/main.c" $pcflags
LD_LIBRARY_PATH="$tmp/prefix/lib:${LD_LIBRARY_PATH:-}" "$tmp/pc_consumer"
echo "install: 3 passed, 0 failed"
