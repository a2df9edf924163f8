#!/bin/sh
# tests/test_install.sh BUILD_DIR CONSUMER_DIR [CFLAGS]: `cmake --install` into a temporary
# prefix, then build a downstream project with find_package(lowp) and with pkg-config, and
# run it. CFLAGS (e.g. the sanitizer flags of a sanitized lowp) go to the consumer's build.
# Then the installed `lowp conform` must find its ml_dtypes helper and liblowp.so under the
# prefix (a stand-in interpreter records the paths it is given), not in the build tree.
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
# conform's helpers, relative to the installed executable
cat > "$tmp/py" <<EOF
#!/bin/sh
printf '%s\n' "\$@" > "$tmp/py.args"
echo "interop_mldtypes: 1 passed, 0 failed"
EOF
chmod +x "$tmp/py"
LOWP_PYTHON="$tmp/py" "$tmp/prefix/bin/lowp" conform --only ml_dtypes --no-report > "$tmp/conform.out" 2>&1 ||
  { echo "FAIL: installed lowp conform: $(tail -n 3 "$tmp/conform.out")"; exit 1; }
script=$(sed -n 1p "$tmp/py.args")
lib=$(sed -n '/^--lib$/{n;p;}' "$tmp/py.args")
case $script in "$tmp/prefix/bin/"*share/lowp/interop_mldtypes.py) ;;
  *) echo "FAIL: installed conform runs '$script', not the installed script"; exit 1 ;; esac
case $lib in "$tmp/prefix/bin/"*/liblowp.so) ;;
  *) echo "FAIL: installed conform loads '$lib', not the installed library"; exit 1 ;; esac
test -f "$script" && test -f "$lib"
echo "install: 4 passed, 0 failed"
