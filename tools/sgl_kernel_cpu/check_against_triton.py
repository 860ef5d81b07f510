"""Each function of the ``sgl_kernel`` stand-in (tools/sgl_kernel_cpu) against the Triton kernel that plays its
role in SGLang 0.5.23's own files, run by Triton's interpreter (``TRITON_INTERPRET=1``) on CPU tensors.

Run with the SGLang environment's python (tests/real_servers/test_sglang_kernel_standin.py does): ``python
tools/sgl_kernel_cpu/check_against_triton.py [NAME ...]`` prints one ``ok NAME`` line per function and exits 1 at the first
difference, naming it. Inputs are random (seeded), several shapes per function.
"""

from __future__ import annotations

import os
import sys

os.environ["TRITON_INTERPRET"] = "1"
os.environ["SGLANG_USE_CPU_ENGINE"] = "1"

import sgl_kernel
import torch
from sgl_kernel.speculative import reconstruct_indices_from_tree_mask
from sglang.kernels.ops.kvcache import cache_move
from sglang.kernels.ops.speculative import cache_locs, eagle, multi_layer_eagle, reconstruct_tree, spec_tree
from sglang.srt.mem_cache import allocation
from sglang.srt.utils import next_power_of_2

ROUNDS = 6


def same(name: str, ours: object, theirs: object) -> None:
    for a, b in zip(ours if isinstance(ours, tuple) else (ours,), theirs if isinstance(theirs, tuple) else (theirs,),
                    strict=True):
        if not torch.equal(a, b):
            raise AssertionError(f"{name}: the stand-in differs from SGLang's Triton kernel:\nours   {a}\ntheirs {b}")


