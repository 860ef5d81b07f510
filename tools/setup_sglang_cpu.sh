#!/usr/bin/env bash
# Prepare SGLang 0.5.23's REAL server on a CPU-only machine, and a tiny locally generated model, for the tests that
# talk to it (tests/real_servers/test_sglang_real*.py; what runs and what only a GPU shows: docs/servers.md).
#
#   tools/setup_sglang_cpu.sh                # install/reuse everything, then print the paths
#   tools/setup_sglang_cpu.sh --print-paths  # print the paths only; exit 1 if something is missing or broken
#   eval "$(tools/setup_sglang_cpu.sh)"      # stdout is only KEY=VALUE lines; progress goes to stderr
#
# It extends .venv-sglang (tools/setup_sglang_parser_env.sh: the sglang 0.5.23 wheel without its GPU dependencies
# and the machine's CPU torch wheel), so torch is installed once for both. Idempotent; each step is skipped when
# its result is already present and working:
#   1. the parser environment (tools/setup_sglang_parser_env.sh);
#   2. the pure-Python packages the server imports on CPU (pinned below: the versions it was run with), among them
#      protobuf (the tiny SentencePiece tokenizer), soundfile (imported at start-up), triton (imported by SGLang's
#      kernel modules; never run on CPU) and torchvision 0.28.0 without its dependencies;
#   3. the torchvision guard: the registry's torchvision is a CUDA build whose two unguarded `register_fake`
#      meta registrations fail at import on a CPU torch (RuntimeError: operator torchvision::nms does not exist);
#      they are made conditional on torchvision's own `_has_ops()`, as its other registrations already are;
#   4. the `sgl_kernel` stand-in (tools/sgl_kernel_cpu, a test fixture: the ten CPU operations SGLang
#      imports under `if _is_cpu:`, in pure torch) on the environment's path through a .pth file;
#   5. the tiny model (tools/make_tiny_hf_model.py with this environment's python) in
#      ${SPECBENCH_CACHE:-$HOME/.cache/specbench}/models/sglang-tiny-<hash of the generator + its arguments>.
# A stamp (.venv-sglang/.setup_sglang_cpu_ok, a hash of the site-packages listing) skips the import check (about
# 15-40 s) until a package is added or removed: cold about 2 min after the parser environment (7.6 min in all from
# nothing, measured at nice 10 on a busy 2-core machine), warm under 1 s.
#
# Start a server with:
#   SGLANG_USE_CPU_ENGINE=1 "$SGLANG_PYTHON" -m sglang.launch_server --model-path "$SGLANG_TINY_MODEL" \
#       --device cpu --port PORT --max-total-tokens 20000 --mem-fraction-static 0.3
# (ready in about 60-90 s on 2 cores; the CPU platform sizes the KV pool from the machine's RAM without
# --max-total-tokens).
#
# Environment:
#   SPECBENCH_CACHE         cache root (default $HOME/.cache/specbench)
#   SPECBENCH_BUILD_NICE    nice level of pip install (default 0)
#
# Output (stdout), one per line:
#   SGLANG_PYTHON=...  SGLANG_VERSION=...  SGLANG_TINY_MODEL=...  SGLANG_TINY_DRAFT=...  SGLANG_KERNEL_STANDIN=...
set -euo pipefail

repo_root="$(cd "$(dirname "$0")/.." && pwd)"
pin="0.5.23"
cache="${SPECBENCH_CACHE:-$HOME/.cache/specbench}"
nice_level="${SPECBENCH_BUILD_NICE:-0}"
venv="$repo_root/.venv-sglang"
standin="$repo_root/tools/sgl_kernel_cpu"
pth_name="specbench_sgl_kernel_standin.pth"
model_args=(--seed 0 --hidden 128 --target-layers 2 --draft-layers 1 --residual-scale 0.3)
gen="$repo_root/tools/make_tiny_hf_model.py"
# What the server imports on CPU beyond the parser environment (tools/setup_sglang_parser_env.sh). torch is
# named so that pip keeps the CPU wheel.
server_packages=(
    "torch==2.13.0" "fastapi==0.165.0" "uvicorn==0.55.0" "uvloop==0.23.0" "transformers==5.19.0"
    "tokenizers==0.23.2" "sentencepiece==0.2.1" "protobuf==7.36.2" "soundfile==0.13.1" "prometheus_client==0.26.0"
    "setproctitle==1.3.8" "python-multipart==0.0.34" "partial-json-parser==0.2.1.1.post7" "interegular==0.3.3"
    "einops==0.8.2" "xxhash==4.1.0" "zstandard==0.25.0" "regex==2026.12.2" "scipy==1.17.1" "openai==2.8.0"
    "tiktoken==0.14.0" "watchfiles==1.3.0" "blobfile==3.3.0" "gguf==0.19.0" "safetensors==0.8.0"
    "huggingface_hub==1.33.0" "python-dateutil==4.0.0" "distro==1.9.0" "triton==3.9.0" "dill==0.4.1"
    "apache-tvm-ffi==0.1.11" "compressed-tensors==0.20.1" "jsonschema==4.26.0" "xgrammar==0.2.9"
)

