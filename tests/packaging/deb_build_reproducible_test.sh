#!/usr/bin/env bash
# What makes the Debian packages reproducible, checked in seconds on the
# configuration debian/rules asks for (building them twice and comparing,
# scripts/check-install --reproducible, takes minutes of CPU: a packager's
# step, not CI's):
#   - every compile command maps the build path away (dpkg-buildflags'
#     -ffile-prefix-map=<source>=., reproducible=+fixfilepath), so two build
#     paths give the same objects and debug info;
#   - no precompiled header: GCC's make the debug info of the objects that
#     use them differ between two builds (debian/rules says why).
# Usage: deb_build_reproducible_test.sh SOURCE_DIR
set -euo pipefail
src=$(cd "${1:?usage: deb_build_reproducible_test.sh SOURCE_DIR}" && pwd)
fail() { echo "deb_build_reproducible: $*" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$src"

# The arguments debian/rules gives dh_auto_configure (its recipe, as make
# would run it), and the flags dpkg-buildpackage gives the compiler here.
args=$(make -s -n -f debian/rules override_dh_auto_configure | tr -d '\\\n' | sed -n 's/^.*dh_auto_configure -- //p')
[ -n "$args" ] || fail "debian/rules: no dh_auto_configure -- ARGS in override_dh_auto_configure"
maint=$(make -s -f debian/rules --eval 'tpmsec-maint-options: ; @echo "$(DEB_BUILD_MAINT_OPTIONS)"' tpmsec-maint-options)
eval "$(DEB_BUILD_MAINT_OPTIONS=$maint dpkg-buildflags --export=sh)"
# shellcheck disable=SC2086
cmake -S "$src" -B "$work/obj" -G Ninja -DCMAKE_BUILD_TYPE=None "-DCMAKE_CXX_FLAGS=$CXXFLAGS $CPPFLAGS" $args \
  >"$work/configure.log" 2>&1 || { cat "$work/configure.log" >&2; fail "cmake configure as debian/rules does failed"; }

compiles=$(grep -c '^build [^:]*\.o: CXX_COMPILER' "$work/obj/build.ninja" || true)
[ "$compiles" -ge 20 ] || fail "only $compiles compile commands in the package's build.ninja"
! grep -q 'cmake_pch' "$work/obj/build.ninja" \
  || fail "the package build uses precompiled headers (debian/rules: -DTPMSEC_PCH=OFF)"
unmapped=$(grep '^  FLAGS = ' "$work/obj/build.ninja" | grep -vcF -- "-ffile-prefix-map=$src=." || true)
[ "$unmapped" -eq 0 ] || fail "$unmapped compile commands do not map $src away (-ffile-prefix-map=$src=.)"
echo "deb_build_reproducible: $compiles compiles as debian/rules configures them: no precompiled header, build path mapped away"
