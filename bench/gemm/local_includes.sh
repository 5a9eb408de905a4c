#!/bin/bash
# Prints a source file and every file it reaches through #include "..." (quoted includes only:
# the project's own headers), each once. Used to key rebuilds on content.
declare -A seen
walk() {
  local f; f=$(realpath -m "$1")
  [[ -f $f && -z ${seen[$f]:-} ]] || return 0
  seen[$f]=1; echo "$f"
  local dir; dir=$(dirname "$f")
  for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
    walk "$dir/$inc"
  done
}
walk "$1"
