"""One DP rank's TensorRT-LLM scheduler: the vLLM-shaped core under the capacity policy the
reference runs, GUARANTEED_NO_EVICT (engine.md section "TensorRT-LLM").

The reference (aisimulate-core 0.13.0, engine/scheduler/vllm/policy.rs) shares vLLM's scheduler
core and changes four policy seams, which this class overrides:
- a request's output is clamped at enqueue to what the KV pool can hold after its prompt (and to
  max_model_len); a prompt filling the whole pool can never run and is rejected, as is one whose
  prompt + output (its to-completion footprint) exceeds the pool;
- admission reserves the whole to-completion footprint: a waiting request is admitted only when
  its to-completion blocks, less its active cached prefix, fit the blocks not in use minus what
  every running request (and, on a decode rank, every reserved or activated handoff not yet
  running) still needs to complete; the queue is FCFS, the head waits;
- nothing is ever preempted (the reservation guarantees completion);
- the last prompt token is not recomputed: a fully cached prompt is reused whole, and its first
  token, computed in a pass with no prompt work, is timed as decode;
- a P/D destination gets no prefix credit: it reserves fresh blocks for its whole prompt once
  its to-completion footprint fits.
Everything else (chunked prefill and its token budget, max_num_seqs, the G1 block pool and its
LRU, P/D, the router's events) is vLLM's, in scheduler.Rank.
"""

from __future__ import annotations

from kvreplay.engine.identity import BlockIdentities
from kvreplay.engine.scheduler import Rank, RankStats
from kvreplay.engine.sequence import Seq
from kvreplay.schema.spec import Role


class TrtllmRank(Rank):
    """Rank under GUARANTEED_NO_EVICT."""

    __slots__ = ("capacity_tokens",)
    recompute_last = False

    def __init__(self, cfg: Role, pool_name: str, worker_id: int, dp_rank: int,
                 scheduler_id: int, identities: BlockIdentities, record_events: bool,
                 stats: RankStats) -> None:
        super().__init__(cfg, pool_name, worker_id, dp_rank, scheduler_id, identities,
                         record_events, stats)
        self.capacity_tokens = cfg.num_gpu_blocks * cfg.block_size

    def _clamp(self, seq: Seq) -> bool:
        """Clamp the request's output to what the pool and max_model_len leave after its
        prompt; False when the prompt alone fills the pool."""
        room = self.capacity_tokens - seq.input_length
        if room <= 0:
            return False
        if seq.max_output > room:
            seq.max_output = room
        limit = self.max_model_len
        if limit is not None and seq.max_output > limit - seq.input_length:
            seq.max_output = max(limit - seq.input_length, 0)
        return True

    def _to_completion(self, seq: Seq) -> int:
        return -(-(seq.input_length + seq.max_output) // self.block_size)

    def _available(self) -> int:
        """Blocks not in use, less what running requests and pending handoffs still need to
        complete."""
        free = self.num_blocks - self.pool.num_active()
        for seq in self.running:
            free -= max(self._to_completion(seq) - len(seq.blocks), 0)
        for seq in self.inbound:  # destinations reserved, KV not here yet
            free -= max(self._to_completion(seq) - len(seq.blocks), 0)
        for seq in self.arrived:  # the waiting requests whose KV arrived (materialized)
            free -= max(self._to_completion(seq) - len(seq.blocks), 0)
        return free

    def _never_fits(self, seq: Seq, known_blocks: int) -> bool:
        return not self._clamp(seq) or self._to_completion(seq) > self.num_blocks

    def _must_wait(self, seq: Seq, known_blocks: int, active_hits: int) -> bool:
        held = len(seq.blocks) if seq.blocks else active_hits
        return self._to_completion(seq) - held > self._available()

    def _pick_victim(self) -> Seq | None:
        return None  # the reservation leaves nothing to preempt

    def accepts_destination(self, dseq: Seq) -> bool:
        """A prompt reaching the decode rank's max_model_len fails the handoff."""
        limit = self.max_model_len
        return limit is None or dseq.input_length < limit

    def destination_never_fits(self, dseq: Seq) -> bool:
        return not self._clamp(dseq) or self._to_completion(dseq) > self.num_blocks

    def _destination_credit(self, dseq: Seq) -> int:
        """No prefix credit: fresh blocks for the whole prompt, once the request's
        to-completion footprint fits (-1 while it does not)."""
        return -1 if self._to_completion(dseq) > self._available() else 0
