"""A pure-torch stand-in for the ``sgl_kernel`` CPU operations SGLang 0.5.23 imports under ``if _is_cpu:``.

A test fixture (see ../README.md): SGLang's CPU kernel package is on no registry, so these functions let SGLang's
own server run on a CPU-only test machine. Each follows the Triton kernel that plays the same role in the same
SGLang file (named in its docstring), including which arguments it changes in place. The Intel AMX backend's
``build_draft_decode_metadata_cpu`` and ``convert_weight_packed`` are left out on purpose: without them SGLang
picks its ``torch_native`` attention backend and native torch layers.
"""

from __future__ import annotations

import ctypes

import torch

from sgl_kernel import speculative  # noqa: F401 - ``from sgl_kernel.speculative import ...`` needs the submodule

STANDIN = True
"""Marks this package as the test stand-in (the real one has no such name)."""


def _segments(start_offset: torch.Tensor, end_offset: torch.Tensor) -> list[tuple[int, int, int]]:
    """(start, end, output offset) per request: each request's output starts after every earlier request's
    ``end - start`` tokens (the Triton kernels' masked ``tl.sum(end - start)`` over ``pid``'s predecessors)."""
    out: list[tuple[int, int, int]] = []
    offset = 0
    for start, end in zip(start_offset.tolist(), end_offset.tolist()):
        out.append((int(start), int(end), offset))
        offset += int(end) - int(start)
    return out


def assign_req_to_token_pool_cpu(req_pool_indices: torch.Tensor, req_to_token: torch.Tensor,
                                 start_offset: torch.Tensor, end_offset: torch.Tensor, out_cache_loc: torch.Tensor,
                                 pool_len: int) -> None:
    """``srt/mem_cache/allocation.py`` ``assign_req_to_token_pool``: request ``i``'s row of ``req_to_token``
    gets, from column ``start[i]`` to ``end[i]``, the next ``end[i] - start[i]`` entries of ``out_cache_loc``."""
    del pool_len  # the row length; the tensor knows it
    for pid, (start, end, offset) in enumerate(_segments(start_offset, end_offset)):
        if end > start:
            row = int(req_pool_indices[pid])
            req_to_token[row, start:end] = out_cache_loc[offset:offset + end - start].to(req_to_token.dtype)


def assign_extend_cache_locs_cpu(req_pool_indices: torch.Tensor, req_to_token: torch.Tensor,
                                 start_offset: torch.Tensor, end_offset: torch.Tensor, out_cache_loc: torch.Tensor,
                                 pool_len: int) -> None:
    """``kernels/ops/speculative/cache_locs.py`` ``assign_extend_cache_locs``: the reverse of the above, request
    ``i``'s ``req_to_token`` entries from ``start[i]`` to ``end[i]`` copied, packed, into ``out_cache_loc``."""
    del pool_len
    for pid, (start, end, offset) in enumerate(_segments(start_offset, end_offset)):
        if end > start:
            row = int(req_pool_indices[pid])
            out_cache_loc[offset:offset + end - start] = req_to_token[row, start:end].to(out_cache_loc.dtype)


def assign_draft_cache_locs_contiguous_cpu(req_pool_indices: torch.Tensor, req_to_token: torch.Tensor,
                                           seq_lens: torch.Tensor, out_cache_loc: torch.Tensor, pool_len: int,
                                           topk: int, speculative_num_steps: int) -> None:
    """``kernels/ops/speculative/cache_locs.py`` ``assign_draft_cache_locs_contiguous``: request ``i``'s
    ``topk * steps`` slots from its ``seq_lens[i]`` on, copied to ``out_cache_loc[i * topk * steps:]``."""
    del pool_len
    width = topk * speculative_num_steps
    for pid in range(seq_lens.shape[0]):
        start = int(seq_lens[pid])
        row = int(req_pool_indices[pid])
        out_cache_loc[pid * width:(pid + 1) * width] = req_to_token[row, start:start + width].to(out_cache_loc.dtype)


