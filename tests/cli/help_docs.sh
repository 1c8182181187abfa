#!/usr/bin/env bash
# docs/commands.md is the one place the dsv4 command's flags are documented: this test keeps it
# equal to the binary. For every command `dsv4 --help` lists, the long flags of
# `dsv4 <cmd> --help` (the option column; --help itself aside) must be the flags of the table
# rows (lines starting "| `--flag") of the section "## <cmd>" in commands.md, and the other way
# round. Fails naming the command and each flag missing on either side.
# Usage: help_docs.sh /path/to/dsv4 /path/to/docs/commands.md
set -uo pipefail
export LC_ALL=C  # one collation for sort and comm
dsv4=$1
doc=$2
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

[ -f "$doc" ] || { echo "FAIL: no such file: $doc"; exit 1; }
top=$("$dsv4" --help 2>&1) || { echo "FAIL: dsv4 --help exited $?"; echo "$top"; exit 1; }

# Subcommands: the first word of each line after "Subcommands:" up to the next blank line.
commands=$(awk '/^Subcommands:/ { on = 1; next } on && /^[[:space:]]*$/ { on = 0 }
                on && NF { print $1 }' <<<"$top")
[ -n "$commands" ] || { echo "FAIL: no subcommands in dsv4 --help:"; echo "$top"; exit 1; }

# The long flags of one help text: the first field of option lines ("  -h,--help ...",
# "  --model TEXT ..."); descriptions naming other flags are not read.
help_flags() {
  awk '$1 ~ /^-/ { print $1 }' | grep -oE -- '--[A-Za-z0-9][A-Za-z0-9-]*' | grep -vx -- '--help' | sort -u
}
# The flags documented under "## <cmd>": the first cell of its table rows.
doc_flags() {
  awk -v h="## $1" '$0 == h { on = 1; next } /^## / { on = 0 } on' "$doc" |
    grep -oE -- '^\|[[:space:]]*`--[A-Za-z0-9][A-Za-z0-9-]*' | grep -oE -- '--[A-Za-z0-9-]+' | sort -u
}

checked=0
for cmd in $commands; do
  if ! grep -qx -- "## $cmd" "$doc"; then
    fail "$cmd: no section '## $cmd' in $doc"
    continue
  fi
  help=$("$dsv4" "$cmd" --help 2>&1) || { fail "$cmd: dsv4 $cmd --help exited $?"; continue; }
  in_help=$(help_flags <<<"$help")
  in_doc=$(doc_flags "$cmd")
  [ -n "$in_help" ] || fail "$cmd: no flags read from dsv4 $cmd --help"
  for f in $(comm -23 <(echo "$in_help") <(echo "$in_doc")); do
    fail "$cmd: $f is in 'dsv4 $cmd --help' but not documented in $doc"
  done
  for f in $(comm -13 <(echo "$in_help") <(echo "$in_doc")); do
    fail "$cmd: $f is documented in $doc but not in 'dsv4 $cmd --help'"
  done
  checked=$((checked + 1))
done

if [ "$fails" -ne 0 ]; then
  echo "help_docs: $fails failure(s)"
  exit 1
fi
echo "help_docs: the flags of $checked commands match $doc"
