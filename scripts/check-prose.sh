#!/usr/bin/env bash
# The repository speaks of the product, not of how or when it was built: the
# README, the book (docs/), code comments, test names and Cargo.toml files
# carry no narration of the work (its dates, its rounds, the tracker's
# numbers); the patterns below say what counts. Prints each offending line;
# exits 1 if any.
set -euo pipefail
cd "$(dirname "$0")/.."

ordinal='(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth|twenty-\w+|thirtieth|\d+(st|nd|rd|th))'
# One alternation for prose; words are matched case-insensitively.
prose="\\b$ordinal( work)? sessions?\\b"
prose+="|\\b(this|that|next|previous|earlier|later|same|a later|an earlier) (work )?sessions?\\b"
prose+="|\\bsessions? of 20\\d\\d"
prose+="|\\b20\\d\\d-[01]\\d-[0-3]\\d\\b(?!T\\d)"  # a date, not an ISO timestamp
prose+="|\\bstop \\d+\\b"
prose+="|\\bbrief\\b"
prose+="|\\b(issues?|PR) #?\\d+\\b|\\(#\\d+\\b"  # a tracker number, written out or in brackets
# Test names: the same words joined by underscores.
names="fn \\w*(${ordinal//-/_}_session|this_session|stop_\\d+|brief|issue_?\\d+)\\w*"

status=0
report() { # label, grep output
  [ -z "$2" ] && return
  echo "$1:" >&2
  echo "$2" >&2
  status=1
}

files() { git ls-files -- "$@" 2>/dev/null || true; }

# Prose: every line of the README, the book and the Cargo manifests.
mapfile -t docs < <(files README.md 'docs/*.md' Cargo.toml '*/Cargo.toml' '*/*/Cargo.toml' '*/*/*/Cargo.toml')
# Files present but not yet added count too.
for f in README.md docs/*.md; do [ -f "$f" ] && docs+=("$f"); done
mapfile -t docs < <(printf '%s\n' "${docs[@]}" | sort -u)
report "narration in prose" "$(grep -inP -- "$prose" "${docs[@]}" || true)"

# Code: the comments only (string literals may hold dates, as test data).
mapfile -t code < <(files 'host/*' 'crates/*' 'components/*' 'tests/*' 'bench/*' Makefile 'scripts/*' '.cargo/*' \
  | grep -E '\.(rs|sh|py|lua|toml|mjs|js|ts|yml|yaml)$|Makefile$' | grep -v 'scripts/check-prose.sh' | grep -v node_modules)
comment='(//|^\s*#|\s#\s|^\s*--|\s--\s|^\s*\*|/\*)'
report "narration in comments" "$(grep -inP -- "$comment.*($prose)" "${code[@]}" || true)"
# A function is a test when a test attribute comes within the three lines before it.
tests=$(for f in "${code[@]}"; do
  case $f in *.rs) awk -v f="$f" '/#\[(tokio::)?test|#\[test\]|proptest!/ {t = NR} /^\s*(pub )?(async )?fn / && t && NR - t <= 3 {print f ":" NR ":" $0}' "$f" ;; esac
done)
report "narration in test names" "$(grep -iP -- "$names" <<<"$tests" || true)"
exit $status
