#!/usr/bin/env bash
# Prints the Debian mirror that debootstrap and the boot test use: $DEBIAN_MIRROR when set, else the
# first mirror of the Debian archive (not its security archive) in this machine's apt sources, so an
# internal mirror configured for apt is used without naming it here.
#   scripts/debian-mirror.sh [SUITE]   (default bookworm) — exit 1 when none is found
set -euo pipefail
suite=${1:-bookworm}
if [ -n "${DEBIAN_MIRROR:-}" ]; then
  echo "${DEBIAN_MIRROR%/}"
  exit 0
fi
# deb822 .sources files (URIs: / Suites: stanzas), then one-line `deb URI SUITE ...` entries.
found=$(
  {
    for f in /etc/apt/sources.list.d/*.sources; do
      [ -f "$f" ] || continue
      awk -v suite="$suite" '
        /^[[:space:]]*$/ { if (uri != "" && types ~ /(^|[[:space:]])deb([[:space:]]|$)/ && suites ~ "(^|[[:space:]])" suite "([[:space:]]|$)") print uri; uri = ""; suites = ""; types = ""; next }
        /^URIs:/ { uri = $2 }
        /^Suites:/ { $1 = ""; suites = $0 }
        /^Types:/ { $1 = ""; types = $0 }
        END { if (uri != "" && types ~ /(^|[[:space:]])deb([[:space:]]|$)/ && suites ~ "(^|[[:space:]])" suite "([[:space:]]|$)") print uri }
      ' "$f"
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
      [ -f "$f" ] || continue
      awk -v suite="$suite" '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ } if ($(i + 1) == suite) print $i }' "$f"
    done
  } | head -n 1
)
if [ -z "$found" ]; then
  echo "debian-mirror: no apt source for Debian $suite on this machine; set DEBIAN_MIRROR" >&2
  exit 1
fi
echo "${found%/}"
