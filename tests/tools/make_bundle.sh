#!/usr/bin/env bash
# `make bundle`: copies the binaries, their non-system shared libraries (from
# ldd) and DCMTK's data dictionary into BUILD/bundle, with env.sh setting
# LD_LIBRARY_PATH and DCMDICTPATH, so they run on the GPU machine, which
# has no DCMTK, libuv, SQLite or Check. Usage: make_bundle.sh BUILD
# BUNDLE_BINS="ldctd ldct tools/mkseries tests/check_gpu_nlm ..." limits the
# project binaries (paths under BUILD; default all), and BUNDLE_TAR=1 also
# writes BUILD/bundle.tar.xz: the device tool carries at most 64 MiB, and
# every binary holds the CUDA fat binary (~14 MB each).
set -eu
build=${1:-build}
out="$build/bundle"
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
bins=()
if [ -n "${BUNDLE_BINS:-}" ]; then
    for f in $BUNDLE_BINS; do bins+=("$build/$f"); done
else
    bins=("$build/ldctd" "$build/ldct")
    for f in "$build"/tools/* "$build"/tests/*; do [ -x "$f" ] && [ -f "$f" ] && bins+=("$f"); done
fi
for t in storescp storescu echoscu dcmdump; do command -v "$t" > /dev/null && bins+=("$(command -v "$t")"); done
# Libraries every Ubuntu/Debian base system has, the GPU driver's own and the CUDA
# toolkit's (the GPU machine has them in /usr/local/cuda, our rpath) stay out.
system='^(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux|libcuda|libcudart|libcufft|libnvidia|linux-vdso)\.'
for b in "${bins[@]}"; do
    cp "$b" "$out/bin/" && strip --strip-debug "$out/bin/$(basename "$b")"
    ldd "$b" | awk '/=> \// {print $3}' | while read -r lib; do
        name=$(basename "$lib")
        [[ $name =~ $system ]] && continue
        [ -e "$out/lib/$name" ] || { cp -L "$lib" "$out/lib/$name" && strip --strip-unneeded "$out/lib/$name"; }
    done
done
dict=$(dpkg -L libdcmtk17 2>/dev/null | grep '/dicom.dic$' | head -n1)
cp "${dict:-/usr/share/libdcmtk17/dicom.dic}" "$out/dicom.dic"
cat > "$out/env.sh" <<'ENV'
# Source this: sets up the bundle's libraries and DICOM dictionary.
b=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export LD_LIBRARY_PATH="$b/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DCMDICTPATH="$b/dicom.dic"
export PATH="$b/bin:$PATH"
ENV
du -sh "$out" | awk '{print "bundle: " $1 " in '"$out"'"}'
if [ -n "${BUNDLE_TAR:-}" ]; then
    tar -C "$build" -cf - bundle | xz -T0 -6 > "$build/bundle.tar.xz"
    du -sh "$build/bundle.tar.xz" | awk '{print "archive: " $1 " " $2}'
fi
