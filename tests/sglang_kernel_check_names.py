"""The checks tools/sgl_kernel_cpu/check_against_triton.py runs (that script needs torch and SGLang, which the test environment
has not: the names are kept here for the test that runs it)."""

CHECK_NAMES = ("assign_draft_cache_locs_contiguous", "assign_extend_cache_locs", "assign_req_to_token_pool",
               "build_tree_kernel_efficient", "copy_all_layer_kv_cache", "fill_accept_out_cache_loc",
               "fill_bonus_tokens", "reconstruct_indices_from_tree_mask", "rotate_input_ids", "verify_tree_greedy")
