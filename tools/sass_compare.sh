#!/usr/bin/env bash
# tools/sass_compare.sh BEFORE_BUILD AFTER_BUILD: is the machine code of every GPU kernel
# unchanged? Dumps `cuobjdump -sass` of every CUDA object under BEFORE_BUILD/gpu and
# AFTER_BUILD/gpu, pairs them by their path below the build folder (CMakeFiles/TARGET.dir/
# SOURCE.o: two targets may compile sources of the same name), and compares them after removing what depends
# only on where the source file lives: the "identifier = <path>" lines and the hash that
# nvcc puts into anonymous-namespace names (_GLOBAL__N__<hash>_...). Every instruction,
# register and constant is compared. Prints one line per object; exit 0 when all are
# identical, 1 when one differs, 2 on bad use.
set -euo pipefail
[ $# = 2 ] || { echo "usage: tools/sass_compare.sh BEFORE_BUILD AFTER_BUILD" >&2; exit 2; }
CUOBJDUMP=${CUOBJDUMP:-$(command -v cuobjdump || find -L "$(dirname "$0")/../.venv" -name cuobjdump -type f 2>/dev/null | head -1 || true)}
[ -x "$CUOBJDUMP" ] || { echo "sass_compare: no cuobjdump (tools/setup.sh installs one into .venv)" >&2; exit 2; }
PATH=$(dirname "$CUOBJDUMP"):$PATH # its nvdisasm
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
dump() { # object -> normalised SASS on stdout
  "$CUOBJDUMP" -sass "$1" | grep -v 'identifier = ' |
    sed -E 's#/\*[0-9a-f]{4,}\*/##g; s/_GLOBAL__N__[0-9a-f]+_[0-9]+_[A-Za-z0-9_]+_cu_[0-9a-f]+/_ANON_/g'
}
status=0 n=0
while IFS= read -r before; do
  name=${before#"$1"/}
  after=$2/$name
  if [ ! -f "$after" ]; then echo "$name: not in $2"; status=1; continue; fi
  dump "$before" >"$tmp/a"; dump "$after" >"$tmp/b"
  n=$((n + 1))
  if cmp -s "$tmp/a" "$tmp/b"; then
    echo "$name: identical ($(grep -c 'Function : ' "$tmp/a") functions, $(wc -l <"$tmp/a") lines)"
  else
    # the first lines of the difference (diff's whole output is read, so that pipefail never
    # stops the script at this object and the remaining ones are still compared)
    echo "$name: DIFFERS"; { diff "$tmp/a" "$tmp/b" || true; } | sed -n 1,10p; status=1
  fi
done < <(find -L "$1/gpu" -name '*.cu.o' -path '*CMakeFiles*' | sort)
[ "$n" -gt 0 ] || { echo "sass_compare: no CUDA objects under $1/gpu" >&2; exit 2; }
exit $status
