#!/usr/bin/env bash
# The tpmsec-server package, checked in seconds without compiling anything
# (scripts/build-deb builds all packages in minutes; scripts/check-package-
# lifecycle installs, removes and purges them in a debootstrap root):
# tpmsec-server is architecture all, and what it holds besides debian/ and
# packaging/ is what CMakeLists.txt installs for it (the two units, the
# service's @TPMSEC_BINDIR@ made /usr/bin, and the D-Bus files). This
# assembles it with debhelper as debian/rules does (the rules' own
# dh_installsystemd line for it), builds the .deb, and checks:
#   - control: Depends on libtss2-tcti-tabrmd0 (without it no client reaches
#     the server), Provides/Conflicts/Replaces tpm2-abrmd;
#   - the maintainer scripts: present, `sh -n' clean; the postinst enables
#     and starts (restarts after an upgrade), the prerm stops at removal, the
#     postrm's purge disables, removes /var/lib/tpmsec-serve and calls the
#     server's --forget-state only when the installed tpmsec has it;
#   - conffiles: /etc/default/tpmsec-serve and /etc/profile.d/tpmsec-server.sh;
#   - the environment: the generator names tabrmd: (with its colon) for
#     SYSTEMD_TPM2_DEVICE and TPM2TOOLS_TCTI and serve for TPMSEC_TPM,
#     nothing in an initrd or where a value is set; environment.d and
#     profile.d the same; the units that run before D-Bus keep /dev/tpmrm0;
#   - lintian: no error, no warning.
# Usage: deb_server_package_test.sh SOURCE_DIR
set -euo pipefail
src=$(cd "${1:?usage: deb_server_package_test.sh SOURCE_DIR}" && pwd)
fail() { echo "deb_server_package: $*" >&2; exit 1; }
work=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT

# A copy of what the package is made of.
mkdir -p "$work/tree"
(cd "$src" && cp -r --parents debian packaging LICENSE NOTICE "$work/tree/")
cd "$work/tree"
run() { "$@" >>"$work/dh.log" 2>&1 || { cat "$work/dh.log" >&2; fail "$* failed"; }; }
p=-ptpmsec-server
run dh_prep $p  # (it also empties debian/tmp)
# What CMakeLists.txt installs for the package (install(CODE configure_file
# ...) of the service, install(FILES ...) of the rest), into debian/tmp.
mkdir -p debian/tmp/lib/systemd/system debian/tmp/usr/share/dbus-1/system.d debian/tmp/usr/share/dbus-1/system-services
sed 's#@TPMSEC_BINDIR@#/usr/bin#g' packaging/systemd/tpmsec.service.in >debian/tmp/lib/systemd/system/tpmsec.service
cp packaging/systemd/tpmsec.socket debian/tmp/lib/systemd/system/
cp packaging/dbus/tpmsec.conf debian/tmp/usr/share/dbus-1/system.d/
cp packaging/dbus/com.intel.tss2.Tabrmd.service debian/tmp/usr/share/dbus-1/system-services/

# debhelper, for this package only; dh_installsystemd as debian/rules calls it.
systemd_line=$(make -s -n -f debian/rules override_dh_installsystemd | grep -- "-ptpmsec-server") \
  || fail "debian/rules: no dh_installsystemd line for tpmsec-server"
run dh_install $p
run dh_installdocs $p
run dh_installchangelogs $p
# shellcheck disable=SC2086
run $systemd_line
for c in dh_compress dh_installdeb dh_fixperms dh_gencontrol dh_md5sums; do run $c $p; done
run dh_builddeb $p --destdir="$work"
deb=$(ls "$work"/tpmsec-server_*_all.deb)
echo "deb_server_package: built $(basename "$deb") (debian/rules' systemd options: ${systemd_line#*dh_installsystemd })"

# Control fields.
field() { dpkg-deb -f "$deb" "$1"; }
field Depends | tr ',' '\n' | grep -qx ' *libtss2-tcti-tabrmd0' || fail "Depends lacks libtss2-tcti-tabrmd0: $(field Depends)"
for f in Provides Conflicts Replaces; do
  [ "$(field $f)" = tpm2-abrmd ] || fail "$f is '$(field $f)', not tpm2-abrmd"
