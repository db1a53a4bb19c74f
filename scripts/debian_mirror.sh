#!/usr/bin/env bash
# debian_mirror.sh: prints the Debian mirror this machine's own apt sources use
# (the first URI that serves a Debian release's main component, from a suite
# without "-security"/"-updates"; deb822 *.sources files first, then the
# one-line lists). No mirror is written in the repository: scripts that need
# the archive ask this. $1, when set and non-empty, wins (an override such as
# SID_MIRROR). Exits 1 with a message when nothing is found.
#
#   mirror=$(bash scripts/debian_mirror.sh "${SID_MIRROR:-}")
#
# Used by scripts/sid_chroot.sh (SID_MIRROR) and scripts/install_cuda_tools.sh
# (CUDA_TOOLS_MIRROR).
set -euo pipefail

if [ -n "${1:-}" ]; then
	echo "${1%/}"
	exit 0
fi
command -v apt-config >/dev/null || { echo "debian_mirror: apt-config not found (not a Debian machine?)" >&2; exit 1; }
eval "$(apt-config shell SL Dir::Etc::sourcelist/f SP Dir::Etc::sourceparts/d)"
mirror=
for f in "$SP"/*.sources; do
	[ -r "$f" ] || continue
	mirror=$(awk 'BEGIN { RS = ""; FS = "\n" }
		{
			t = ""; u = ""; s = ""; c = ""; on = 1
			for (i = 1; i <= NF; i++) {
				line = $i
				if (line ~ /^[ \t]*#/) continue
				k = tolower(line); sub(/:.*/, "", k); v = line; sub(/^[^:]*:[ \t]*/, "", v)
				if (k == "types") t = v; else if (k == "uris") u = v
				else if (k == "suites") s = v; else if (k == "components") c = v
				else if (k == "enabled" && tolower(v) == "no") on = 0
			}
			if (!on || (" " t " ") !~ / deb / || (" " c " ") !~ / main /) next
			n = split(s, ss, /[ \t]+/)
			for (j = 1; j <= n; j++) if (ss[j] != "" && ss[j] !~ /[-\/]/) { split(u, uu, /[ \t]+/); print uu[1]; exit }
		}' "$f")
	[ -n "$mirror" ] && break
done
if [ -z "$mirror" ]; then
	for f in "$SL" "$SP"/*.list; do
		[ -r "$f" ] || continue
		# deb [options] URI suite component...
		mirror=$(sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" && $3 !~ /[-\/]/ { for (i = 4; i <= NF; i++) if ($i == "main") { print $2; exit } }')
		[ -n "$mirror" ] && break
	done
fi
[ -n "$mirror" ] || { echo "debian_mirror: no Debian mirror found in this machine's apt sources ($SL, $SP)" >&2; exit 1; }
echo "${mirror%/}"
