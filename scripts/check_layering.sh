#!/usr/bin/env bash
# Checks that every source file includes Ember headers only from its own
# folder or from folders below it (ARCHITECTURE.md "Layers"), and that ops/,
# embedding/ and io/ do not include each other. Prints each violation as
# file:line and exits 1 if there is any.
set -euo pipefail
cd "$(dirname "$0")/.."

rank() {
  case "$1" in
    core) echo 0 ;;
    io | embedding | ops) echo 1 ;;
    scheduler) echo 2 ;;
    pipeline) echo 3 ;;
    engine) echo 4 ;;
    tools) echo 5 ;;
    *) echo -1 ;;
  esac
}

violations=0
for folder in core io embedding ops scheduler pipeline engine tools; do
  own=$(rank "$folder")
  while IFS= read -r match; do
    file=${match%%:*}
    rest=${match#*:}
    line=${rest%%:*}
    included=$(sed -E 's/.*#include "([a-z_]+)\/.*/\1/' <<<"$rest")
    other=$(rank "$included")
    [[ "$other" -lt 0 || "$included" == "$folder" ]] && continue
    if [[ "$other" -ge "$own" ]]; then
      echo "$file:$line: $folder/ must not include $included/ (same layer or above)"
      violations=$((violations + 1))
    fi
  done < <(grep -rnE '^#include "[a-z_]+/' "$folder" --include='*.h' --include='*.cc' \
             --include='*.cu' --include='*.cuh' || true)
done
if [[ $violations -gt 0 ]]; then
  echo "check_layering: $violations violation(s)"
  exit 1
fi
echo "check_layering: every include points to the same folder or below"