def _segments(gen: torch.Generator, bs: int, pool_len: int) -> tuple[torch.Tensor, ...]:
    rows = torch.randperm(bs + 3, generator=gen)[:bs]
    start = torch.randint(0, pool_len // 2, (bs,), generator=gen)
    end = start + torch.randint(0, pool_len // 2, (bs,), generator=gen)
    return rows, start, end


def check_assign_req_to_token_pool(gen: torch.Generator) -> None:
    for bs in (1, 3, 5):
        rows, start, end = _segments(gen, bs, 40)
        out_cache_loc = torch.randint(0, 1000, (int((end - start).sum()),), generator=gen)
        ours, theirs = (torch.full((bs + 3, 40), -1, dtype=torch.int32) for _ in range(2))
        sgl_kernel.assign_req_to_token_pool_cpu(rows, ours, start, end, out_cache_loc, 40)
        allocation.assign_req_to_token_pool[(bs,)](rows, theirs, start, end, out_cache_loc, 40, next_power_of_2(bs))
        same("assign_req_to_token_pool_cpu", ours, theirs)


def check_assign_extend_cache_locs(gen: torch.Generator) -> None:
    for bs in (1, 3, 5):
        rows, start, end = _segments(gen, bs, 40)
        table = torch.randint(0, 1000, (bs + 3, 40), generator=gen, dtype=torch.int32)
        total = int((end - start).sum())
        ours, theirs = (torch.full((total + 2,), -1, dtype=torch.int64) for _ in range(2))
        sgl_kernel.assign_extend_cache_locs_cpu(rows, table, start, end, ours, 40)
        cache_locs.assign_extend_cache_locs[(bs,)](rows, table, start, end, theirs, 40, next_power_of_2(bs))
        same("assign_extend_cache_locs_cpu", ours, theirs)


def check_assign_draft_cache_locs_contiguous(gen: torch.Generator) -> None:
    for bs, topk, steps in ((1, 1, 3), (3, 2, 2), (4, 1, 5)):
        rows = torch.randperm(bs + 2, generator=gen)[:bs]
        seq_lens = torch.randint(0, 20, (bs,), generator=gen)
        table = torch.randint(0, 1000, (bs + 2, 40), generator=gen, dtype=torch.int32)
        ours, theirs = (torch.full((bs * topk * steps,), -1, dtype=torch.int64) for _ in range(2))
        sgl_kernel.assign_draft_cache_locs_contiguous_cpu(rows, table, seq_lens, ours, 40, topk, steps)
        cache_locs.assign_draft_cache_locs_contiguous[(bs,)](rows, table, seq_lens, theirs, 40, topk, steps)
        same("assign_draft_cache_locs_contiguous_cpu", ours, theirs)


def check_fill_bonus_tokens(gen: torch.Generator) -> None:
    for bs, width in ((1, 1), (3, 4), (5, 6)):
        tokens = torch.randint(0, 100, (bs, width), generator=gen)
        lens = torch.randint(1, width + 1, (bs,), generator=gen, dtype=torch.int32)
        ours, theirs = (torch.zeros(bs, dtype=torch.int64) for _ in range(2))
        sgl_kernel.fill_bonus_tokens_cpu(tokens, lens, ours, width)
        eagle.fill_bonus_tokens[(bs,)](tokens, lens, theirs, width)
        same("fill_bonus_tokens_cpu", ours, theirs)


def check_fill_accept_out_cache_loc(gen: torch.Generator) -> None:
    for size in (1, 6, 13):
        index = torch.randint(0, 20, (size,), generator=gen)
        index[torch.rand(size, generator=gen) < 0.4] = -1
        out_cache_loc = torch.randint(0, 1000, (20,), generator=gen)
        ours, theirs = (torch.full((size,), -7, dtype=torch.int64) for _ in range(2))
        sgl_kernel.fill_accept_out_cache_loc_cpu(index, out_cache_loc, ours)
        eagle.fill_accept_out_cache_loc[(size,)](index, out_cache_loc, theirs, next_power_of_2(size))
        same("fill_accept_out_cache_loc_cpu", ours, theirs)


def check_copy_all_layer_kv_cache(gen: torch.Generator) -> None:
    """The Triton kernel reads raw data pointers, which its interpreter cannot follow: the reference here is the
    kernel's own statement (every source row read, then written onto its target row, in each buffer)."""
    for rows, locs in ((8, 1), (16, 5), (32, 9)):
        buffers = [torch.randint(0, 255, (rows, width), generator=gen, dtype=torch.uint8) for width in (8, 24)]
        expected = [b.clone() for b in buffers]
        src = torch.randperm(rows, generator=gen)[:locs]
        tgt = torch.randperm(rows, generator=gen)[:locs]
        for b in expected:
            b[tgt] = b[src].clone()
        ptrs = torch.tensor([b.data_ptr() for b in buffers], dtype=torch.int64)
        strides = torch.tensor([b.shape[1] * b.element_size() for b in buffers], dtype=torch.int64)
        sgl_kernel.copy_all_layer_kv_cache_cpu(ptrs, strides, tgt, src)
        same("copy_all_layer_kv_cache_cpu", tuple(buffers), tuple(expected))
    assert callable(cache_move.copy_all_layer_kv_cache_tiled)  # the kernel the statement is read from


def check_rotate_input_ids(gen: torch.Generator) -> None:
    for bs, with_select in ((1, False), (3, False), (3, True)):
        lens = torch.randint(0, 6, (bs,), generator=gen)
        starts = torch.cumsum(lens, 0) - lens
        ids = torch.randint(0, 100, (int(lens.sum()) + 1,), generator=gen)
        new = torch.randint(100, 200, (bs,), generator=gen)
        select = (starts + torch.clamp(lens - 2, min=0)) if with_select else None
        ours, theirs = ids.clone(), ids.clone()
        sgl_kernel.rotate_input_ids_cpu(ours, starts, lens, new, select)
        multi_layer_eagle.rotate_input_ids_kernel[(bs,)](theirs, starts, lens, new, select, BLOCK_SIZE=8)
        same("rotate_input_ids_cpu", ours, theirs)


def _tree_inputs(gen: torch.Generator, bs: int, topk: int, depth: int, n: int) -> tuple[torch.Tensor, ...]:
    """An EAGLE draft's parent list and selected indices (each request's ``n - 1`` chosen nodes, sorted)."""
    space = topk + (depth - 1) * topk * topk
    parents = torch.full((bs, topk * (depth - 1) + 1), -1, dtype=torch.int64)
    selected = torch.empty((bs, n - 1), dtype=torch.int64)
    for b in range(bs):
        selected[b] = torch.sort(torch.randperm(space, generator=gen)[: n - 1]).values
        pool = selected[b][torch.randperm(n - 1, generator=gen)]
        parents[b, 1:] = pool.repeat(parents.shape[1])[: parents.shape[1] - 1]
    seq_lens = torch.randint(1, 9, (bs,), generator=gen)
    return parents, selected, seq_lens


def _build(fn, parents, selected, seq_lens, topk, depth, n, mode):
    bs = seq_lens.shape[0]
    size = n * n * bs + int(seq_lens.sum()) * n
    mask = torch.zeros(size, dtype=torch.bool)
    positions = torch.zeros(bs * n, dtype=torch.int64)
    index, next_token, sibling = (torch.full((bs, n), -1, dtype=torch.int64) for _ in range(3))
    fn(parents, selected, seq_lens, mask, positions, index, next_token, sibling, topk, depth, n, mode)
    return mask, positions, index, next_token, sibling


def check_build_tree_kernel_efficient(gen: torch.Generator) -> None:
    for bs, topk, depth, n in ((1, 1, 3, 4), (2, 2, 3, 6), (3, 4, 4, 8)):
        for mode in (spec_tree.TreeMaskMode.FULL_MASK, spec_tree.TreeMaskMode.QLEN_ONLY):
            parents, selected, seq_lens = _tree_inputs(gen, bs, topk, depth, n)
            ours = _build(sgl_kernel.build_tree_kernel_efficient_cpu, parents, selected, seq_lens, topk, depth, n,
                          int(mode))
            theirs = _build(spec_tree.sgl_build_tree_kernel_triton, parents, selected, seq_lens, topk, depth, n,
                            mode)
            same(f"build_tree_kernel_efficient_cpu (mode {int(mode)})", ours, theirs)


def check_verify_tree_greedy(gen: torch.Generator) -> None:
    for bs, topk, depth, n in ((1, 1, 3, 4), (2, 2, 3, 6), (3, 4, 4, 8)):
        parents, selected, seq_lens = _tree_inputs(gen, bs, topk, depth, n)
        _, _, index, next_token, sibling = _build(sgl_kernel.build_tree_kernel_efficient_cpu, parents, selected,
                                                  seq_lens, topk, depth, n, 1)
        candidates = torch.randint(0, 3, (bs, n), generator=gen)  # 3 tokens: matches happen often
        target = torch.randint(0, 3, (bs, n), generator=gen)
        steps = depth + 1
        outs = []
        for fn in (sgl_kernel.verify_tree_greedy_cpu, spec_tree.verify_tree_greedy_triton):
            predicts = torch.full((bs * n,), -1, dtype=torch.int64)
            accept_index = torch.full((bs, steps), -1, dtype=torch.int64)
            accept_num = torch.zeros(bs, dtype=torch.int64)
            if fn is sgl_kernel.verify_tree_greedy_cpu:
                fn(predicts=predicts, accept_index=accept_index, accept_token_num=accept_num, candidates=candidates,
                   retrive_index=index, retrive_next_token=next_token, retrive_next_sibling=sibling,
                   target_predict=target)
            else:
                fn(predicts, accept_index, accept_num, candidates, index, next_token, sibling, target)
            outs.append((predicts, accept_index, accept_num))
        same("verify_tree_greedy_cpu", outs[0], outs[1])


def check_reconstruct_indices_from_tree_mask(gen: torch.Generator) -> None:
    for bs, n in ((1, 3), (2, 6), (3, 9)):
        mask = torch.rand((bs, n, n), generator=gen) < 0.5
        mask |= torch.eye(n, dtype=torch.bool)
        mask &= torch.ones(n, n, dtype=torch.bool).tril()
        seq_lens = torch.randint(1, 30, (bs,), generator=gen)
        outs = []
        for fn in (reconstruct_indices_from_tree_mask, reconstruct_tree.reconstruct_indices_from_tree_mask_triton):
            got = tuple(torch.full((bs * n,), -9, dtype=torch.int64) for _ in range(4))
            fn(mask.reshape(-1), seq_lens, *got, bs, n)
            outs.append(got)
        same("reconstruct_indices_from_tree_mask", outs[0], outs[1])


CHECKS = {name[len("check_"):]: fn for name, fn in sorted(globals().items()) if name.startswith("check_")}


def main(names: list[str]) -> int:
    assert getattr(sgl_kernel, "STANDIN", False), "this is not the stand-in"
    for name in names or list(CHECKS):
        gen = torch.Generator().manual_seed(0)
        try:
            for _ in range(ROUNDS):
                CHECKS[name](gen)
        except AssertionError as exc:
            print(f"FAIL {name}: {exc}")
            return 1
        print(f"ok {name}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