log() { printf '[setup_sglang_cpu] %s\n' "$*" >&2; }
die() { printf '[setup_sglang_cpu] ERROR: %s\n' "$*" >&2; exit 1; }
step="start"
trap 'rc=$?; [ $rc -ne 0 ] && printf "[setup_sglang_cpu] FAILED during step: %s (exit %s)\n" "$step" "$rc" >&2' EXIT

model_dir() {
    echo "$cache/models/sglang-tiny-$({ cat "$gen"; printf '%s\n' "${model_args[@]}"; } | sha256sum | cut -c1-12)"
}
site_packages() { "$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
installed_version() {
    "$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("sglang"))' 2>/dev/null || true
}

print_paths() {
    local md ver=""
    md="$(model_dir)"
    [ -x "$venv/bin/python" ] && ver="$(installed_version)"
    printf 'SGLANG_PYTHON=%q\n' "$venv/bin/python"
    printf 'SGLANG_VERSION=%q\n' "$ver"
    printf 'SGLANG_TINY_MODEL=%q\n' "$md/target"
    printf 'SGLANG_TINY_DRAFT=%q\n' "$md/draft"
    printf 'SGLANG_KERNEL_STANDIN=%q\n' "$standin"
}

venv_installed() { [ -x "$venv/bin/python" ] && [ "$(installed_version)" = "$pin" ]; }
pth_present() { [ "$(cat "$(site_packages)/$pth_name" 2>/dev/null)" = "$standin" ]; }
torchvision_guarded() {
    grep -q '_has_ops() else' "$(site_packages)/torchvision/_meta_registrations.py" 2>/dev/null
}
# The modules a server start imports, with the stand-in: a missing package shows here in seconds, not after a
# 60 s start-up.
server_imports() {
    (cd / && SGLANG_USE_CPU_ENGINE=1 PYTHONWARNINGS=ignore "$venv/bin/python" - <<'EOF'
import importlib
for name in ("sgl_kernel", "sgl_kernel.speculative", "torchvision.transforms", "sglang.srt.arg_groups.pipeline",
             "sglang.srt.entrypoints.http_server", "sglang.srt.managers.scheduler",
             "sglang.srt.model_executor.model_runner", "sglang.srt.models.llama",
             "sglang.srt.layers.attention.torch_native_backend"):
    importlib.import_module(name)
import sgl_kernel
assert getattr(sgl_kernel, "STANDIN", False), "an sgl_kernel other than the stand-in is installed"
EOF
    )
}
stamp="$venv/.setup_sglang_cpu_ok"
venv_fingerprint() { { echo "$pin $standin"; ls -1 "$(site_packages)"; } | sha256sum | cut -c1-16; }
stamp_valid() { [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(venv_fingerprint)" ]; }
model_present() {
    local md; md="$(model_dir)"
    [ -s "$md/target/model.safetensors" ] && [ -s "$md/draft/model.safetensors" ] && [ -s "$md/manifest.json" ]
}

case "${1:-}" in
    --print-paths)
        [ -f "$gen" ] || die "missing $gen"
        print_paths
        missing=0
        venv_installed || { log "sglang==$pin missing in $venv (run tools/setup_sglang_cpu.sh)"; missing=1; }
        if [ "$missing" = 0 ]; then
            stamp_valid || { log "the SGLang server environment is not verified (run tools/setup_sglang_cpu.sh)"; missing=1; }
            pth_present || { log "the sgl_kernel stand-in is not on $venv's path (run tools/setup_sglang_cpu.sh)"; missing=1; }
        fi
        model_present || { log "tiny model missing in $(model_dir) (run tools/setup_sglang_cpu.sh)"; missing=1; }
        trap - EXIT
        exit "$missing"
        ;;
    -h|--help)
        sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
        trap - EXIT
        exit 0
        ;;
    "") ;;
    *) die "unknown argument: $1 (use --print-paths or --help)" ;;
