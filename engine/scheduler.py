"""One DP rank's vLLM-shaped scheduler: what a single engine pass does (engine.md section 2).

A pass at time `now`, with a token budget of max_num_batched_tokens:
1. running requests in order each schedule their next chunk (rest of the known sequence, i.e.
   a prompt chunk or the one dangling decode token); when KV cannot grow, the newest (LIFO) or
   oldest (FIFO) running request is preempted: it drops all its blocks and goes back to the
   front of the waiting queue;
2. unless something was preempted, waiting requests are admitted in FCFS order while
   running < max_num_seqs: reject if the prompt reaches max_model_len or can never fit the pool,
   wait if the whole known sequence does not fit the blocks not in use, else take a chunk;
3. every request whose known sequence is fully computed emits a token (or ends without one
   when it has nothing left to generate).
All state changes happen here, at pass start, as in the reference; the worker stamps tokens
and terminals at pass end. Full blocks enter the prefix cache as soon as a pass schedules their
last token, so a later request in the same pass already hits them (checked against the reference).
"""

from __future__ import annotations

from collections import deque
from itertools import islice
from typing import TYPE_CHECKING

from kvreplay.engine.host_client import DEFER, DEFERRED, MISS, QUEUED, RETRY
from kvreplay.engine.identity import ROOT, BlockIdentities
from kvreplay.engine.kv_groups import GroupedKv
from kvreplay.engine.pool import BlockPool
from kvreplay.engine.records import Admission
from kvreplay.engine.sequence import PREEMPTED, RUNNING, WAITING, Seq
from kvreplay.engine.simtime import ns_to_ms
from kvreplay.engine.speculation import emit_speculative, rank_sampler
from kvreplay.engine.state_cache import WorkingStates, state_blocks
from kvreplay.engine.timing import PassTimer
from kvreplay.engine.unit_pages import UnitPages
from kvreplay.schema.spec import Role

if TYPE_CHECKING:
    from kvreplay.engine.host_client import HostClient


SCHEDULED, BLOCKED, CURRENT_PREEMPTED = 0, 1, 2
DECODE_TOKEN = (1, 0, 0)  # a scheduled decode step: (tokens used, prompt tokens, prompt before)


class PassOutcome:
    """What one worker pass produced, delivered at its end."""

    __slots__ = ("accepted", "bursts", "changes", "finished", "forwards", "held", "rejected",
                 "tokens")

    def __init__(self) -> None:
        self.tokens: list[Seq] = []  # visible tokens, in emission order
        self.bursts: list[tuple[Seq, int]] = []  # MTP ranks: (request, visible tokens) instead
        self.finished: list[Seq] = []  # completed requests (after their last token, if any)
        self.rejected: list[Seq] = []
        self.held: list[Seq] = []  # P/D prefill side: prompt done, source KV held
        self.changes = 0  # tokens computed, admissions, preemptions, emissions
        self.forwards = 0  # decode steps of requests (a first token rides its prefill)
        self.accepted = 0  # MTP: the accepted drafts those steps emitted beside their token

    def effective(self) -> bool:
        """False for a pass that changed nothing (the worker then sleeps until poked)."""
        return bool(self.changes or self.tokens or self.finished or self.rejected or self.held)


class RankStats:
    __slots__ = ("committed_prompt_tokens", "preemptions")

    def __init__(self) -> None:
        self.committed_prompt_tokens = 0
        self.preemptions = 0


