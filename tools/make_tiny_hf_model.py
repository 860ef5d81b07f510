#!/usr/bin/env python3
"""Write a tiny random-weight Llama model pair (target + matching draft) as Hugging Face dirs for vLLM.

Nothing is downloaded: a SentencePiece BPE tokenizer is trained on local text (by default the running
Python's standard-library sources), converted with ``LlamaTokenizer.from_pretrained`` (in transformers 5.x
``LlamaTokenizer(vocab_file=...)`` silently builds an *empty* tokenizer, so the conversion goes through a
directory holding ``tokenizer.model``), and the weights are random with Hugging Face's default init
(normal, std ``initializer_range`` = 0.02). With that init greedy output soon repeats itself, which is what
gives n-gram (prompt lookup) speculation a visible acceptance rate.

Needs torch, transformers and sentencepiece: run it with the vLLM venv's python
(tools/setup_vllm.sh does that).

Layout of OUTDIR::

    OUTDIR/target/   config.json, model.safetensors, tokenizer files, chat template  (``--target-layers`` blocks)
    OUTDIR/draft/    same tokenizer and vocabulary; an exact prefix of the target     (``--draft-layers`` blocks)
    OUTDIR/manifest.json  arguments, package versions, file sizes and SHA-256 hashes

The draft shares ``embed_tokens``, ``lm_head``, the final norm and the first ``--draft-layers`` blocks with the
target. The target's extra blocks write back into the residual stream through ``o_proj``/``down_proj``
scaled by ``--residual-scale``, so the target often agrees with the draft: draft-model speculation gets an
acceptance rate between 0 and 1. Greedy agreement of the 1-layer draft with the 2-layer target over 5 prompts x 128
tokens (transformers, teacher-forced): 0.93 at ``--residual-scale 0.05``, 0.58 at 0.3 (the default), 0.12 at 1.0;
``--residual-scale 0`` makes them agree exactly. Some prompts (a Python ``fibonacci`` function) make the greedy
output collapse into one repeated token, where every drafter is always right.

Shapes: head_dim 64 (vLLM's CPU attention only supports some head sizes), heads = hidden / 64, no GQA,
intermediate = 2 * hidden, vocab 1000, max_position_embeddings ``--ctx`` (4096), float32 weights, untied
embeddings.

Deterministic: the same arguments, corpus and package versions give byte-identical files (a single
sentencepiece training thread, ``torch.manual_seed``).

Usage:
    python tools/make_tiny_hf_model.py OUTDIR [--seed 0] [--hidden 128] [--target-layers 2] [--draft-layers 1]
                                       [--vocab 1000] [--ctx 4096] [--residual-scale 0.3] [--corpus PATH ...]
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


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Write a tiny random Llama target + matching draft as Hugging Face dirs (no downloads).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("outdir", help="directory that receives target/, draft/ and manifest.json")
    p.add_argument("--seed", type=int, default=0, help="seed for the weights")
    p.add_argument("--hidden", type=int, default=128, help="hidden size, a positive multiple of 64")
    p.add_argument("--target-layers", type=int, default=2, help="decoder blocks in the target model")
    p.add_argument("--draft-layers", type=int, default=1, help="decoder blocks in the draft (a prefix of the target)")
    p.add_argument("--vocab", type=int, default=1000, help="tokenizer vocabulary size")
    p.add_argument("--ctx", type=int, default=4096, help="max_position_embeddings written into config.json")
    p.add_argument(
        "--residual-scale", type=float, default=0.3,
        help="scale of o_proj/down_proj of the target blocks beyond the draft's (0 = target equals draft)",
    )
    p.add_argument(
        "--corpus", nargs="*", default=None,
        help="text files to train the tokenizer on (default: the first 60 stdlib *.py files, without _sysconfigdata*)",
    )
    a = p.parse_args(argv)
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
        # _sysconfigdata_* differs between machines; leave it out so the tokenizer depends only on the Python version.
        paths = sorted(
            f for f in glob.glob(os.path.join(stdlib, "*.py"))
            if not os.path.basename(f).startswith("_sysconfigdata")
        )[:60]
    lines: list[str] = []
    for path in paths:
        with open(path, encoding="utf-8", errors="ignore") as fh:
            lines.extend(line for line in fh.read().splitlines() if line.strip())
    if not lines:
        raise SystemExit(f"make_tiny_hf_model: no text in the corpus ({len(paths)} files)")
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


def save_tokenizer(model_proto: bytes, outdir: str) -> None:
    from transformers import LlamaTokenizer

    with open(os.path.join(outdir, "tokenizer.model"), "wb") as fh:
        fh.write(model_proto)
    tok = LlamaTokenizer.from_pretrained(outdir)  # converts tokenizer.model into the tokenizers backend
    if not tok("def main():")["input_ids"]:
        raise SystemExit("make_tiny_hf_model: the converted tokenizer is empty (transformers changed?)")
    tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(outdir)


def make_config(a: argparse.Namespace, layers: int):
    from transformers import LlamaConfig

    heads = a.hidden // HEAD_DIM
    return LlamaConfig(
        vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.hidden * 2,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads, head_dim=HEAD_DIM,
        max_position_embeddings=a.ctx, bos_token_id=1, eos_token_id=2, pad_token_id=None,
        tie_word_embeddings=False, rms_norm_eps=1e-6, initializer_range=0.02, dtype="float32",
    )


def build_models(a: argparse.Namespace):
    """(target, draft) LlamaForCausalLM models; the draft's tensors are copies of the target's."""
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(a.seed)
    target = LlamaForCausalLM(make_config(a, a.target_layers)).to(torch.float32)  # HF default init (std 0.02)
    with torch.no_grad():
        for b in range(a.draft_layers, a.target_layers):
            layer = target.model.layers[b]
            layer.self_attn.o_proj.weight.mul_(a.residual_scale)
            layer.mlp.down_proj.weight.mul_(a.residual_scale)
    draft = LlamaForCausalLM(make_config(a, a.draft_layers)).to(torch.float32)
    state = target.state_dict()
    draft.load_state_dict({k: v.clone() for k, v in state.items() if k in draft.state_dict()}, strict=True)
    return target, draft


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
    target, draft = build_models(a)
    files: dict[str, dict] = {}
    for role, model in (("target", target), ("draft", draft)):
        d = os.path.join(a.outdir, role)
        os.makedirs(d, exist_ok=True)
        save_tokenizer(proto, d)
        model.save_pretrained(d, safe_serialization=True)
        files[role] = {
            "dir": role,
            "layers": model.config.num_hidden_layers,
            "params": sum(p.numel() for p in model.parameters()),
            "files": {f: {"bytes": os.path.getsize(os.path.join(d, f)), "sha256": sha256(os.path.join(d, f))}
                      for f in sorted(os.listdir(d))},
        }
    import sentencepiece
    import torch
    import transformers

    manifest = {
        "args": {k: v for k, v in vars(a).items() if k != "outdir"},
        "corpus_files": corpus_files,
        "corpus_lines": len(lines),
        "python": sys.version.split()[0],
        "packages": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "sentencepiece": sentencepiece.__version__},
        "models": files,
        "seconds": round(time.monotonic() - t0, 2),
    }
    with open(os.path.join(a.outdir, "manifest.json"), "w") as fh:
        json.dump(manifest, fh, indent=2)
        fh.write("\n")
    for role, info in files.items():
        print(f"{role}: {os.path.join(a.outdir, info['dir'])} ({info['layers']} layers, {info['params']} params)")
    print(f"done in {manifest['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
