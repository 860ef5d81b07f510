#!/usr/bin/env bash
# Creates .venv-sglang: sglang 0.5.23 without its GPU dependencies, plus the small packages its parser
# imports and a CPU build of torch, so tests can check our argv with SGLang's own ServerArgs parser.
# See ../shared/reference/sglang.md §1.5. Idempotent: reuses an environment that already works.
set -euo pipefail
cd "$(dirname "$0")/.."
env_dir=.venv-sglang
if [ -x "$env_dir/bin/python" ] && "$env_dir/bin/python" -c "import sglang, torch" 2>/dev/null; then
    exit 0
fi
python3 -m venv "$env_dir"
"$env_dir/bin/pip" install -q --no-deps "sglang==0.5.23"
"$env_dir/bin/pip" install -q numpy orjson psutil pybase64 requests packaging pillow starlette \
    typing_extensions msgspec pydantic pyzmq tqdm ipython aiohttp "torch==2.13.0"
"$env_dir/bin/python" tools/dump_sglang_flags.py > /dev/null