esac

step="checking prerequisites"
[ -f "$gen" ] || die "missing $gen"
[ -f "$standin/sgl_kernel/__init__.py" ] || die "missing the stand-in $standin/sgl_kernel"
mkdir -p "$cache/models" || die "cannot create cache dir $cache"
if command -v flock >/dev/null 2>&1; then
    exec 9>"$cache/.setup-sglang-cpu.lock"
    flock 9 || die "could not lock $cache/.setup-sglang-cpu.lock"
fi
t_all=$(date +%s)

if venv_installed && pth_present && stamp_valid; then
    log "reusing $venv (sglang $pin server on CPU; verified earlier, site-packages unchanged since)"
else
    rm -f "$stamp"
    step="the SGLang parser environment (tools/setup_sglang_parser_env.sh)"
    bash "$repo_root/tools/setup_sglang_parser_env.sh" >&2 || die "tools/setup_sglang_parser_env.sh failed"
    venv_installed || die "$venv has no sglang==$pin after tools/setup_sglang_parser_env.sh"

    step="installing the server's CPU dependencies"
    t0=$(date +%s)
    pip_log="$cache/setup-sglang-cpu-pip.log"
    log "pip install the server's pure-Python dependencies (about 300 MB, most of it triton; 1-2 min)"
    { nice -n "$nice_level" "$venv/bin/pip" install --disable-pip-version-check "${server_packages[@]}" \
        && nice -n "$nice_level" "$venv/bin/pip" install --disable-pip-version-check --no-deps "torchvision==0.28.0"; } \
        >"$pip_log" 2>&1 \
        || { grep -v 'is ignored: it is neither a file nor a directory' "$pip_log" | tail -n 30 >&2
             die "pip install failed (full log: $pip_log)"; }
    log "dependencies in place in $(( $(date +%s) - t0 )) s (pip log: $pip_log)"

    step="guarding torchvision's meta registrations"
    sp="$(site_packages)"
    if ! torchvision_guarded; then
        "$venv/bin/python" - "$sp/torchvision/_meta_registrations.py" <<'EOF' || die "could not guard torchvision"
import sys
path = sys.argv[1]
text = open(path, encoding="utf-8").read()
old = '@torch.library.register_fake("torchvision::'
new = ('@(torch.library.register_fake if torchvision.extension._has_ops() else (lambda *_a, **_k: (lambda f: f)))'
       '("torchvision::')
if old not in text:
    sys.exit(f"{path}: no unguarded register_fake left to guard (another torchvision?)")
open(path, "w", encoding="utf-8").write(text.replace(old, new))
EOF
        log "torchvision's nms/qnms meta registrations made conditional on its own ops"
    fi

    step="putting the sgl_kernel stand-in on the path"
    printf '%s\n' "$standin" >"$sp/$pth_name"

    step="checking that the server's modules import"
    server_imports >&2 || die "SGLang's server modules do not import in $venv (see above)"
    venv_fingerprint >"$stamp"
fi

step="generating the tiny model"
md="$(model_dir)"
if model_present; then
    log "reusing the tiny model in $md"
else
    t0=$(date +%s)
    tmp_dir="$md.tmp.$$"
    rm -rf "$tmp_dir"
    (cd / && "$venv/bin/python" "$gen" "$tmp_dir" "${model_args[@]}") >&2 \
        || { rm -rf "$tmp_dir"; die "tools/make_tiny_hf_model.py ${model_args[*]} failed"; }
    rm -rf "$md"
    mv "$tmp_dir" "$md"
    log "tiny model written in $(( $(date +%s) - t0 )) s"
fi

log "done in $(( $(date +%s) - t_all )) s"
trap - EXIT
print_paths
