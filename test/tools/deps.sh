#!/bin/sh
# Install the Debian packages named as arguments, once: packages already installed are skipped,
# and apt is not touched at all when nothing is missing.
set -eu
missing=
for p in "$@"; do
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	case "$st" in *"install ok installed"*) ;; *) missing="$missing $p" ;; esac
done
if [ -z "$missing" ]; then
	echo "deps: all $# packages present"
	exit 0
fi
echo "deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt="apt-get -o DPkg::Lock::Timeout=600 -q"
if [ "$(id -u)" != 0 ]; then apt="sudo $apt"; fi
$apt update
# shellcheck disable=SC2086
$apt install -y --no-install-recommends $missing
