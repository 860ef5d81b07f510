"""One module per server engine (``sglang``, ``llamacpp``, ``vllm``), each an :class:`~.base.EngineProfile`
registered by name in :mod:`.registry`. ``docs/adding-an-engine.md`` walks through adding one."""