def fill_bonus_tokens_cpu(accept_tokens: torch.Tensor, accept_lens: torch.Tensor, bonus_tokens: torch.Tensor,
                          accept_stride: int) -> None:
    """``kernels/ops/speculative/eagle.py`` ``fill_bonus_tokens``: each request's last accepted token (its
    ``accept_lens`` counts the bonus token, so it sits at ``accept_lens - 1`` of the request's row)."""
    flat = accept_tokens.reshape(-1)
    for pid in range(accept_lens.shape[0]):
        bonus_tokens[pid] = flat[accept_stride * pid + int(accept_lens[pid]) - 1]


def fill_accept_out_cache_loc_cpu(accept_index: torch.Tensor, out_cache_loc: torch.Tensor,
                                  accept_out_cache_loc: torch.Tensor) -> None:
    """``kernels/ops/speculative/eagle.py`` ``fill_accept_out_cache_loc``: the cache slots of the accepted
    positions (``accept_index`` entries other than -1, in order), packed into ``accept_out_cache_loc``."""
    dst = 0
    for src in accept_index.reshape(-1).tolist():
        if src > -1:
            accept_out_cache_loc[dst] = out_cache_loc[int(src)]
            dst += 1


def copy_all_layer_kv_cache_cpu(data_ptrs: torch.Tensor, strides: torch.Tensor, tgt_loc: torch.Tensor,
                                src_loc: torch.Tensor) -> None:
    """``kernels/ops/kvcache/cache_move.py`` ``copy_all_layer_kv_cache_tiled``: in each buffer (one raw data
    pointer and its row size in bytes per layer), rows ``src_loc`` copied onto rows ``tgt_loc``; every source row
    is read before any is written, so an overlapping move is safe."""
    if tgt_loc.numel() == 0:
        return
    rows = max(int(tgt_loc.max()), int(src_loc.max())) + 1
    src, tgt = src_loc.long(), tgt_loc.long()
    for pointer, stride in zip(data_ptrs.tolist(), strides.tolist()):
        raw = (ctypes.c_uint8 * (rows * int(stride))).from_address(int(pointer))
        view = torch.frombuffer(raw, dtype=torch.uint8).view(rows, int(stride))
        view[tgt] = view[src].clone()


def rotate_input_ids_cpu(input_ids: torch.Tensor, extend_start_loc: torch.Tensor, extend_seq_lens: torch.Tensor,
                         topk_index: torch.Tensor, select_index: torch.Tensor | None) -> None:
    """``kernels/ops/speculative/multi_layer_eagle.py`` ``rotate_input_ids_kernel``: each request's extend
    segment shifted left by one, its new token written at its last position (or at ``select_index[i]``)."""
    for pid in range(extend_seq_lens.shape[0]):
        start, length = int(extend_start_loc[pid]), int(extend_seq_lens[pid])
        if length <= 0:
            continue
        input_ids[start:start + length - 1] = input_ids[start + 1:start + length].clone()
        last = int(select_index[pid]) if select_index is not None else start + length - 1
        input_ids[last] = topk_index.reshape(-1)[pid]


def _find(selected: list[int], token: int, limit: int) -> int:
    """The first position ``< limit`` of ``token`` in a request's selected indices, or -1."""
    for position in range(limit):
        if selected[position] == token:
            return position
    return -1


