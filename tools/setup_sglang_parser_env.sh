#!/usr/bin/env bash
# Creates .venv-sglang: sglang 0.5.23 without its GPU dependencies, plus the small packages its parser imports
# and a CPU build of torch, so tests/real_servers/test_sglang_argv.py can check our argv with SGLang's own ServerArgs parser
# (see ../shared/reference/sglang.md §1.5). About 1.3 GB; under two minutes from a local torch wheel. Needs
# Python >= 3.11 (the pinned numpy and ipython do).
#
# Idempotent: an environment whose parser already loads is kept. Override the torch requirement with
# SGLANG_PARSER_TORCH (default torch==2.13.0, the CPU wheel found through pip's find-links on these machines).
set -euo pipefail
cd "$(dirname "$0")/.."
env_dir=.venv-sglang
torch_req="${SGLANG_PARSER_TORCH:-torch==2.13.0}"
python="${PYTHON:-python3}"

parser_loads() {
    [ -x "$env_dir/bin/python" ] && "$env_dir/bin/python" tools/dump_sglang_flags.py > /dev/null 2>&1
}

if parser_loads; then
    echo "setup_sglang_parser_env: $env_dir already works"
    exit 0
fi

# pip's find-links/extra-index warnings and the resolver's complaint about sglang's (deliberately) missing
# GPU dependencies are noise here; real failures still stop the script through pipefail.
quiet() { grep -v -e "is ignored: it is neither a file nor a directory" -e "^sglang 0.5.23 requires" \
    -e "dependency resolver does not currently take into account" || true; }

echo "setup_sglang_parser_env: creating $env_dir (sglang==0.5.23 --no-deps, parser deps, $torch_req)"
"$python" -m venv --clear "$env_dir"
"$env_dir/bin/pip" install -q --no-deps "sglang==0.5.23" 2>&1 | quiet
# The versions below were verified to import sglang 0.5.23's parser (Python 3.11, torch 2.13.0+cpu).
"$env_dir/bin/pip" install -q \
    "numpy==2.4.6" "orjson==3.13.0" "psutil==7.2.2" "pybase64==1.5.1" "requests==2.34.2" "packaging==26.4" \
    "pillow==13.0.0" "starlette==1.10.0" "typing_extensions==4.16.0" "msgspec==0.23.0" "pydantic==2.14.4" \
    "pyzmq==27.3.0" "tqdm==4.70.1" "ipython==9.18.1" "aiohttp==3.14.5" "$torch_req" 2>&1 | quiet
if ! parser_loads; then
    echo "setup_sglang_parser_env: $env_dir was built but SGLang's parser does not load:" >&2
    "$env_dir/bin/python" tools/dump_sglang_flags.py > /dev/null
    exit 1
fi
echo "setup_sglang_parser_env: $env_dir ready: $("$env_dir/bin/python" tools/dump_sglang_flags.py 2>/dev/null | head -1)"
