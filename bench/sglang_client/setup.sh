#!/usr/bin/env bash
# Makes .venv-sglang-bench: SGLang 0.5.23's own benchmark client (python -m sglang.benchmark.serving), CPU only,
# for bench/bench_engine_fidelity.py's side-by-side column. It layers on .venv-sglang (sglang --no-deps + CPU
# torch, made by tools/setup_sglang_parser_env.sh) through a .pth file and adds only what the client needs on
# top: transformers and tokenizers. `datasets`, `triton` and SGLang's server import chain are stubbed by
# bench/sglang_client/sitecustomize.py (see ../shared/reference/sglang-bench-client.md §1, §3).
# Idempotent; about 30 s when .venv-sglang exists.
set -euo pipefail
cd "$(dirname "$0")/../.."
base=.venv-sglang
env_dir=.venv-sglang-bench
python="${PYTHON:-python3}"
client_loads() {
    [ -x "$env_dir/bin/python" ] && PYTHONPATH=bench/sglang_client HF_HUB_OFFLINE=1 \
        "$env_dir/bin/python" -c "import sglang.benchmark.serving, transformers" > /dev/null 2>&1
}
if client_loads; then
    echo "sglang_client/setup: $env_dir already works"
    exit 0
fi
[ -x "$base/bin/python" ] || bash tools/setup_sglang_parser_env.sh
"$base/bin/python" -m venv --clear "$env_dir"
site_base=$("$base/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
site_new=$("$env_dir/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
echo "$site_base" > "$site_new/sglang_parser_env.pth"
"$env_dir/bin/pip" install -q "transformers==5.23.0" "tokenizers==0.23.3" 2>&1 \
    | grep -v -e "is ignored: it is neither a file nor a directory" -e "^sglang 0.5.23 requires" \
              -e "dependency resolver does not currently take into account" || true
if ! client_loads; then
    echo "sglang_client/setup: $env_dir was built but sglang.benchmark.serving does not import:" >&2
    PYTHONPATH=bench/sglang_client HF_HUB_OFFLINE=1 "$env_dir/bin/python" -c "import sglang.benchmark.serving"
    exit 1
fi
echo "sglang_client/setup: $env_dir ready"