class Rank:
    """Scheduler state of one (worker, dp_rank)."""

    # vLLM recomputes the last prompt token of a request that needs logits (TRT-LLM does not).
    recompute_last = True
    group = None  # no state shared by the worker's ranks (ranks.PassGroup)
    # Scheduler cache-hit tokens are an SGLang figure: vLLM-shaped ranks report none.
    cache_hit_tokens = 0
    cache_total_tokens = 0

    __slots__ = (
        "_budget",
        "_capacity_bound",
        "_defer",
        "_front_max",
        "_last_used",
        "_preempted",
        "_prefill_isl",
        "_prefill_prefix",
        "_prefill_tokens",
        "_prefills",
        "_retry_skipped",
        "_scheduled",
        "_serial",
        "_unsorted",
        "arrived",
        "block_size",
        "budget",
        "caching",
        "capacity_gen",
        "chunked",
        "compute_not_before",
        "connector",
        "dp_rank",
        "fast_decode",
        "fpm",
        "groups",
        "holding",
        "host",
        "identities",
        "inbound",
        "is_decode",
        "is_prefill",
        "lifo",
        "max_model_len",
        "max_seqs",
        "mtp",
        "mtp_prefix",
        "next_order",
        "num_blocks",
        "pages",
        "pending",
        "pool",
        "pool_name",
        "preemptions",
        "retry_due",
        "running",
        "scheduler_id",
        "state_blocks",
        "states",
        "stats",
        "timer",
        "waiting",
        "worker_id",
    )

    def __init__(self, cfg: Role, pool_name: str, worker_id: int, dp_rank: int,
                 scheduler_id: int, identities: BlockIdentities, record_events: bool,
                 stats: RankStats) -> None:
        self.pool_name = pool_name
        self.worker_id = worker_id
        self.dp_rank = dp_rank
        self.scheduler_id = scheduler_id
        self.identities = identities
        self.stats = stats
        self.block_size = cfg.block_size
        self.num_blocks = cfg.num_gpu_blocks
        self.budget = cfg.max_num_batched_tokens
        self.max_seqs = cfg.max_num_seqs
        self.max_model_len = cfg.max_model_len
        self.caching = cfg.enable_prefix_caching
        self.chunked = cfg.enable_chunked_prefill
        self.lifo = cfg.preemption_mode == "lifo"
        self.is_prefill = cfg.name == "prefill"
        self.is_decode = cfg.name == "decode"
        self.timer = PassTimer(cfg)
        # MTP (speculation.py): the rank's draft sampler, and vLLM's MTP prefix rule (a
        # prefix hit gives back its last block, whose hidden states the drafter needs).
        self.mtp = rank_sampler(cfg, scheduler_id)
        self.mtp_prefix = self.mtp is not None and cfg.backend == "vllm"
        self.pool = BlockPool(cfg.num_gpu_blocks, record_events and self.caching)
        self._hybrid(cfg, identities)
        self.running: list[Seq] = []
        self.waiting: deque[Seq] = deque()
        self._queues()
        # P/D decode with G2: a copy completion seen while destinations wait moves the capacity
        # generation and makes the rank due for a reservation retry; any retry clears it, and
        # an idle worker with a rank still due runs an (empty) pass whose end retries.
        self.retry_due = False
        # G2 (set up by the loop when the role has native_host_offload): the rank's pool
        # membership, the connector-waiting queue (vLLM's skipped_waiting: requests whose
        # restore is queued, deferred or done, tried before ordinary waiting ones), and the
        # earliest time this rank may compute (private D2H copies still reading its capacity).
        self.host: HostClient | None = None
        self.connector: list[Seq] = []
        self.compute_not_before = 0
        self._retry_skipped: list[Seq] = []
        # The requests the pass being planned scheduled: (tokens, prompt tokens, prompt before).
        # Decode steps of the fast path are not entered (a miss reads DECODE_TOKEN) unless
        # something reads the whole dict (G2's stores, scaling's metrics, MTP): each such
        # request carries the pass's serial instead (Seq.decoded_at), so a pass costs no dict
        # write or read per decoding request.
        self._scheduled: dict[Seq, tuple[int, int, int]] = {}
        self._serial = 0  # this rank's passes so far (Seq.decoded_at)
        self._capacity_bound = False  # the last undeferred pass left requests waiting
        self.preemptions = 0  # this rank's (telemetry reports them per interval)
        self._defer = False  # this pass defers prefill work (DP cadence)
        # Scaling (scaling_metrics.py): what the pass being planned scheduled (each request,
        # its known length, its (tokens, prompt tokens, prompt before)), when captured.
        self.fpm: list[tuple[Seq, int, tuple[int, int, int]]] | None = None
        self.holding = 0  # P/D prefill: sources held until their release (a drain waits)
        self.inbound: list[Seq] = []  # P/D decode: reserved destinations whose KV is in transfer

    def _queues(self) -> None:
        """The waiting queue's P/D decode state, beside `waiting`."""
        self.pending: deque[Seq] = deque()  # P/D decode: destinations waiting for blocks
        # P/D decode: acceptance counter (Seq.waiting_order), and the capacity generation: a
        # pending destination is tried once per generation, which moves when capacity may have
        # improved (a request finishes or is rejected holding blocks, a preemption, a G2 copy
        # letting go of G1 blocks).
        self.next_order = 0
        self.capacity_gen = 0
        # The waiting queue's front that may be out of acceptance order (preempted requests,
        # destinations placed among them; its length, exact): behind it the queue is in
        # waiting_order. _front_max bounds the front's waiting_order from above (-1: empty).
        self._unsorted = 0
        self._front_max = -1
        # P/D decode: the waiting requests whose KV arrived (materialized), in queue order: a
        # second queue beside `waiting`, so nothing looks through preempted ones to find them.
        self.arrived: deque[Seq] = deque()

    def _hybrid(self, cfg: Role, identities: BlockIdentities) -> None:
        """Hybrid KV (state_cache.py): each request's working state, beside its token blocks.
        Decode steps inside a request's last block skip the general path, except on a rank
        whose states are checkpointed (a step may first have to preserve a checkpoint)."""
        self.state_blocks = state_blocks(cfg)
        # A match unit under prefix caching aligns states to block slots; one below the block
        # also lets hits end inside a block, at a page cached under a unit alias.
        unit = cfg.prefix_match_unit
        align = self.block_size if self.caching and unit else 0
        self.states = WorkingStates(self.pool, self.state_blocks, self.caching,
                                    identities, align) if self.state_blocks else None
        self.pages = (UnitPages(self.pool, identities, self.block_size, unit)
                      if self.states is not None and align and unit and unit < self.block_size
                      else None)
        self.fast_decode = self.states is None or not self.caching
        # KV cache groups (kv_groups.py): a byte budget of page ranges instead of blocks; every
        # step takes the general path (its pages are checked per group).
        self.groups = GroupedKv(
            cfg, f"role {cfg.name}, worker {self.worker_id}, DP rank {self.dp_rank}",
        ) if cfg.kv_cache_groups is not None else None
        if self.groups is not None:
            self.fast_decode = False

    def kv_gauges(self) -> tuple[int, int]:
        """Blocks in use and cached-but-reusable blocks (telemetry): with KV cache groups, the
        pages held (every group's) and none."""
        if self.groups is not None:
            return self.groups.pages, 0
        pool = self.pool
        return pool.n_copies - pool.idle, pool.idle

    def queued_gauge(self) -> int:
        """The waiting queue and the G2 connector's (telemetry)."""
        return len(self.waiting) + len(self.connector)

    def has_work(self) -> bool:
        return bool(self.running or self.waiting) or (
            bool(self.connector) and self.connector_ready())

    # -- the seam (ranks.RankScheduler) --------------------------------------------------------

    def take_events(self) -> list[tuple[int, int]]:
        return self.pool.take_events()

    def drop(self, seq: Seq) -> None:
        if seq.blocks:
            self._release(seq)

    def release_source(self, seq: Seq) -> None:
        self._release(seq)

    def _release(self, seq: Seq, preempted: bool = False) -> None:
        """Give back a request's blocks (and its state, on a hybrid rank; its pages, with KV
        cache groups)."""
        if self.groups is not None:
            self.groups.release(seq)
        if self.states is not None:
            if preempted:
                self.states.preempt(seq)
            else:
                self.states.release(seq)
        self.pool.release(seq.blocks)
        seq.blocks = []

    def accepts_destination(self, dseq: Seq) -> bool:
        """A prompt reaching the decode rank's max_model_len fails the handoff (probed on the
        reference: the request ends `failed` at the prefill's end, its session with it)."""
        limit = self.max_model_len
        return limit is None or dseq.input_length < limit

    def destination_never_fits(self, dseq: Seq) -> bool:
        return -(-dseq.input_length // self.block_size) > self.num_blocks

    def destination_blocked(self) -> bool:
        return len(self.running) >= self.max_seqs

    def connector_ready(self) -> bool:
        """A connector waiter that is not sleeping on transfer progress."""
        return any(not seq.sleeping for seq in self.connector)

    # -- one pass --------------------------------------------------------------------------------

    def plan(self, now_ns: int, outcome: PassOutcome, throttle: bool = False) -> int:
        """Run this rank's part of a pass starting at now_ns; return its duration (ns).

        `throttle`: an off-cadence pass of an attention-DP worker (vLLM's DP prefill
        balancing): unless the last undeferred pass without a preemption left requests
        waiting, a rank with a decoding request defers prefill work this pass: running prompts
        pause, and admission stops at the first waiting request that would compute more than
        one token (rejections, materialized handoffs and fully cached prompts still go through;
        checked against the reference)."""
        defer = throttle and not self._capacity_bound and any(
            s.computed >= s.input_length for s in self.running)
        self._defer = defer
        if self.states is not None:
            self.states.begin_step()
        self._prefill_tokens = 0
        self._prefill_isl = 0
        self._prefill_prefix = 0
        self._prefills = 0
        self._preempted = False
        self._serial += 1
        self._budget = self._schedule_running(outcome, defer)
        host = self.host
        if host is not None:
            if not self._preempted:
                self._admit_waiting_host(now_ns, outcome, host)
            host.observe_stores(self._scheduled)
        elif not self._preempted:
            self._admit_waiting(now_ns, outcome)
        if not defer and not self._preempted:
            self._capacity_bound = bool(self.waiting)
        prefill_ns = 0
        n = self._prefills
        if n:
            # The reference sizes the batch as n requests of mean (integer) length and prefix.
            mean_new = self._prefill_isl // n - self._prefill_prefix // n
            prefill_ns = self.timer.prefill_ns(n * mean_new)
        self.stats.committed_prompt_tokens += self._prefill_tokens
        if self.fpm is not None:
            self.fpm = [(q, q.input_length + q.generated, entry)
                        for q, entry in self._scheduled.items()]
        compute_ns = prefill_ns + self._emit(outcome)
        # Emptied, not replaced: no per-pass dict, and no reference to a request (and through
        # it back to this rank) outliving the pass, so a finished run is freed without the
        # cyclic collector.
        self._scheduled.clear()
        if self.compute_not_before > now_ns:  # the pass waits for the D2H copies it needs
            return self.compute_not_before - now_ns + compute_ns
        return compute_ns

    def decode_passes(self, first: int, count: int, interval: int, waited: bool) -> None:
        """`count` pure decode passes ran at once (a fast-forwarded stretch), the first of
        them the worker's pass `first` (DP cadence `interval`), each seeing requests waiting
        or not (`waited`: none could be admitted, and what arrived during the stretch ended
        it): what plan() would have left of the cadence state. The first undeferred pass
        sets _capacity_bound for good."""
        if self._capacity_bound or interval <= 1 or count >= interval or (
                first % interval == 0 or (first + count - 1) // interval > first // interval):
            self._capacity_bound = waited

    def _schedule_running(self, outcome: PassOutcome, defer: bool) -> int:
        """Step 1: the running requests' next chunks, in order; return the budget left."""
        running = self.running
        bs = self.block_size
        scheduled = self._scheduled  # empty between passes
        caching = self.caching
        budget = self._budget = self.budget
        serial = self._serial
        listed = self.host is not None or self.fpm is not None or self.mtp is not None
        # Fast path, over the leading run of decoding requests whose next token fits their
        # last block (the general loop below takes over at the first other one).
        fast = self.fast_decode
        cursor = 0
        for seq in running:
            generated = seq.generated
            computed = seq.computed
            if (not fast or budget <= 0 or not generated
                    or computed != seq.input_length + generated - 1
                    or computed >= len(seq.blocks) * bs):
                break
            computed += 1
            seq.computed = computed
            if caching and computed % bs == 0:
                self.register_through(seq, computed // bs)
            budget -= 1
            seq.decoded_at = serial
            if listed:
                scheduled[seq] = DECODE_TOKEN
            cursor += 1
        decoded = cursor
        while cursor < len(running) and budget > 0:
            seq = running[cursor]
            computed = seq.computed
            if defer and computed < seq.input_length:
                cursor += 1  # a prompt chunk waits for the cadence
                continue
            # The same fast path for the requests after it.
            if (seq.generated and computed == seq.input_length + seq.generated - 1
                    and computed < len(seq.blocks) * bs and fast):
                computed += 1
                seq.computed = computed
                if caching and computed % bs == 0:
                    self.register_through(seq, computed // bs)
                budget -= 1
                seq.decoded_at = serial
                if listed:
                    scheduled[seq] = DECODE_TOKEN
                decoded += 1
                cursor += 1
                continue
            self._budget = budget
            result = self._schedule(seq, 0, outcome)
            budget = self._budget
            if result == SCHEDULED:
                cursor += 1
            elif result == BLOCKED:
                break
            # CURRENT_PREEMPTED: the list shifted onto the next request
        outcome.changes += decoded
        return budget

    def _admit_waiting(self, now_ns: int, outcome: PassOutcome) -> None:
        running = self.running
        waiting = self.waiting
        bs = self.block_size
        while not self._preempted and len(running) < self.max_seqs and waiting:
            # While a destination waits for blocks, a decode rank admits only handoffs whose
            # KV already arrived; otherwise FCFS (activated handoffs re-enter the queue by
            # acceptance order, a preempted request at the front; as the reference).
            prefer_materialized = bool(self.pending)
            seq = self._next_waiting(prefer_materialized)
            if seq is None:
                break
            if self.max_model_len is not None and seq.input_length >= self.max_model_len:
                self._reject(seq, outcome, "max_model_len", self.max_model_len)
                continue
            cached = 0
            if self.groups is not None:
                # KV cache groups: a fresh request whose last token alone needs more than the
                # budget is rejected; the rest wait only when their chunk does not fit (_schedule).
                if seq.pool_admissions == 0 and self.groups.never_fits(
                        seq.input_length + seq.generated):
                    self._reject(seq, outcome, "kv_cache", self.groups.capacity)
                    continue
            elif not seq.materialized:
                known = seq.input_length + seq.generated
                known_blocks = -(-known // bs)
                if seq.pool_admissions == 0 and self._never_fits(seq, known_blocks):
                    self._reject(seq, outcome, "kv_cache", self._token_room())
                    continue
                active_hits = 0
                if self.caching:
                    cached, active_hits = self._prompt_hit(seq, known)
                if cached and self.states is not None:
                    # Restoring a checkpoint pins it while the new working state is written
                    # (an aligned checkpoint still in use costs nothing more; a unit hit also
                    # pins the page it copies).
                    known_blocks, active_hits = self._restore_charge(seq, cached, known_blocks,
                                                                     active_hits)
                    # (a readmission too when its hit ends inside a block: match-unit seed 391)
                    if ((seq.pool_admissions == 0 or cached % bs)
                            and self._never_fits(seq, known_blocks)):
                        self._reject(seq, outcome, "kv_cache", self._token_room())
                        continue
                if self._must_wait(seq, known_blocks, active_hits):
                    break  # wait for capacity
                if self._defer and known - cached > 1:
                    break  # more than the last token of prefill waits for the cadence
            if not self._admit(seq, cached, now_ns, outcome):
                break

    def _prompt_hit(self, seq: Seq, known: int) -> tuple[int, int]:
        """The cached prefix a waiting request takes: (tokens, of its blocks active)."""
        bs = self.block_size
        pool = self.pool
        hits, active_hits = pool.lookup(seq.block_ids, known // bs)
        cap_tokens = known
        if self.recompute_last and seq.generated < seq.max_output:
            # needs logits: recompute the last token
            cap_tokens = known - 1
            cap = (known - 1) // bs
            if hits > cap:
                hits = cap
            if self.mtp_prefix and hits:  # and MTP the last hit block (ref)
                hits -= 1
            if active_hits > hits:
                active_hits = hits
        if self.pages is not None:
            return self._unit_hit(seq, hits, cap_tokens)
        if self.states is not None and hits:
            # Hybrid KV: the hit ends at the longest prefix with a checkpoint; the active blocks
            # counted are the hit's own (not those of a tail the caps dropped).
            hits = self.states.restorable(seq.block_ids, hits)
            active_hits = pool.lookup(seq.block_ids, hits)[1]
        return hits * bs, active_hits

    def _unit_hit(self, seq: Seq, hits: int, cap: int) -> tuple[int, int]:
        """_prompt_hit with a match unit below the block (unit_pages.py): the longest kept
        state within the cached prefix, at a block boundary or a unit alias inside a block
        (the one after the `hits` cached blocks included), at most `cap` prompt tokens."""
        states, pages = self.states, self.pages
        assert states is not None and pages is not None
        bs = self.block_size
        ids = seq.block_ids
        cap = min(cap, seq.input_length)
        end = 0
        for j in range(hits, -1, -1):
            end = pages.hit(seq, j, cap, states.has_snapshot)
            if end:
                break
            if j and states.has_snapshot(ids[j - 1]):
                end = j * bs
                break
        return end, self.pool.lookup(ids, end // bs)[1]

    def _boundary(self, seq: Seq, cached: int) -> int:
        """The key of the checkpoint a hit of `cached` tokens restores."""
        bs = self.block_size
        if cached % bs == 0:
            return seq.block_ids[cached // bs - 1]
        assert self.pages is not None
        return self.pages.alias_of(seq, cached)

    def _restore_charge(self, seq: Seq, cached: int, known_blocks: int,
                        active_hits: int) -> tuple[int, int]:
        """Admission's count of a restore: its checkpoint (the part not in use) and, for a hit
        ending inside a block, the page it copies (probed: a prompt of 4 blocks, a 1-block
        state and a 10-token unit hit is rejected by a 6-block pool, runs in 7)."""
        states = self.states
        assert states is not None
        boundary = self._boundary(seq, cached)
        known_blocks += self.state_blocks
        active_hits += states.active_source(boundary)
        if cached % self.block_size:
            assert self.pages is not None
            known_blocks += 1
            if self.pages.page_active(boundary):
                active_hits += 1
        return known_blocks, active_hits

    def _never_fits(self, seq: Seq, known_blocks: int) -> bool:
        """A fresh request the pool can never hold (rejected)."""
        return known_blocks + self.state_blocks > self.num_blocks

    def _must_wait(self, seq: Seq, known_blocks: int, active_hits: int) -> bool:
        """The known sequence, less its active cached prefix, does not fit the blocks not in
        use: the request (and every one behind it) waits."""
        return (known_blocks + self.state_blocks - active_hits
                > self.num_blocks - self.pool.num_active())

    def _admit(self, seq: Seq, cached: int, now_ns: int, outcome: PassOutcome) -> bool:
        """Schedule an accepted waiting request's first chunk; False stops admitting."""
        if self._schedule(seq, cached, outcome) != SCHEDULED:
            return False
        self._record_admission(seq, now_ns, cached)
        outcome.changes += 1
        return not (self._last_used == 0 and self._budget == 0)

    def _admit_waiting_host(self, now_ns: int, outcome: PassOutcome, host: HostClient) -> None:
        """_admit_waiting with a G2 pool (engine.md section 3; vLLM's connector-waiting flow).

        Connector waiters that are not sleeping go first. A fresh request looks the pool up
        after its raw G1 hit; a host hit that passes the admission check starts a restore and
        waits; an activated request (its restore completed) is admitted with the restored
        prefix. Lookups change LRU recency, so none happens without budget left.
        """
        self._retry_skipped = []
        while not self._preempted and len(self.running) < self.max_seqs and self._budget > 0:
            seq = self._host_candidate()
            if seq is None:
                break
            if self.max_model_len is not None and seq.input_length >= self.max_model_len:
                self._reject(seq, outcome, "max_model_len", self.max_model_len)  # before G2
                continue
            if not self._admit_host(seq, now_ns, outcome, host):
                break
        if self._retry_skipped:
            connector = self.connector
            for seq in reversed(self._retry_skipped):
                connector.remove(seq)
                connector.insert(0, seq)
                seq.sleeping = False
            self._retry_skipped = []

    def _host_candidate(self) -> Seq | None:
        """The next request to try with G2; None: admission stops for this pass.

        A decode rank with G2 serves handoffs whose KV already arrived before other waiting
        requests (vLLM's skipped_waiting first), so a restore waiting for capacity cannot
        starve them; they go before connector waiters too, and while a destination waits for
        blocks only they are admitted (checked against the reference).

        With G3 below, a connector waiter that holds G1 destination blocks (its restore
        queued or done) goes before everything else, so a request ahead of it waiting for
        that capacity cannot hold it forever (the reference's `g1_owner`, vllm/core.rs).
        """
        host = self.host
        if host is not None and host.g3 is not None:
            for candidate in self.connector:
                if not candidate.sleeping and (candidate.load is not None
                                               or candidate.activated):
                    return candidate
        waiting = self.waiting
        prefer_materialized = bool(self.pending) or (self.is_decode and bool(self.arrived))
        seq = self._next_waiting(True) if prefer_materialized and waiting else None
        if seq is not None:
            return seq
        if self.pending:
            return None
        for candidate in self.connector:
            if not candidate.sleeping:
                return candidate
        return waiting[0] if waiting else None

    def _admit_host(self, seq: Seq, now_ns: int, outcome: PassOutcome,
                    host: HostClient) -> bool:
        """One admission attempt with G2 (a lookup, a restore, or the admission itself);
        False stops admitting this pass."""
        bs = self.block_size
        known = seq.input_length + seq.generated
        known_blocks = -(-known // bs)
        hit_base = hit_blocks = raw = 0
        reserved = 0
        active_hits = 0
        cached = 0
        if not seq.materialized:
            if seq.activated:
                # The restored prefix is frozen: further G1 hits count as new tokens.
                cached = seq.loaded_prefix * bs
                reserved = seq.loaded_prefix
                active_hits = seq.loaded_prefix
            else:
                hits, active_hits = self.pool.lookup(seq.block_ids, known // bs)
                raw = hits * bs
                found, hit_base, hit_blocks = host.lookup(seq, raw)
                if found == DEFER:
                    host.pool.stats.restores_deferred += 1
                    self._skip(seq, until_progress=True)
                    return True
                if seq.pool_admissions == 0 and known_blocks > self.num_blocks:
                    # A prompt the pool can never hold is rejected after its G2 lookup (which
                    # touched the host LRU, or deferred it behind a pending store) (ref).
                    self._reject(seq, outcome, "kv_cache", self._token_room())
                    return True
                if found == MISS:
                    hit_blocks = 0
                cached = raw
            if seq.generated < seq.max_output:  # needs logits: recompute the last token
                cap = (known - 1) // bs * bs
                if cached > cap:
                    cached = cap
                if active_hits * bs > cached:
                    active_hits = cached // bs
            available = self.num_blocks - self.pool.num_active()
            if hit_blocks:
                available -= self._inflight_prefill_blocks()
            if known_blocks - (active_hits if active_hits > reserved else reserved) > available:
                return False  # wait for capacity
        if hit_blocks:
            return self._start_restore(seq, host, hit_base, hit_blocks, raw, now_ns, outcome)
        if self._defer and not seq.materialized and known - cached > 1:
            return False  # more than the last token of prefill waits for the cadence
        return self._admit(seq, cached, now_ns, outcome)

    def _start_restore(self, seq: Seq, host: HostClient, hit_base: int, hit_blocks: int,
                       raw: int, now_ns: int, outcome: PassOutcome) -> bool:
        """A host hit the admission check accepted: the request waits for its restore in the
        connector queue; False stops admitting this pass (no G1 room for the destination)."""
        started = host.start_load(seq, hit_base, hit_blocks, raw, now_ns)
        if started == QUEUED:
            outcome.changes += 1
            self._skip(seq, until_progress=True)
        elif started == DEFERRED:
            self._skip(seq, until_progress=True)
        elif started == RETRY:  # ready again once this pass ends
            self._skip(seq, until_progress=False)
        else:
            return False  # CAPACITY_BLOCKED
        return True

    def _skip(self, seq: Seq, until_progress: bool) -> None:
        """Park a request in the connector queue, asleep for the rest of this pass (and, when
        `until_progress`, until a transfer of the rank's pool completes)."""
        if not seq.in_connector:
            self._take_waiting(seq)
            self.connector.append(seq)
            seq.in_connector = True
        seq.sleeping = True
        host = self.host
        if host is not None:
            seq.slept_at = host.serial
        if not until_progress:
            self._retry_skipped.append(seq)

    def _inflight_prefill_blocks(self) -> int:
        """Blocks running prefills and restores will still need (vLLM's
        _inflight_prefill_reserved_blocks): a host hit must leave room for them."""
        bs = self.block_size
        total = 0
        for seq in self.running:
            if seq.computed < seq.input_length:
                left = -(-(seq.input_length + seq.generated) // bs) - len(seq.blocks)
                if left > 0:
                    total += left
        for seq in self.connector:
            if seq.load is not None or seq.activated:
                left = -(-(seq.input_length + seq.generated) // bs) - seq.loaded_prefix
                if left > 0:
                    total += left
        return total

    def _next_waiting(self, prefer_materialized: bool) -> Seq | None:
        if not prefer_materialized:
            return self.waiting[0]
        arrived = self.arrived
        return arrived[0] if arrived else None

    def _record_admission(self, seq: Seq, now_ns: int, cached: int) -> None:
        rec = seq.rec
        at_ms = ns_to_ms(now_ns)
        pool_ordinal = seq.pool_admissions
        seq.pool_admissions += 1
        g1: int | None = None
        host: int | None = None
        if self.host is not None:
            # Attribution (first admission in a pool with G2 only, as the reference reports
            # it): G1 = min(the raw G1 hit before the restore, reused), host = the rest.
            if seq.activated:
                g1 = seq.orig_g1_tokens if seq.orig_g1_tokens < cached else cached
                seq.store_cursor = cached // self.block_size
                seq.activated = False
            else:
                g1 = cached
            host = cached - g1
            g3 = self.host.g3_reused(seq, host)
            if pool_ordinal > 0:
                g1 = host = None
            elif not rec.admission_history:
                rec.first_admission_g1_reused_input_tokens = g1
                rec.first_admission_host_reused_input_tokens = host
                rec.first_admission_g3_reused_input_tokens = g3
        note_admission(seq, self.pool_name, self.is_decode, at_ms, pool_ordinal, cached, g1,
                       host)

    def _schedule(self, seq: Seq, cached: int, outcome: PassOutcome) -> int:
        """Schedule seq's next chunk (running or being admitted); see the module docstring."""
        bs = self.block_size
        from_waiting = seq.status != RUNNING
        before = seq.computed if seq.computed else cached
        known = seq.input_length + seq.generated
        remaining = known - before
        prompt_before = before if before < seq.input_length else seq.input_length
        prompt_left = seq.input_length - prompt_before
        if not self.chunked and prompt_left > 0 and prompt_left > self._budget:
            return BLOCKED
        desired = remaining if remaining < self._budget else self._budget
        if desired == 0 and remaining > 0:
            return BLOCKED
        target = self._aligned(seq, before, before + desired, known)
        # Aligned states: a chunk computing nothing waits the pass, taking no state or blocks.
        if target == before < known:
            return BLOCKED
        states = self.states
        if not from_waiting and self._outgrown(seq, target):
            self._reject_running(seq, outcome)
            return CURRENT_PREEMPTED  # the running list shifted onto the next request
        status, target = self._take(seq, cached, before, target, outcome)
        if status != SCHEDULED:
            return status
        used = target - before
        if used == 0 and target < known:
            return BLOCKED
        seq.computed = target
        if self.caching and target // bs > seq.registered:
            self.register_through(seq, target // bs)
        if states is not None:
            self._commit_state(seq, target)
        prompt_after = target if target < seq.input_length else seq.input_length
        prompt_tokens = prompt_after - prompt_before
        self._scheduled[seq] = (used, prompt_tokens, prompt_before)
        if prompt_tokens > 0:
            self._count_prefill(used, prompt_after, prompt_before)
        if from_waiting:
            self.unqueue(seq)
            seq.status = RUNNING
            self.running.append(seq)
        self._budget -= used
        self._last_used = used
        outcome.changes += used
        return SCHEDULED

    def _count_prefill(self, used: int, prompt_after: int, prompt_before: int) -> None:
        """A chunk that computes prompt tokens: committed prefill (the whole chunk, recomputed
        output included) and, off a decode worker, the pass's prefill timing inputs."""
        self._prefill_tokens += used
        if not self.is_decode:  # a decode worker's recompute is not timed as prefill
            self._prefills += 1
            self._prefill_isl += prompt_after
            self._prefill_prefix += prompt_before

    def _aligned(self, seq: Seq, before: int, target: int, known: int) -> int:
        """Aligned states (a match unit of the block size): where the chunk ends, after the
        request gives back the blocks its previous slot held."""
        states = self.states
        if states is None or not states.align:
            return target
        states.release_previous(seq)
        bs = self.block_size
        unit = self.pages.unit if self.pages is not None else 0
        return _aligned_end(before, target, known, seq.input_length, bs, self.budget < bs,
                            unit)

    def _outgrown(self, seq: Seq, target: int) -> bool:
        """Hybrid KV: the known sequence's blocks, the state and the copy the next step needs
        can never fit the pool (never without a state cache)."""
        states = self.states
        if states is None:
            return False
        known_blocks = -(-(seq.input_length + seq.generated) // self.block_size)
        return known_blocks + self.state_blocks + states.needs(seq, target) > self.num_blocks

    def _state_short(self, seq: Seq, target: int) -> bool:
        """Hybrid KV: computing through `target` first needs state blocks (new, or a copy)."""
        return self.states is not None and self.states.needs(seq, target) > 0

    def _commit_state(self, seq: Seq, target: int) -> None:
        """Hybrid KV: the pass computes seq's state through `target`; on a block boundary with
        prefix caching it publishes a checkpoint of that block's prefix."""
        assert self.states is not None
        bs = self.block_size
        boundary = seq.block_ids[target // bs - 1] if self.caching and target % bs == 0 else None
        # Aligned states: only the start of the block holding the prompt's last token keeps a
        # checkpoint (a readmitted request's outputs included), and with a unit below the
        # block the prompt's last unit boundary inside it (its page cached under an alias).
        if (boundary is not None and self.states.align
                and target // bs != (seq.input_length - 1) // bs):
            boundary = None
        pages = self.pages
        if (pages is not None and target % bs and target == pages.last_unit(seq.input_length)
                and seq in self.states.held):
            boundary = pages.publish(seq, target)
        self.states.commit(seq, target, boundary)

    def _grow(self, seq: Seq, need: int, cached: int, target: int) -> bool:
        """Allocate blocks up to `need` (a fresh admission first takes its cached prefix), and
        on a hybrid rank the state the computation through `target` needs."""
        pool = self.pool
        states = self.states
        if states is not None:
            return self._grow_hybrid(seq, need, cached, target, states)
        if not seq.blocks and cached:
            hit_ids = seq.block_ids[:cached // self.block_size]
            fresh = need - len(hit_ids)
            if not pool.can_allocate(fresh, hit_ids):
                return False
            pool.acquire_hits(hit_ids, seq.blocks)
            seq.registered = len(hit_ids)
        else:
            fresh = need - len(seq.blocks)
            if not pool.can_allocate(fresh, []):
                return False
        if pool.pending is None:
            pool.allocate(fresh, seq.blocks)
            return True
        # Private G2: capacity whose old contents a D2H copy still reads is written only after
        # that copy completes; the whole pass waits (checked against the reference).
        pending = pool.pending
        for store_id in pool.allocate_tracked(fresh, seq.blocks):
            deadline = pending[store_id]
            if deadline > self.compute_not_before:
                self.compute_not_before = deadline
        return True

    def _take(self, seq: Seq, cached: int, before: int, target: int,
              outcome: PassOutcome) -> tuple[int, int]:
        """Take what computing seq through `target` needs (blocks and a state, or pages of KV
        cache groups), preempting as it must: (SCHEDULED, the target reached: `before` when
        nothing could be taken) or (BLOCKED or CURRENT_PREEMPTED, target)."""
        if self.groups is not None:
            from_waiting = seq.status != RUNNING
            return self._grow_grouped(seq, before, target, from_waiting, outcome), target
        need = -(-target // self.block_size)
        while need > len(seq.blocks) or self._state_short(seq, target):
            if self._grow(seq, need, cached, target):
                break
            victim = self._pick_victim()
            if victim is None:
                return SCHEDULED, before
            self._preempt(victim, outcome)
            if victim is seq:
                return CURRENT_PREEMPTED, target
        return SCHEDULED, target

    def _grow_grouped(self, seq: Seq, before: int, target: int, from_waiting: bool,
                      outcome: PassOutcome) -> int:
        """KV cache groups: take the pages computing [before, target) needs, preempting running
        requests as the block pool does; a waiting request never preempts (BLOCKED: it waits)."""
        groups = self.groups
        assert groups is not None
        while not groups.grow(seq, before, target):
            if from_waiting:
                return BLOCKED
            victim = self._pick_victim()
            if victim is None:
                return BLOCKED
            self._preempt(victim, outcome)
            if victim is seq:
                return CURRENT_PREEMPTED
        return SCHEDULED

    def _grow_hybrid(self, seq: Seq, need: int, cached: int, target: int,
                     states: WorkingStates) -> bool:
        """_grow on a hybrid rank (G1 only): the token blocks, plus a new working state (a
        restored one pins its checkpoint while it is copied) or a copy preserving the
        published checkpoint, all or nothing."""
        pool = self.pool
        extra = states.needs(seq, target)
        pinned: list[int] = []
        if not seq.blocks and cached:
            hit_ids = seq.block_ids[:cached // self.block_size]
            fresh = need - len(hit_ids)
            boundary = self._boundary(seq, cached)
            keys = states.keys[boundary]
            pages = self.pages
            # a hit inside a block also pins that page (copied into a new block), held with
            # the checkpoint until the request's next allocation (or its end)
            page = [pages.page_key(boundary)] if pages is not None and cached % self.block_size \
                else []
            if not pool.can_allocate(fresh + extra, hit_ids + keys + page):
                return False
            pool.acquire_hits(hit_ids, seq.blocks)
            pool.acquire_hits(keys + page, pinned)
            seq.registered = len(hit_ids)
        else:
            fresh = max(need - len(seq.blocks), 0)
            if not pool.can_allocate(fresh + extra, []):
                return False
        pool.allocate(fresh, seq.blocks)
        if seq in states.held:
            states.prepare_write(seq, target)
        else:
            states.take(seq, cached, target, pinned)
        return True

    # -- P/D destinations (handoff.py) -------------------------------------------------------

    def reserve_destination(self, dseq: Seq) -> int:
        """Reserve a destination's prompt blocks, reusing a resident prefix: the fresh blocks it
        took, or -1 when they do not fit now."""
        pool = self.pool
        need = -(-dseq.input_length // self.block_size)
        hits = self._destination_credit(dseq)
        if hits < 0:
            return -1
        hit_ids = dseq.block_ids[:hits]
        fresh = need - hits
        if not pool.can_allocate(fresh, hit_ids):
            return -1
        pool.acquire_hits(hit_ids, dseq.blocks)
        if pool.pending is not None and pool.allocate_tracked(fresh, dseq.blocks):
            # Handoff KV is never received into capacity a D2H copy still reads: cancel, and
            # retry once the rank sees the copy complete (checked against the reference).
            pool.release(dseq.blocks)
            dseq.blocks = []
            return -1
        if pool.pending is None:
            pool.allocate(fresh, dseq.blocks)
        dseq.registered = hits
        self.inbound.append(dseq)
        return fresh

    def _destination_credit(self, dseq: Seq) -> int:
        """The resident prefix blocks a destination reuses (-1: it may not reserve now)."""
        return self.pool.lookup(dseq.block_ids, len(dseq.block_ids))[0] if self.caching else 0

    def activate_destination(self, dseq: Seq) -> None:
        """The destination's KV arrived: its blocks become prefix hits, and it waits for
        admission with its prompt computed, by acceptance order: ahead of any request the rank
        accepted later (a preempted one included), behind the rest."""
        if self.caching:
            full = dseq.input_length // self.block_size
            if full > dseq.registered:
                self.register_through(dseq, full)
        dseq.computed = dseq.input_length
        dseq.materialized = True
        dseq.status = WAITING
        self.inbound.remove(dseq)
        order = dseq.waiting_order
        waiting = self.waiting
        arrived = self.arrived
        front = self._unsorted
        if self._front_max > order:  # the front may hold a request accepted later: look
            most = -1
            ahead = 0  # arrived requests before the place found
            for i, queued in enumerate(islice(waiting, front)):
                if queued.waiting_order > order:
                    waiting.insert(i, dseq)
                    arrived.insert(ahead, dseq)
                    self._unsorted = front + 1
                    return
                if queued.waiting_order > most:
                    most = queued.waiting_order
                if queued.materialized:
                    ahead += 1
            self._front_max = most
        # No request at the front goes after it: its place in the ordered rest, from the back
        # (the arrived requests after it are all there, in the same order).
        at = len(waiting)
        while at > front and waiting[at - 1].waiting_order > order:
            at -= 1
        waiting.insert(at, dseq)
        at = len(arrived)
        while at and arrived[at - 1].waiting_order > order:
            at -= 1
        arrived.insert(at, dseq)

    def register_through(self, seq: Seq, full: int) -> None:
        ids = seq.block_ids
        pool = self.pool
        for k in range(seq.registered, full):
            if k == len(ids):
                known = None
                output = seq.req.output
                if output is not None:
                    known = self.identities.block_at(seq.req.prompt + output, k,
                                                     self.block_size, ids[k - 1] if k else ROOT)
                ids.append(self.identities.fresh() if known is None else known)
            handle = seq.blocks[k]
            if pool.ident[handle] is not None:  # a page cached under a unit alias fills
                assert self.pages is not None
                self.pages.filled(handle, ids[k])
            pool.register(handle, ids[k])
        seq.registered = full

    # The hooks of a backend-independent emission step (speculation.emit_speculative).
    def pick_victim(self) -> Seq | None:
        return self._pick_victim()

    def preempt(self, victim: Seq, outcome: PassOutcome) -> None:
        self._preempt(victim, outcome)

    def finish(self, seq: Seq, outcome: PassOutcome) -> None:
        self._finish(seq, outcome)

    def reject_running(self, seq: Seq, outcome: PassOutcome) -> None:
        self._reject_running(seq, outcome)

    def _pick_victim(self) -> Seq | None:
        if not self.running:
            return None
        return self.running[-1] if self.lifo else self.running[0]

    def _preempt(self, victim: Seq, outcome: PassOutcome) -> None:
        latest = victim.latest_store
        # A private store still copying the victim's blocks fences this pass's compute.
        if (latest is not None and not latest.done and latest.deadline is not None
                and latest.deadline > self.compute_not_before):
            self.compute_not_before = latest.deadline
        # The cursor is not moved back when the victim came before it (FIFO): the request
        # after the current one then waits for the next pass (checked against the reference).
        self.running.remove(victim)
        self._preempted = True
        undone = self._scheduled.pop(victim, None)
        if undone is None and victim.decoded_at == self._serial:
            undone = DECODE_TOKEN
        victim.decoded_at = -1
        if undone is not None:
            used, prompt_tokens, prompt_before = undone
            self._budget += used
            if prompt_tokens > 0:
                self._prefill_tokens -= used
                if not self.is_decode:
                    self._prefills -= 1
                    self._prefill_isl -= prompt_before + prompt_tokens
                    self._prefill_prefix -= prompt_before
        self._release(victim, preempted=True)
        victim.registered = 0
        victim.computed = 0
        victim.materialized = False
        victim.status = PREEMPTED
        self.waiting.appendleft(victim)
        self._unsorted += 1
        if victim.waiting_order > self._front_max:
            self._front_max = victim.waiting_order
        self.stats.preemptions += 1
        self.preemptions += 1
        self.capacity_gen += 1
        outcome.changes += 1

    def unqueue(self, seq: Seq) -> None:
        """Take a request out of the connector queue or the waiting queue, wherever it is."""
        if seq.in_connector:
            self.connector.remove(seq)
            seq.in_connector = False
            seq.sleeping = False
        else:
            self._take_waiting(seq)

    def _take_waiting(self, seq: Seq) -> None:
        """Take a request out of the waiting queue (and the arrived one), keeping the front's
        length exact. An admitted request is usually the head, or the first behind the
        front (an arrived one behind preempted requests): found without a search."""
        waiting = self.waiting
        front = self._unsorted
        if waiting[0] is seq:
            waiting.popleft()
            if front:
                self._unsorted = front - 1
        elif front < len(waiting) and waiting[front] is seq:
            del waiting[front]
        else:
            at = waiting.index(seq)
            del waiting[at]
            if at < front:
                self._unsorted = front - 1
        if not self._unsorted:
            self._front_max = -1
        if seq.materialized:
            arrived = self.arrived
            if arrived[0] is seq:
                arrived.popleft()
            else:
                arrived.remove(seq)

    def _reject(self, seq: Seq, outcome: PassOutcome, reason: str, limit: int) -> None:
        seq.rec.rejection = (reason, limit)
        self.unqueue(seq)
        if seq.blocks:  # a P/D destination already holding its transferred prompt
            self.capacity_gen += 1
            self._release(seq)
        seq.status = WAITING
        outcome.rejected.append(seq)

    def _finish(self, seq: Seq, outcome: PassOutcome) -> None:
        self.capacity_gen += 1
        if seq.hidden:
            outcome.held.append(seq)  # the source KV stays until the decode side has it
        else:
            self._release(seq)
            outcome.finished.append(seq)

    def _emit(self, outcome: PassOutcome) -> int:
        if self.mtp is not None:
            return emit_speculative(self, self.mtp, outcome)
        running = self.running
        done: list[Seq] = []  # ended without a token (nothing left to generate)
        ending: list[Seq] = []  # emit their last token
        limit = self.max_model_len
        # The decode batch: requests that already emitted (a first token is part of the
        # prefill's forward), plus every request on a decode worker. Its total sequence length
        # sizes the polynomial decode time (checked against the reference).
        is_decode = self.is_decode
        # A first token whose prompt was wholly cached (no last-token recompute: TRT-LLM) rides
        # a pass that computed no prompt tokens for it: it is timed as decode.
        cached_prompts = not self.recompute_last
        scheduled = self._scheduled
        serial = self._serial
        tokens = outcome.tokens
        decoders = forwards = active = emitted = 0
        for seq in running:
            generated = seq.generated
            known = seq.input_length + generated
            if seq.computed < known:
                continue
            # Tokens left to generate: the requested output, capped by max_model_len.
            left = seq.max_output - generated
            if limit is not None and limit - known < left:
                left = limit - known if limit - known > 0 else 0
            if left == 0:
                done.append(seq)
                continue
            emitted += 1
            if generated or is_decode or (
                    cached_prompts and scheduled.get(seq, DECODE_TOKEN)[1] == 0):
                decoders += 1
                active += known
                # A decode forward computes no prompt token (a recomputed prompt is a prefill).
                if (not generated or seq.decoded_at == serial
                        or scheduled.get(seq, DECODE_TOKEN)[1] == 0):
                    forwards += 1
            # It emits its token; one that reaches its output length (or max_model_len) ends.
            seq.generated = generated + 1
            if not seq.hidden:
                tokens.append(seq)
            if left == 1:
                ending.append(seq)
        if not emitted and not done:
            return 0
        decode_ns = 0
        if decoders and not self.is_prefill:
            decode_ns = self.timer.decode_ns(active)
            outcome.forwards += forwards
        if done or ending:
            self._end_all(done, ending, outcome)
        return decode_ns

    def _end_all(self, done: list[Seq], ending: list[Seq], outcome: PassOutcome) -> None:
        """The requests a pass ended: those without a token first, then those whose last
        token it emitted, each in running order; they leave the running list."""
        for seq in done:
            self._finish(seq, outcome)
        for seq in ending:
            self._finish(seq, outcome)
        running = self.running
        if (len(done) + len(ending)) * 16 < len(running):
            # A few of a large batch (an overloaded rank ends one or two a pass): taken out
            # one by one, without a set and a new list per pass.
            for seq in done:
                running.remove(seq)
            for seq in ending:
                running.remove(seq)
            return
        gone = set(done)
        gone.update(ending)
        self.running = [s for s in running if s not in gone]

    def _reject_running(self, seq: Seq, outcome: PassOutcome) -> None:
        """Hybrid KV: a running request whose known sequence, working state and the copy its
        next step needs can never fit the pool is rejected when a pass would compute it,
        keeping the tokens it emitted (as the reference)."""
        self.running.remove(seq)
        seq.rec.rejection = ("kv_cache", self._token_room())
        self.capacity_gen += 1
        self._release(seq)
        seq.status = WAITING
        outcome.rejected.append(seq)
        outcome.changes += 1

    def _token_room(self) -> int:
        """Tokens the pool holds beside one working state (all of it without a state cache)."""
        return (self.num_blocks - self.state_blocks) * self.block_size


def note_admission(seq: Seq, pool_name: str, is_decode: bool, at_ms: float, pool_ordinal: int,
                   cached: int, g1: int | None, host: int | None) -> None:
    """Record an admission of seq into a rank of pool `pool_name` (every backend's)."""
    rec = seq.rec
    rec.admission_history.append(Admission(
        admission_ordinal=len(rec.admission_history),
        pool=pool_name,
        pool_admission_ordinal=pool_ordinal,
        at_ms=at_ms,
        reused_input_tokens=cached,
        g1_reused_input_tokens=g1,
        host_reused_input_tokens=host,
        is_readmission=pool_ordinal > 0,
    ))
    if rec.first_admit_ms is None:
        rec.first_admit_ms = at_ms
    # The best prompt reuse outside the decode pool. A readmission may also hit its own
    # output blocks; the reference counts those too, kvreplay counts input tokens only.
    reused = cached if cached < seq.input_length else seq.input_length
    if is_decode:
        if rec.decode_reused_input_tokens is None or reused > rec.decode_reused_input_tokens:
            rec.decode_reused_input_tokens = reused
    elif reused > rec.reused_input_tokens:
        rec.reused_input_tokens = reused
    if pool_ordinal > 0:
        rec.readmission_count += 1
    elif pool_name == "prefill":
        rec.prefill_admit_ms = at_ms
    elif pool_name == "decode":
        rec.decode_admit_ms = at_ms


def _aligned_end(before: int, target: int, known: int, prompt: int, bs: int,
                 small_budget: bool, unit: int = 0) -> int:
    """Where a chunk of aligned states ends (the reference's block-aligned split, derived in
    tests/differential/test_match_unit_reference.py): while prefilling, a chunk stopping short
    of the sequence's last whole block (a fresh prompt's last unit boundary, with a unit below
    the block) ends on a block boundary (when that computes nothing, the request is not
    scheduled in this pass, unless the whole budget is below a block: then it stays
    unaligned), and the one crossing that block boundary ends on it, then the one crossing the
    prompt's last unit boundary on that. A chunk after a hit inside a block ends at that
    block's end first. A readmitted request's recompute cut one token short of its known
    sequence, a whole number of blocks, stays unaligned (hybrid seeds 2180, 2888, 2892), and
    is not cut at the prompt's last unit boundary (match-unit seed 253)."""
    if before >= max(prompt, known - 1):
        return target
    last_block = known - known % bs
    if before % bs and target > before - before % bs + bs:
        return before - before % bs + bs  # after a hit inside a block: to its end first
    last_unit = prompt - prompt % unit if unit and known == prompt else last_block
    if target < last_unit:
        if target == known - 1 >= prompt:
            return target  # a recompute one token short of its whole blocks: left unaligned
        end = target // bs * bs
        if end > before:
            return end
        return target if small_budget else before
    if before < last_block < target:
        return last_block
    if before < last_unit < target:
        return last_unit
    return target
