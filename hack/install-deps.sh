#!/usr/bin/env bash
# Installs the system tools the tests and the sandbox need when they are
# missing, from Debian's packages: nftables (nft) and iproute2 (ip); and for
# the real cluster's nodes containerd (containerd, ctr), runc and the CNI
# plugins (containernetworking-plugins, in /usr/lib/cni); and for the BGP
# tests a real router, FRR (zebra, bgpd and vtysh; test/framework/frr runs them
# in a lab host with a directory of their own); and for the image of
# Kubernetes' e2e suite (agnhost, with the tools its specs run inside it, as
# the upstream image has them) curl, wget, netcat-openbsd, bind9-dnsutils
# and socat; and for the Redfish BMC emulator (third_party/sushy-tools,
# run by test/framework/redfish with Debian's /usr/bin/python3) its Python
# libraries: python3-flask, python3-requests, python3-tenacity,
# python3-bcrypt and python3-webob.
#
# Debian's containerd and frr packages enable and start their services in
# the root namespace; the test bed runs a containerd of its own in each node's
# namespaces only. A policy-rc.d that denies every start keeps the package
# from starting one (while apt runs; the file is removed afterwards, and
# one that was there already is left as it was).
set -euo pipefail
need=()
command -v nft >/dev/null || need+=(nftables)
command -v ip >/dev/null || need+=(iproute2)
command -v containerd >/dev/null && command -v ctr >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ] || need+=(containernetworking-plugins)
[ -x /usr/lib/frr/zebra ] && [ -x /usr/lib/frr/bgpd ] && command -v vtysh >/dev/null || need+=(frr)
command -v curl >/dev/null || need+=(curl)
command -v wget >/dev/null || need+=(wget)
command -v nc.openbsd >/dev/null || need+=(netcat-openbsd)
command -v dig >/dev/null && command -v nslookup >/dev/null || need+=(bind9-dnsutils)
command -v socat >/dev/null || need+=(socat)
for m in flask:python3-flask requests:python3-requests tenacity:python3-tenacity bcrypt:python3-bcrypt webob:python3-webob; do
  /usr/bin/python3 -c "import ${m%%:*}" 2>/dev/null || need+=("${m#*:}")
done
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "missing ${need[*]}: install them (apt-get install ${need[*]}) or run as root" >&2
  exit 1
fi
echo "installing ${need[*]}" >&2
policy=/usr/sbin/policy-rc.d ours=
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# hack/install-deps.sh: no service starts while it installs packages\nexit 101\n' >"$policy"
  chmod +x "$policy"
  ours=1
fi
export DEBIAN_FRONTEND=noninteractive
rc=0
{ apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; } || rc=$?
[ -n "$ours" ] && rm -f "$policy"
exit $rc