def build_tree_kernel_efficient_cpu(parent_list: torch.Tensor, selected_index: torch.Tensor,
                                    verified_seq_len: torch.Tensor, tree_mask: torch.Tensor, positions: torch.Tensor,
                                    retrieve_index: torch.Tensor, retrieve_next_token: torch.Tensor,
                                    retrieve_next_sibling: torch.Tensor, topk: int, depth: int, draft_token_num: int,
                                    tree_mask_mode: int) -> None:
    """``kernels/ops/speculative/spec_tree.py`` ``sgl_build_tree_kernel_efficient_triton``: an EAGLE draft tree's
    positions, retrieve links and attention mask, in place (modes FULL_MASK = 0 and QLEN_ONLY = 1, as the Triton
    twin; the bit-packed mode 2 is refused as there)."""
    if int(tree_mask_mode) == 2:
        raise NotImplementedError("QLEN_ONLY_BITPACKING is not supported by the sgl_kernel stand-in")
    n = draft_token_num
    mask, pos = tree_mask.view(-1), positions.view(-1)
    index, next_tokens, siblings = retrieve_index.view(-1), retrieve_next_token.view(-1), retrieve_next_sibling.view(-1)
    parents = parent_list.reshape(parent_list.shape[0], -1).tolist()
    selected_rows = selected_index.reshape(selected_index.shape[0], -1).tolist()
    prefix = 0
    for b, seq_len in enumerate(int(v) for v in verified_seq_len.tolist()):
        selected, parent_row, row = selected_rows[b], parents[b], b * n
        seq_tree_idx = n * n * b + prefix * n
        prefix += seq_len
        pos[row] = seq_len
        for i in range(n - 1, 0, -1):
            index[row + i] = row + i
            parent_tb = selected[i - 1] // topk
            parent_position = 0
            if parent_tb != 0:
                found = _find(selected, parent_row[parent_tb], n - 1)
                if found < 0:
                    continue
                parent_position = found + 1
            first = int(next_tokens[row + parent_position])
            next_tokens[row + parent_position] = i
            if first != -1:
                siblings[row + i] = first
        index[row] = row
        for token in range(n):
            if int(tree_mask_mode) == 0:
                tree_idx = seq_tree_idx + (seq_len + n) * token + seq_len + 1
            else:
                tree_idx = n * n * b + n * token + 1
            mask[tree_idx - 1] = True
            mask[tree_idx:tree_idx + n - 1] = False
            if token == 0:
                continue
            current, position = token - 1, 0
            for _ in range(depth):
                position += 1
                mask[tree_idx + current] = True
                parent_tb = selected[current] // topk
                if parent_tb == 0:
                    break
                current = _find(selected, parent_row[parent_tb], n - 1)
                if current < 0:
                    break
            pos[row + token] = position + seq_len


def verify_tree_greedy_cpu(predicts: torch.Tensor, accept_index: torch.Tensor, accept_token_num: torch.Tensor,
                           candidates: torch.Tensor, retrive_index: torch.Tensor, retrive_next_token: torch.Tensor,
                           retrive_next_sibling: torch.Tensor, target_predict: torch.Tensor) -> None:
    """``kernels/ops/speculative/spec_tree.py`` ``verify_tree_greedy_kernel_triton``: walk each request's draft
    tree from its root, at each level accepting the first child (then its siblings) whose token is the target's
    greedy token there; writes the accepted path's indices, their count and the target's tokens, in place."""
    steps = accept_index.shape[1]
    n = candidates.shape[1]
    out, accepted_at = predicts.view(-1), accept_index.view(-1)
    target_flat, tokens = target_predict.reshape(-1), candidates.reshape(-1)
    index, next_tokens, siblings = retrive_index.reshape(-1), retrive_next_token.reshape(-1), retrive_next_sibling.reshape(-1)
    for b in range(candidates.shape[0]):
        last = int(index[b * n])
        accepted_at[b * steps] = last
        accepted, current = 0, 0
        for _ in range(1, steps):
            current = int(next_tokens[b * n + current])
            target = int(target_flat[last])
            matched = False
            while current != -1:
                if int(tokens[b * n + current]) == target:
                    out[last] = target
                    accepted += 1
                    last = int(index[b * n + current])
                    accepted_at[b * steps + accepted] = last
                    matched = True
                    break
                current = int(siblings[b * n + current])
            if not matched:
                break
        accept_token_num[b] = accepted
        out[last] = target_flat[last]
