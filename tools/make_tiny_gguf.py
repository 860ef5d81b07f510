#!/usr/bin/env python3
"""Write a tiny random-weight Llama model pair (target + matching draft) as GGUF files for llama.cpp.

Nothing is downloaded: the SentencePiece BPE tokenizer is trained on local text (by default the running
Python's standard-library sources) and the weights are random. Needs only ``numpy``, ``gguf`` and
``sentencepiece`` (tools/setup_llama_server.sh installs them into .venv-llm). No torch.

The draft is an exact prefix of the target: both share the tokenizer, ``token_embd``, ``output`` and the
first ``--draft-layers`` blocks. The target's extra blocks write back into the residual stream through
output projections scaled by ``--residual-scale``, so the target mostly agrees with the draft: greedy
draft acceptance is well above 0 but below 1 (measured with llama-server, 'tiny' preset: acceptance rate 0.63
at --spec-draft-n-max 2 down to 0.19 at 16, mean acceptance length 2.3-3.9), as in real speculative decoding. ``--residual-scale 0`` makes the target behave exactly like the draft (acceptance 1).

Deterministic: the same arguments, corpus and package versions give byte-identical files (a single
sentencepiece training thread, a seeded numpy Generator). ``manifest.json`` records arguments, sizes and
SHA-256 hashes.

Usage:
    python tools/make_tiny_gguf.py OUTDIR [--preset tiny|speedup] [--seed 0] [--hidden 128] [--target-layers 4]
                                   [--draft-layers 1]
                                   [--vocab 1000] [--std 0.05] [--residual-scale 0.05] [--corpus PATH ...]
Presets: tiny = --hidden 128 --target-layers 4 (default); speedup = --hidden 512 --target-layers 8.
Writes OUTDIR/target.gguf, OUTDIR/draft.gguf, OUTDIR/tokenizer.model and OUTDIR/manifest.json.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import io
import json
import os
import sys
import sysconfig
import time

CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
HEAD_DIM = 64
# Measured on 2 CPU cores with llama-server -t 1 (docs/real-engines.md): with 'tiny' every decode step is
# dominated by fixed overhead, so a 1-layer draft costs about as much as the target and speculation is
# slower than the baseline; with 'speedup' the target's compute dominates and a draft budget of 2-4 wins.
PRESETS = {
    "tiny": {"hidden": 128, "target_layers": 4},
    "speedup": {"hidden": 512, "target_layers": 8},
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Write a tiny random Llama target + matching draft GGUF pair (no downloads).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("outdir", help="directory for target.gguf, draft.gguf, tokenizer.model, manifest.json")
    p.add_argument(
        "--preset", choices=sorted(PRESETS), default="tiny",
        help="size preset: 'tiny' (3.7 MB target, fastest; speculation is slower than the baseline) or "
             "'speedup' (88 MB target; draft-model speculation 1.4-1.7x faster than the baseline on 2 CPU cores)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed for the weights")
    p.add_argument("--hidden", type=int, default=None, help="embedding size, a multiple of 64 (default: from --preset)")
    p.add_argument("--target-layers", type=int, default=None, help="blocks in the target model (default: from --preset)")
    p.add_argument("--draft-layers", type=int, default=1, help="blocks in the draft model (a prefix of the target)")
    p.add_argument("--vocab", type=int, default=1000, help="tokenizer vocabulary size")
    p.add_argument("--std", type=float, default=0.05, help="standard deviation of the random weights")
    p.add_argument(
        "--residual-scale", type=float, default=0.05,
        help="scale of the output projections of target blocks beyond the draft's (0 = target equals draft)",
    )
    p.add_argument("--ctx", type=int, default=4096, help="context length written into the GGUF")
    p.add_argument(
        "--corpus", nargs="*", default=None,
        help="text files to train the tokenizer on (default: the first 60 stdlib *.py files of this Python, without _sysconfigdata*)",
    )
    a = p.parse_args(argv)
    for key, value in PRESETS[a.preset].items():
        if getattr(a, key) is None:
            setattr(a, key, value)
    if a.hidden % HEAD_DIM or a.hidden <= 0:
        p.error(f"--hidden must be a positive multiple of {HEAD_DIM}")
    if not 1 <= a.draft_layers <= a.target_layers:
        p.error("need 1 <= --draft-layers <= --target-layers")
    if a.vocab < 300:
        p.error("--vocab must be >= 300 (byte fallback needs 256 byte tokens)")
    return a


def corpus_lines(paths: list[str] | None) -> tuple[list[str], list[str]]:
    if not paths:
        stdlib = sysconfig.get_paths()["stdlib"]
        # _sysconfigdata_* is generated per machine: leave it out so the tokenizer only depends on the
        # Python version, not on the build machine.
        paths = sorted(
            f for f in glob.glob(os.path.join(stdlib, "*.py"))
            if not os.path.basename(f).startswith("_sysconfigdata")
        )[:60]
    lines: list[str] = []
    for path in paths:
        with open(path, encoding="utf-8", errors="ignore") as fh:
            lines.extend(line for line in fh.read().splitlines() if line.strip())
    if not lines:
        raise SystemExit(f"make_tiny_gguf: no text in the corpus ({len(paths)} files)")
    return lines[:40000], [os.path.basename(p) for p in paths]


def train_tokenizer(lines: list[str], vocab: int) -> bytes:
    import sentencepiece as spm

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=buf, vocab_size=vocab, model_type="bpe",
        character_coverage=1.0, byte_fallback=True, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        add_dummy_prefix=True, normalization_rule_name="identity", remove_extra_whitespaces=False,
        num_threads=1, minloglevel=2,
    )
    return buf.getvalue()


def vocab_entries(model_proto: bytes):
    import gguf
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_proto=model_proto)
    tokens, scores, types = [], [], []
    for i in range(sp.vocab_size()):
        tokens.append(sp.id_to_piece(i).encode("utf-8"))
        scores.append(sp.get_score(i))
        if sp.is_unknown(i):
            kind = gguf.TokenType.UNKNOWN
        elif sp.is_control(i):
            kind = gguf.TokenType.CONTROL
        elif sp.is_unused(i):
            kind = gguf.TokenType.UNUSED
        elif sp.is_byte(i):
            kind = gguf.TokenType.BYTE
        else:
            kind = gguf.TokenType.NORMAL
        types.append(kind)
    return tokens, scores, types


def make_weights(a: argparse.Namespace) -> dict[str, object]:
    """All target tensors, drawn in a fixed order from one seeded generator."""
    import numpy as np

    rng = np.random.default_rng(a.seed)
    h, ff, heads = a.hidden, a.hidden * 2, a.hidden // HEAD_DIM

    def rand(*shape: int, scale: float = 1.0):
        return (rng.standard_normal(shape) * (a.std * scale)).astype(np.float32)

    def ones(n: int):
        return np.ones(n, dtype=np.float32)

    t: dict[str, object] = {
        "token_embd.weight": rand(a.vocab, h),
        "output.weight": rand(a.vocab, h),
        "output_norm.weight": ones(h),
    }
    for b in range(a.target_layers):
        k = 1.0 if b < a.draft_layers else a.residual_scale
        p = f"blk.{b}."
        t[p + "attn_norm.weight"] = ones(h)
        t[p + "attn_q.weight"] = rand(heads * HEAD_DIM, h)
        t[p + "attn_k.weight"] = rand(heads * HEAD_DIM, h)
        t[p + "attn_v.weight"] = rand(heads * HEAD_DIM, h)
        t[p + "attn_output.weight"] = rand(h, heads * HEAD_DIM, scale=k)
        t[p + "ffn_norm.weight"] = ones(h)
        t[p + "ffn_gate.weight"] = rand(ff, h)
        t[p + "ffn_up.weight"] = rand(ff, h)
        t[p + "ffn_down.weight"] = rand(h, ff, scale=k)
    return t


def write_gguf(path: str, name: str, layers: int, a: argparse.Namespace, vocab, weights) -> None:
    import gguf

    tokens, scores, types = vocab
    heads = a.hidden // HEAD_DIM
    w = gguf.GGUFWriter(path, "llama")
    w.add_name(name)
    w.add_context_length(a.ctx)
    w.add_embedding_length(a.hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(a.hidden * 2)
    w.add_head_count(heads)
    w.add_head_count_kv(heads)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_vocab_size(len(tokens))
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)
    keep = ("token_embd.", "output.", "output_norm.") + tuple(f"blk.{b}." for b in range(layers))
    for tensor_name, arr in weights.items():
        if tensor_name.startswith(keep):
            w.add_tensor(tensor_name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    t0 = time.monotonic()
    os.makedirs(a.outdir, exist_ok=True)
    lines, corpus_files = corpus_lines(a.corpus)
    proto = train_tokenizer(lines, a.vocab)
    with open(os.path.join(a.outdir, "tokenizer.model"), "wb") as fh:
        fh.write(proto)
    vocab = vocab_entries(proto)
    weights = make_weights(a)
    files = {}
    for role, layers in (("target", a.target_layers), ("draft", a.draft_layers)):
        path = os.path.join(a.outdir, f"{role}.gguf")
        write_gguf(path, f"tiny-random-llama-{role}-{layers}L", layers, a, vocab, weights)
        files[role] = {"path": os.path.basename(path), "layers": layers,
                       "bytes": os.path.getsize(path), "sha256": sha256(path)}
    import gguf
    import numpy
    import sentencepiece

    manifest = {
        "args": {k: v for k, v in vars(a).items() if k != "outdir"},
        "corpus_files": corpus_files,
        "corpus_lines": len(lines),
        "python": sys.version.split()[0],
        "packages": {"gguf": getattr(gguf, "__version__", "?"), "numpy": numpy.__version__,
                     "sentencepiece": sentencepiece.__version__},
        "files": files,
        "seconds": round(time.monotonic() - t0, 2),
    }
    with open(os.path.join(a.outdir, "manifest.json"), "w") as fh:
        json.dump(manifest, fh, indent=2)
        fh.write("\n")
    for role, info in files.items():
        print(f"{role}: {os.path.join(a.outdir, info['path'])} ({info['layers']} layers, {info['bytes']} bytes)")
    print(f"done in {manifest['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