done

# The maintainer scripts.
mkdir -p "$work/ctl" && dpkg-deb -e "$deb" "$work/ctl"
for s in postinst prerm postrm; do
  [ -x "$work/ctl/$s" ] || fail "no $s"
  sh -n "$work/ctl/$s" || fail "$s: not valid sh"
done
has() { grep -qE -- "$2" "$work/ctl/$1" || fail "$1 does not $3"; }
has postinst 'deb-systemd-helper enable .?tpmsec.service' "enable tpmsec.service"
has postinst 'deb-systemd-helper enable .?tpmsec.socket' "enable tpmsec.socket"
has postinst '_dh_action=start' "start the units at install"
has postinst '_dh_action=restart' "restart the units after an upgrade"
has postinst 'deb-systemd-invoke \$_dh_action .?tpmsec.(service|socket).? .?tpmsec.(service|socket)' "act on both units"
has prerm '\[ "\$1" = remove \].*' "act at removal"
has prerm 'deb-systemd-invoke stop .?tpmsec.(service|socket).? .?tpmsec.(service|socket)' "stop both units"
has postrm 'deb-systemd-helper purge .?tpmsec.(service|socket).? .?tpmsec.(service|socket)' "disable both units at purge"
has postrm 'rm -rf "\$state"' "remove the state directory"
has postrm '^state=/var/lib/tpmsec-serve$' "name /var/lib/tpmsec-serve"
has postrm "grep -q -- '--forget-state'" "ask tpmsec whether it has --forget-state"
# The purge, run: the state goes, and a tpmsec without --forget-state is not
# asked to forget (a stand-in tpmsec on PATH records whether it was run).
mkdir -p "$work/purge/bin" "$work/purge/var/lib/tpmsec-serve"
sed -e "s#/var/lib/tpmsec-serve#$work/purge/var/lib/tpmsec-serve#" \
  -e 's/^\(\s*\)\(deb-systemd-\|systemctl\)/\1: \2/' "$work/ctl/postrm" >"$work/purge/postrm"
for has_hook in 0 1; do
  mkdir -p "$work/purge/var/lib/tpmsec-serve" && : >"$work/purge/var/lib/tpmsec-serve/kept"
  cat >"$work/purge/bin/tpmsec" <<EOF
#!/bin/sh
case "\$*" in
  "serve --help") [ $has_hook = 1 ] && echo "  --forget-state  Evict the salt key serve made"; exit 0 ;;
  "serve --forget-state") echo "\$TPMSEC_STATE_DIR \$TPMSEC_TPM" >"$work/purge/forgot"; exit 0 ;;
esac
exit 2
EOF
  chmod +x "$work/purge/bin/tpmsec" && rm -f "$work/purge/forgot"
  PATH=$work/purge/bin:$PATH sh "$work/purge/postrm" purge || fail "postrm purge failed"
  [ ! -e "$work/purge/var/lib/tpmsec-serve" ] || fail "postrm purge left the state directory"
  if [ $has_hook = 1 ]; then
    [ "$(cat "$work/purge/forgot" 2>/dev/null)" = "$work/purge/var/lib/tpmsec-serve device:/dev/tpmrm0" ] \
      || fail "postrm purge did not call tpmsec serve --forget-state on the state directory through /dev/tpmrm0"
  else
    [ ! -e "$work/purge/forgot" ] || fail "postrm purge called --forget-state on a tpmsec that has none"
  fi
done

# Conffiles.
for c in /etc/default/tpmsec-serve /etc/profile.d/tpmsec-server.sh; do
  grep -qx "$c" "$work/ctl/conffiles" || fail "$c is not a conffile"
done

