"""``sgl_kernel.speculative`` stand-in: :func:`reconstruct_indices_from_tree_mask` (see the package docstring)."""

from __future__ import annotations

import torch


def reconstruct_indices_from_tree_mask(tree_mask: torch.Tensor, verified_seq_len: torch.Tensor,
                                       positions: torch.Tensor, retrieve_index: torch.Tensor,
                                       retrieve_next_token: torch.Tensor, retrieve_next_sibling: torch.Tensor,
                                       batch_size: int, draft_token_num: int) -> None:
    """NGRAM verify metadata from a tree mask, in place; the contract stated by
    ``kernels/ops/speculative/reconstruct_tree.py`` (``_reconstruct_tree_mask_kernel``): per batch ``b`` and
    node ``i`` of ``n`` nodes, ``ancestors[i, j] = mask[b, i, j] and j < i``; ``positions = #ancestors +
    verified_seq_len[b]``; ``retrieve_index = b * n + i``; ``parent[i]`` the largest ancestor (or -1); next token
    the smallest ``k > i`` with ``i`` among its ancestors (or -1); next sibling the smallest ``k > i`` with the
    same parent (-1 for a root or none)."""
    n = draft_token_num
    masks = tree_mask.reshape(-1)[: batch_size * n * n].reshape(batch_size, n, n).bool()
    idx = torch.arange(n)
    lower = idx[None, :] < idx[:, None]  # [i, j]: j < i
    for b in range(batch_size):
        ancestors = masks[b] & lower
        out = slice(b * n, (b + 1) * n)
        positions.view(-1)[out] = ancestors.sum(dim=1).to(positions.dtype) + int(verified_seq_len[b])
        retrieve_index.view(-1)[out] = (b * n + idx).to(retrieve_index.dtype)
        parent = torch.where(ancestors, idx[None, :], torch.full_like(ancestors, -1, dtype=torch.long)).amax(dim=1)
        rows = idx[:, None].expand(n, n)
        first_child = torch.where(ancestors, rows, torch.full_like(rows, n)).amin(dim=0)
        next_token = torch.where(first_child < n, first_child, torch.full_like(first_child, -1))
        same_parent = (parent[:, None] == parent[None, :]) & (idx[:, None] > idx[None, :])
        first_sibling = torch.where(same_parent, rows, torch.full_like(rows, n)).amin(dim=0)
        next_sibling = torch.where((parent >= 0) & (first_sibling < n), first_sibling,
                                   torch.full_like(first_sibling, -1))
        retrieve_next_token.view(-1)[out] = next_token.to(retrieve_next_token.dtype)
        retrieve_next_sibling.view(-1)[out] = next_sibling.to(retrieve_next_sibling.dtype)
