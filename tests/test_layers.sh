#!/bin/sh
# tests/test_layers.sh CC LAYERS_FILE REF_DIR: the layer boundaries of ref/ hold.
#
# LAYERS_FILE (written by ref/CMakeLists.txt) gives each layer and the include directories
# its sources compile with: its own and those of the layers below it. Every public header
# of every layer is compiled (-fsyntax-only) in a file that includes it, once per layer's
# include path. A header of the layer itself or of a layer below must compile; one of a
# layer above must fail with "No such file" for that header: an upward include cannot
# compile. And a private header (REF_DIR/<layer>/src/*.h, <layer>/internal/*.h) is on no
# layer's public include path (block/internal is added to the block layer's own sources
# and to the tests that declare it, not to what other layers see).
# "Below" is this file's statement of the architecture, not read from the build, so a
# build that widens a layer's include path fails here:
allowed() {
  case $1 in
    common) echo "common" ;;
    codec) echo "codec common" ;;
    block) echo "block codec common" ;;
    hw) echo "hw common" ;;
    io) echo "io common" ;;
    kvcache) echo "kvcache block codec common" ;;
    attn) echo "attn kvcache block codec hw common" ;;
    select) echo "select attn kvcache block codec hw common" ;;
    model) echo "model study oracle select attn kvcache block codec hw io common" ;;
    oracle) echo "oracle attn kvcache block codec hw common" ;;
    certify) echo "certify oracle attn kvcache block codec hw common" ;;
    study) echo "study oracle select attn kvcache block codec hw io common" ;;
    *) echo "" ;;
  esac
}
set -u
CC=$1 LAYERS=$2 REF=$3
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
check() { # layer expect(ok|missing) include-line incflags...
  layer=$1 expect=$2 inc=$3; shift 3
  printf '%s\nint lowp_layers_probe;\n' "$inc" >"$tmp/p.c"
  if "$CC" -std=c11 -fsyntax-only "$@" "$tmp/p.c" 2>"$tmp/err"; then got=ok
  elif grep -q "No such file" "$tmp/err"; then got=missing
  else got=error; fi
  if [ "$got" = "$expect" ]; then pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL layer $layer: $inc: expected $expect, got $got"
    sed 's/^/  | /' "$tmp/err" | head -5
  fi
}
grep -v '^#' "$LAYERS" >"$tmp/layers"
[ -s "$tmp/layers" ] || { echo "test_layers: no layers in $LAYERS"; exit 1; }
while read -r layer dirs; do
  [ -n "$(allowed "$layer")" ] || { echo "FAIL: layer $layer is not in the architecture"; fail=$((fail + 1)); continue; }
  flags=""
  for d in $dirs; do flags="$flags -I$d"; done
  for hdir in "$REF"/*/include/lowp; do
    owner=$(basename "$(dirname "$(dirname "$hdir")")")
    case " $(allowed "$layer") " in
      *" $owner "*) expect=ok ;;
      *) expect=missing ;;
    esac
    for h in "$hdir"/*.h; do
      # shellcheck disable=SC2086
      check "$layer" "$expect" "#include \"lowp/$(basename "$h")\"" $flags
    done
  done
  for h in "$REF"/*/src/*.h "$REF"/*/internal/*.h; do
    # shellcheck disable=SC2086
    check "$layer" missing "#include \"$(basename "$h")\"" $flags
  done
done <"$tmp/layers"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ] && [ "$pass" -gt 0 ]
