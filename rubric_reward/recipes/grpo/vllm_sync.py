"""Weight sync into a colocated vLLM on CPU, done the way vLLM reloads weights in place.

TRL's colocate sync calls ``model.load_weights([(name, tensor)])`` parameter by parameter. That works while
vLLM's parameters stay as created. vLLM's CPU backend does not keep them: after loading, its linear layers
pack their weights into a kernel's own layout (oneDNN ``onednn_mm`` handlers, or the AMX ``sgl`` kernel on
CPUs with AMX/AVX512-BF16) and replace ``layer.weight`` with an empty ``Parameter`` that has no
``weight_loader``. The next sync then fails with ``'Parameter' object has no attribute 'weight_loader'`` on
machines where vLLM picks those kernels and works where it falls back to ``torch.nn.functional.linear``; and
even a sync that did not fail would leave the packed copy, the one generation reads, stale.

vLLM's own answer is its layerwise reload (what ``GPUModelRunner.reload_weights`` runs): restore each layer's
parameters as created, buffer the loads, then run the layer's post-load processing again (repacking) and put
the result back into the original storage; a tied ``lm_head``, which loads nothing itself, is packed again
from the embedding it shares. :func:`repack_colocated_sync` brackets TRL's sync with it, so the same code path
works on every CPU; on GPUs (where weights are not repacked) nothing changes.
"""

from __future__ import annotations

from typing import Any

__all__ = ["repack_colocated_sync"]


def repack_colocated_sync(trainer: Any) -> bool:
    """Make ``trainer``'s colocated vLLM weight sync repack on CPU; True when it was wrapped."""
    generation = getattr(trainer, "vllm_generation", None)
    if generation is None or getattr(generation, "mode", None) != "colocate":
        return False
    from vllm.platforms import current_platform

    if not current_platform.is_cpu() or getattr(generation.sync_weights, "_repacks", False):
        return False
    from vllm.model_executor.model_loader.reload import finalize_layerwise_reload, initialize_layerwise_reload

    original = generation.sync_weights

    def sync_weights() -> None:
        runner = generation.llm.llm_engine.model_executor.driver_worker.model_runner
        model = runner.get_model()
        initialize_layerwise_reload(model)
        try:
            original()
        finally:
            finalize_layerwise_reload(model, runner.model_config)
            _repack_kept_weights(model)

    sync_weights._repacks = True  # type: ignore[attr-defined]
    generation.sync_weights = sync_weights
    return True


def _repack_kept_weights(model: Any) -> None:
    """Pack again every layer whose kernel copy was made from a weight it still holds.

    The layerwise reload processes each layer whose weights were loaded, but a tied ``lm_head`` loads nothing
    of its own (its weight is the embedding's): its kernel would keep packing the old embedding.
    """
    for layer in model.modules():
        weight = getattr(layer, "weight", None)
        method = getattr(layer, "quant_method", None)
        if hasattr(layer, "cpu_linear") and method is not None and weight is not None and weight.numel() > 0:
            method.process_weights_after_loading(layer)
