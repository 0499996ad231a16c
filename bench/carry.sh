#!/usr/bin/env bash
# What the standard benchmark needs on the GPU machine, which reaches no registry: the wheels hymt imports that its
# image lacks (in .whl/) and llama.cpp's binaries and converter (in .llama/), 61 MB together, just under the 64 MiB a
# device call carries with the (compressed) working tree. transformers is cut to the model code hymt loads (13 MB to
# 2 MB), bitsandbytes to its CUDA 13 library (43 MB to 3.6 MB) and wordfreq to the lists detection reads (57 MB to
# 3.5 MB); srt, gemlite and openapi-ui-bundles come as sources only and are built here.
# gemlite serves bench/kernels.py's comparison only, and torchao too, carried only with KERNELS=1 (3.4 MB that,
# beside llama.cpp's files, takes the call over its limit); bitsandbytes serves the NF4 tiers and the seed-style
# server alone, which a standard run on Hopper reaches only by stepping down after out-of-memory (that card then
# fails to start, its server log saying NF4 needs bitsandbytes): carried only with NF4=1 (3.6 MB).
#
#   bash bench/carry.sh                 # then: device run with carry [".whl", ".llama"] (see bench/README.md)
set -euo pipefail
cd "$(dirname "$0")/.."
anchors=${LLAMA_ANCHORS:-../shared/anchors/llama-cpp}
py=${PYTHON:-python3}
rm -rf .whl .llama && mkdir -p .whl .llama
grep -qxF /.llama/ .git/info/exclude 2>/dev/null || echo /.llama/ >> .git/info/exclude
platforms=()
for n in 17 24 27 28 31 34 35; do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
platforms+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)
$py -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" \
  -d .whl transformers==5.23.0 ${NF4:+bitsandbytes==0.50.2} humming-kernels==0.1.19 starlette==1.10.0 uvicorn==0.54.0 \
  python-multipart==0.0.34 sentencex==1.0.32 py3langid==0.4.0 hanzidentifier==1.3.0 webvtt-py==0.6.0 \
  python-docx==1.2.0 python-pptx==1.0.2 openpyxl==3.1.5 et-xmlfile==2.0.0 polib==1.2.0 ebooklib==0.20 \
  zhon==2.1.1 xlsxwriter==3.3.1 wordfreq==3.1.1 ftfy==6.3.1 langcodes==3.5.1 locate==1.1.1 msgpack==1.2.4 \
  wcwidth==0.9.4 ${KERNELS:+torchao==0.18.0}
$py -m pip wheel -q --no-deps -w .whl srt==3.5.3 gemlite==0.6.0.post2 openapi-ui-bundles==0.3.0

work=$(mktemp -d)
root=$PWD
trap 'rm -rf "$work"' EXIT
# Unpack a wheel, run a command in it, keep the RECORD lines of the files left, pack it again.
rewheel() {  # wheel-glob, command
  local wheel dir record
  wheel=$(ls "$root"/.whl/$1)
  dir=$(mktemp -d -p "$work")
  (cd "$dir" && unzip -q "$wheel" && eval "$2" && record=$(ls -d ./*.dist-info)/RECORD \
    && while IFS=, read -r path rest; do [ -e "$path" ] && echo "$path,$rest"; done < "$record" > "$work/record" \
    && mv "$work/record" "$record" && rm "$wheel" && zip -q -r -9 "$wheel" .)
}
# transformers: only the model folders hymt's import path touches.
rewheel 'transformers-*.whl' 'for d in transformers/models/*/; do case $(basename "$d") in
  auto|hunyuan_v1_dense|hy_v3|llama|encoder_decoder) ;; *) rm -rf "$d";; esac; done'
# bitsandbytes: the CUDA 13 and CPU libraries only.
[ -z "${NF4:-}" ] || rewheel 'bitsandbytes-*.whl' "find bitsandbytes -maxdepth 1 -name 'libbitsandbytes_*.so' \
  ! -name '*_cuda130.so' ! -name '*_cpu.so' -delete"
# wordfreq: the small word lists detect.py reads (4 MB of its 57).
rewheel 'wordfreq-*.whl' "find wordfreq/data -type f ! -regex '.*/small_\\(en\\|fr\\|pt\\|es\\|tr\\|it\\|de\\|vi\\|ms\\|id\\|pl\\|cs\\|nl\\|ru\\|uk\\|ar\\|fa\\|ur\\|hi\\|fil\\)\\.msgpack\\.gz' -delete"

cp "$anchors"/llama-bin-sm90.tar.xz.part* "$anchors"/to_gguf.py .llama/
tar xJf "$anchors/llama-src.tar.xz" -C "$work" ./convert_hf_to_gguf.py ./conversion ./gguf-py ./LICENSE
tar cf - -C "$work" convert_hf_to_gguf.py conversion gguf-py LICENSE | xz -6 > .llama/llama-convert.tar.xz
du -sh .whl .llama
# Every requirement of hymt and of these wheels is either carried or on the GPU machine's image (its package list,
# where this workplace keeps it): a missing one stops the servers at import, which only the run would show.
kinds=${DEVICE_KINDS:-/work/.library/device/KINDS.md}
[ -f "$kinds" ] && $py bench/closure.py "$kinds" .whl
