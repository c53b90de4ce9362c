"""The probe's vLLM KV connector: hands the states of `extract_hidden_states` to the harness.

vLLM's speculative method `extract_hidden_states` writes the chosen layers' hidden states of
every scheduled token into a cache-only KV layer (one slot per token, `n_states` heads of size
d). A KV connector then sees the finished request's blocks of that layer before they are freed.
vLLM's own example connector copies them with CUDA streams and pinned memory, which fails on
CPU; this one copies them with plain tensor indexing, so it runs wherever the engine runs.

Only requests whose `kv_transfer_params` carry `probe_states` are saved; any other request
passes through untouched (its blocks are freed at once). A saved request gets one file,
`<states_dir>/<request id>.safetensors`, tensor `states` of shape (n_states, keep, d): the last
`keep` prompt positions (the shared continuation) with one layer per row, so the harness
reads one layer at a time. The file is written under a temporary name and renamed: once it
exists it is complete. The harness deletes it after reading.

vLLM loads this class by module path (`KVTransferConfig.kv_connector_module_path`) in its
scheduler and worker processes, so it must stay importable without the rest of the harness.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from vllm.distributed.kv_transfer.kv_connector.v1.base import (
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
    SupportsHMA,
)

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.request import Request

CONNECTOR_NAME = "ProbeStatesConnector"
MARK = "probe_states"  # kv_transfer_params key that asks for a request's states
KEEP = "keep_last"  # kv_transfer_params key: how many final prompt positions to keep
PATH = "states_path"  # key of the file's path in the request output's kv_transfer_params


@dataclass
class _Save:
    req_id: str
    path: str
    block_ids: list[int]
    num_tokens: int  # prompt tokens whose states sit in the blocks
    keep: int


@dataclass
class _Meta(KVConnectorMetadata):
    saves: list[_Save] = field(default_factory=list)


class ProbeStatesConnector(KVConnectorBase_V1, SupportsHMA):
    """Store-only connector: finished probe requests' hidden states -> one file each."""

    def __init__(
        self, vllm_config: VllmConfig, role: KVConnectorRole, kv_cache_config: KVCacheConfig
    ) -> None:
        super().__init__(vllm_config=vllm_config, role=role, kv_cache_config=kv_cache_config)
        self._dir = str(self._kv_transfer_config.get_from_extra_config("states_dir", ""))
        if not self._dir:
            raise ValueError(f"{CONNECTOR_NAME} needs kv_connector_extra_config.states_dir")
        self._group = _states_group(kv_cache_config)
        self._pending: dict[str, _Save] = {}  # scheduler side: finished, not yet sent
        self._cache: torch.Tensor | None = None  # worker side: the cache-only layer
        self._writer = True  # worker side: the one rank that writes (set with the caches)
        self._written: set[str] = set()
        self._finished: set[str] = set()

    # ---------------------------------------------------------------- scheduler side
    def get_num_new_matched_tokens(self, request: Request, num_computed_tokens: int):
        return 0, False  # store-only: nothing is ever loaded

    def update_state_after_alloc(self, request: Request, blocks: Any, num_external_tokens: int):
        pass

    def build_connector_meta(self, scheduler_output: Any) -> KVConnectorMetadata:
        meta = _Meta(saves=list(self._pending.values()))
        self._pending.clear()
        return meta

    def request_finished(self, request: Request, block_ids: list[int]):
        params = request.kv_transfer_params or {}
        if not params.get(MARK):
            return False, None
        total = request.num_prompt_tokens
        keep = min(int(params.get(KEEP) or total), total)
        # request ids are vLLM's own ("<index>-<hex>"); keep the name to safe characters
        name = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in request.request_id)
        path = os.path.join(self._dir, f"{name}.safetensors")
        self._pending[request.request_id] = _Save(
            request.request_id, path, list(block_ids), total, keep
        )
        return True, {PATH: path}  # True: keep the blocks until get_finished reports it

    def request_finished_all_groups(self, request: Request, block_ids: tuple[list[int], ...]):
        if not 0 <= self._group < len(block_ids):
            return False, None  # never scheduled: no blocks, nothing to save
        return self.request_finished(request, block_ids[self._group])

    def get_finished_count(self) -> int:
        return 1  # only one rank writes (see register_kv_caches)

    # ---------------------------------------------------------------- worker side
    def register_kv_caches(self, kv_caches: dict[str, torch.Tensor]) -> None:
        from vllm.config import get_layers_from_vllm_config
        from vllm.distributed.parallel_state import get_pp_group, get_tensor_model_parallel_rank
        from vllm.model_executor.models.extract_hidden_states import CacheOnlyAttentionLayer

        layers = get_layers_from_vllm_config(
            self._vllm_config, CacheOnlyAttentionLayer, list(kv_caches)
        )
        if len(layers) != 1:
            raise ValueError(f"{CONNECTOR_NAME}: expected 1 hidden-state cache, got {len(layers)}")
        self._cache = kv_caches[next(iter(layers))]
        # tensor-parallel ranks hold identical states (after the all-reduce): rank 0 writes;
        # under pipeline parallelism the last stage receives every stage's states
        self._writer = get_tensor_model_parallel_rank() == 0 and get_pp_group().is_last_rank

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        pass

    def wait_for_layer_load(self, layer_name: str) -> None:
        pass

    def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any, **kwargs) -> None:
        pass  # the states are read from the cache once the request has finished

    def wait_for_save(self) -> None:
        pass

    def get_finished(self, finished_req_ids: set[str]):
        if self.has_connector_metadata():
            meta = self._get_connector_metadata()
            for save in getattr(meta, "saves", []):
                if self._writer:
                    self._write(save)
                    self._written.add(save.req_id)
        # a request is reported once the scheduler has told this worker it finished
        self._finished |= finished_req_ids
        done = self._written & self._finished
        self._written -= done
        self._finished -= done
        return done or None, None

    @torch.no_grad()
    def _write(self, save: _Save) -> None:
        """The request's last `keep` positions, layer-major, as one safetensors file."""
        from safetensors.torch import save_file

        assert self._cache is not None
        cache = self._cache  # (blocks, n_states, block_size, d)
        block_size = cache.shape[2]
        blocks = torch.tensor(save.block_ids, dtype=torch.long)
        slots = (blocks[:, None] * block_size + torch.arange(block_size)).flatten()
        slots = slots[save.num_tokens - save.keep : save.num_tokens].to(cache.device)
        states = cache[slots // block_size, :, slots % block_size]  # (keep, n_states, d)
        states = states.transpose(0, 1).contiguous().cpu()  # (n_states, keep, d)
        os.makedirs(os.path.dirname(save.path), exist_ok=True)
        temporary = save.path + ".tmp"
        save_file({"states": states}, temporary)
        os.replace(temporary, save.path)

    @classmethod
    def get_required_kvcache_layout(cls, vllm_config: VllmConfig) -> str | None:
        return "LBNHC"  # (blocks, layers, block_size, heads...): one token's states together


def _states_group(kv_cache_config: KVCacheConfig | None) -> int:
    """Index of the KV cache group that holds the hidden-state cache layer."""
    if kv_cache_config is None:
        return 0
    from vllm.v1.kv_cache_interface import HiddenStateCacheSpec

    groups = kv_cache_config.kv_cache_groups
    found = [i for i, g in enumerate(groups) if isinstance(g.kv_cache_spec, HiddenStateCacheSpec)]
    if len(found) == 1:
        return found[0]
    if not found and len(groups) == 1:
        return 0
    raise ValueError(f"{CONNECTOR_NAME}: no unique hidden-state cache group in {len(groups)}")
