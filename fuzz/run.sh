#!/usr/bin/env bash
# Builds the libFuzzer targets (clang) and fuzzes each parser for N seconds (default 60 each): the
# safetensors and GGUF readers, the tokenizers' files (CLIP's vocab.json + merges.txt, a byte-level BPE
# tokenizer.json) and the picture readers (PNG, JPEG, WebP).
# Exits non-zero when the fuzzer finds a crash, leak or sanitizer error; the input that triggered it
# is saved in $BUILD/crashes/ — copy it to tests/data/fuzz_regressions/ once fixed.
#   fuzz/run.sh [seconds]        environment: CPDIT_FUZZ_BUILD (default build-fuzz), JOBS (default 2)
set -euo pipefail

seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${CPDIT_FUZZ_BUILD:-$root/build-fuzz}"

CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DCPDIT_FUZZ=ON -DCPDIT_TESTS=OFF -DCPDIT_MPI=OFF >/dev/null
cmake --build "$build" --target fuzz_safetensors fuzz_gguf fuzz_tokenizer fuzz_image -j"${JOBS:-2}"

# target, committed seed corpus, dictionary. New inputs go to a working corpus in the build folder;
# the committed seeds stay read-only.
run() {
  local target="$1" seeds="$2" dict="$3"
  mkdir -p "$build/$target-corpus" "$build/crashes"
  "$build/bin/$target" "$build/$target-corpus" "$seeds" "$root/tests/data/fuzz_regressions" \
    -dict="$dict" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$build/crashes/$target-" -print_final_stats=1
}
run fuzz_safetensors "$root/fuzz/corpus" "$root/fuzz/safetensors.dict"
run fuzz_gguf "$root/fuzz/corpus_gguf" "$root/fuzz/gguf.dict"
run fuzz_tokenizer "$root/fuzz/corpus_tokenizer" "$root/fuzz/tokenizer.dict"
run fuzz_image "$root/fuzz/corpus_image" "$root/fuzz/image.dict"
