#!/usr/bin/env bash
# The Debian packages the tests need beyond Python, Java and Maven: an MIT
# Kerberos KDC and its tools for the secure-cluster tests, iproute2 (`ip netns`)
# for the multi-host cluster, chromium (headless) for the tracking page's test
# (tests/integration/test_tracking_page.py), Debian's Docker engine and
# debootstrap for the image tests (tests/integration/docker: the base image is
# made from Debian packages, no image registry needed). Installs only what
# is missing (apt-get; as root, or through sudo). Part of the README's test
# command and of .ci/run.
set -euo pipefail
packages=(krb5-kdc krb5-admin-server krb5-user iproute2 chromium docker.io debootstrap)
need=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
[ ${#need[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null; then
  echo "tests/system-packages.sh: no apt-get here; install ${need[*]} (MIT Kerberos KDC, kadmin.local, kinit; chromium; docker.io, debootstrap) yourself" >&2
  exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing Debian packages for the tests: ${need[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