# The environment the package sets, and what it keeps on /dev/tpmrm0.
mkdir -p "$work/x" && dpkg-deb -x "$deb" "$work/x"
gen=$work/x/usr/lib/systemd/system-environment-generators/60-tpmsec-tpm2
[ -x "$gen" ] || fail "no executable environment generator"
unset_all=(env -u SYSTEMD_TPM2_DEVICE -u TPM2TOOLS_TCTI -u TPMSEC_TPM)
out=$("${unset_all[@]}" "$gen")
[ "$out" = "SYSTEMD_TPM2_DEVICE=tabrmd:
TPM2TOOLS_TCTI=tabrmd:
TPMSEC_TPM=serve" ] || fail "the generator prints '$out'"
out=$(SYSTEMD_TPM2_DEVICE=device:/dev/tpm1 TPM2TOOLS_TCTI=mssim TPMSEC_TPM=embedded "$gen")
[ -z "$out" ] || fail "the generator overrides a value set already: '$out'"
sed "s#/etc/initrd-release#$work/initrd-release#" "$gen" >"$work/gen-initrd" && : >"$work/initrd-release"
out=$("${unset_all[@]}" sh "$work/gen-initrd")
[ -z "$out" ] || fail "the generator names tabrmd: in an initrd: '$out'"
for v in SYSTEMD_TPM2_DEVICE:tabrmd: TPM2TOOLS_TCTI:tabrmd: TPMSEC_TPM:serve; do
  grep -qxF "${v%%:*}=\${${v%%:*}:-${v#*:}}" "$work/x/usr/lib/environment.d/60-tpmsec-server.conf" \
    || fail "environment.d does not default ${v%%:*} to ${v#*:}"
done
# A login shell: the variables once tpmsec.service is there, not before.
sh -n "$work/x/etc/profile.d/tpmsec-server.sh" || fail "profile.d script: not valid sh"
out=$("${unset_all[@]}" sh -c ". '$work/x/etc/profile.d/tpmsec-server.sh'; echo \"\${SYSTEMD_TPM2_DEVICE-unset} \${TPM2TOOLS_TCTI-unset} \${TPMSEC_TPM-unset}\"")
case $out in
  "tabrmd: tabrmd: serve") [ -e /lib/systemd/system/tpmsec.service ] || fail "profile.d names tabrmd: without tpmsec.service" ;;
  "unset unset unset") [ ! -e /lib/systemd/system/tpmsec.service ] || fail "profile.d names nothing with tpmsec.service" ;;
  *) fail "profile.d sets '$out'" ;;
esac
for u in systemd-pcrphase-initrd systemd-pcrphase-sysinit systemd-pcrphase systemd-cryptsetup@; do
  grep -qx 'Environment=SYSTEMD_TPM2_DEVICE=device:/dev/tpmrm0' "$work/x/lib/systemd/system/$u.service.d/tpmsec-server.conf" \
    || fail "$u.service is not kept on /dev/tpmrm0"
done
grep -qx 'UnsetEnvironment=TPM2TOOLS_TCTI' "$work/x/lib/systemd/system/clevis-luks-askpass.service.d/tpmsec-server.conf" \
  || fail "clevis-luks-askpass.service is not kept on /dev/tpmrm0"
# The drop-ins are valid unit syntax (systemd-analyze verify of a unit that
# has them: the pcrphase units are systemd 252's own).
if [ -e /lib/systemd/system/systemd-pcrphase.service ]; then
  mkdir -p "$work/units"
  cp -r /lib/systemd/system/systemd-pcrphase.service "$work/x/lib/systemd/system/systemd-pcrphase.service.d" "$work/units/"
  out=$(SYSTEMD_UNIT_PATH="$work/units:" systemd-analyze verify "$work/units/systemd-pcrphase.service" 2>&1) \
    || fail "systemd-analyze verify with the drop-in: $out"
fi

# Lintian: neither error nor warning.
out=$(lintian --fail-on error,warning --display-level '>=warning' "$deb" 2>&1 | grep -v 'running with root privileges') \
  || true
[ -z "$out" ] || fail "lintian: $out"
echo "deb_server_package: control, maintainer scripts (sh -n, systemd snippets, purge run twice), conffiles," \
  "environment (generator, environment.d, profile.d, drop-ins), lintian: clean"
