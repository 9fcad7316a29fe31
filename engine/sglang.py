"""One DP rank's SGLang scheduler, as the reference models it (engine.md section "SGLang").

The reference (ai-dynamo 1.6.1, aisimulate-core 0.13.0: engine/scheduler/sglang/{core,prefill,
decode,policy,config}.rs over engine/kv_manager/sglang_backend.rs and engine/cache/
radix_cache.rs) re-implements SGLang's `Scheduler.get_next_batch_to_run`. A pass at time T:
1. waiting requests whose prompt reaches max_model_len are rejected (terminal at the pass end);
   P/D decode: activated handoffs move to running while slots last (admissions reusing 0);
2. `lpm` reorders the waiting queue (up to 128 requests) by cached prefix, longest first, after
   those whose first 32 tokens duplicate an earlier waiting request's (deprioritized);
3. unless handoffs wait to run or a destination waits for blocks, or the prefill/decode
   interval defers prefill, a prefill batch is formed: waiting requests in order while running
   slots last, each matching its sequence against the radix tree once (at most len - 1 tokens
   when it must produce a token), taking a chunk of what it lacks (the rest when it fits the
   chunk budget left once rounded up to whole pages, else the whole pages of it that fit),
   charged in whole pages against the chunk budget
   (`chunked_prefill_size`), the prefill budget (`max_prefill_tokens`) and the total budget:
   free + evictable tokens minus every running request's remaining output (clipped at
   `clip_max_new_tokens`) times `new_token_ratio`, a request whose prompt completes also
   reserving its own clipped output; the first budget it would exceed ends the batch;
4. a pass that formed a batch runs only that batch ("prefill first"): running requests do not
   decode, requests whose prompt completed get their first token from the prefill forward (a
   request finishing with it gets no KV slot), an unfinished chunk goes back to the head of the
   waiting queue, and every request of the batch that goes on has its complete pages inserted
   in the tree (SGLang's cache_unfinished_req); it lasts the prefill time;
5. else running requests decode one token each: while their growth does not fit free +
   evictable pages and more than one runs, the one with the fewest output tokens is retracted
   (its pages beyond its cached prefix freed, requeued at the back), `new_token_ratio` is then
   re-estimated from the survivors; cached pages are evicted for what free pages lack; it lasts
   the decode time; without a retraction `new_token_ratio` decays by one step toward its floor.
A finished request inserts its complete pages in the tree and unlocks its path; a P/D prefill
request holds them (the source) until the handoff releases it. Every token of a running request
has a KV slot (`seq.computed` counts them all: no dangling token, unlike vLLM's).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from kvreplay.engine.identity import ROOT, BlockIdentities
from kvreplay.engine.radix import RadixCache
from kvreplay.engine.scaling_metrics import DECODE_STEP
from kvreplay.engine.scheduler import PassOutcome, RankStats, note_admission
from kvreplay.engine.sequence import RUNNING, WAITING, Seq
from kvreplay.engine.simtime import ns_to_ms
from kvreplay.engine.speculation import rank_sampler
from kvreplay.engine.timing import PassTimer
from kvreplay.schema.spec import Role, SglangOptions

if TYPE_CHECKING:
    from kvreplay.engine.host_client import HostClient
    from kvreplay.engine.speculation import MtpSampler

# engine/scheduler/sglang/config.rs and decode.rs of the reference (SGLang's own defaults).
INIT_NEW_TOKEN_RATIO = 0.7
MIN_NEW_TOKEN_RATIO_FACTOR = 0.14
NEW_TOKEN_RATIO_DECAY_STEPS = 600.0
RETRACT_DECODE_STEPS = 20
LPM_FALLBACK_THRESHOLD = 128
IN_BATCH_PREFIX_CHECK = 32  # tokens: a cached prefix this short is checked for duplicates
IN_BATCH_PREFIX_DEPRIORITIZE = 32  # tokens of prompt compared for duplicates
IDLE_RESETS_RATIO = False
DP_CONSERVATIVENESS = 0.3  # schedule_conservativeness factor with attention DP (server_args)


class SglangGroup:
    """The DP ranks of one SGLang worker: they share the prefill/decode interval countdown.

    After a pass in which some rank computed prompt tokens, `prefill_decode_interval` passes
    defer prefill (no admission, no chunk continuation); every other pass counts one down. A
    deferred round in which no rank has a request to decode is retried at once (the reference's
    same-timestamp countdown), so it takes no time."""

    __slots__ = ("drained_at", "interval", "prefilled", "ranks", "rounds")

    def __init__(self, interval: int) -> None:
        self.interval = interval
        self.rounds = 0
        self.prefilled = False
        self.drained_at = -1
        self.ranks: list[SglangRank] = []

    def begin(self, now_ns: int) -> None:
        self.prefilled = False
        if self.drained_at >= 0:
            if now_ns > self.drained_at:
                self.rounds = 0  # idled through (see drained)
            self.drained_at = -1
        if self.rounds and not any(rank.running or rank.ready for rank in self.ranks):
            # Idle deferred rounds run at once: one with a rejection to make is a pass of no
            # duration (it counts down); the others change nothing and are skipped.
            if IDLE_RESETS_RATIO:
                for rank in self.ranks:
                    rank.ratio = rank.init_ratio
            if not any(rank.rejects() for rank in self.ranks):
                self.rounds = 0

    def retry(self) -> bool:
        if not self.rounds:
            return False
        self.rounds -= 1
        return True

    def drained(self, at_ns: int) -> None:
        # A worker left with nothing to do idles through its deferred rounds (checked against
        # the reference: a request arriving later is not deferred); one arriving at the same
        # instant still meets them (sglang seed 461: its rejection is a pass of no duration).
        self.drained_at = at_ns

    def end(self, passes: int) -> None:
        if passes == 1 and self.prefilled:
            self.rounds = self.interval
        else:
            self.rounds = self.rounds - passes if self.rounds > passes else 0
        self.prefilled = False


class SglangRank:
    """Scheduler state of one SGLang (worker, dp_rank): queues, radix cache, admission ratio."""

    # Telemetry: the reference's SGLang samples count no retraction as a preemption (probed).
    preemptions = 0
    retracts = True  # a retracted request waits with its tokens (scaling_metrics._queued)

    __slots__ = (
        "block_size",
        "budget",
        "cache",
        "cache_hit_tokens",
        "cache_total_tokens",
        "caching",
        "capacity_gen",
        "chunk_size",
        "chunked",
        "clip",
        "compute_not_before",
        "connector",
        "dp_rank",
        "fpm",
        "group",
        "holding",
        "host",
        "identities",
        "inbound",
        "init_ratio",
        "is_decode",
        "is_prefill",
        "lpm",
        "max_model_len",
        "max_prefill",
        "max_seqs",
        "min_ratio",
        "mtp",
        "next_order",
        "num_blocks",
        "pending",
        "pool_name",
        "ratio",
        "ratio_step",
        "ready",
        "retry_due",
        "running",
        "scheduler_id",
        "stats",
        "timer",
        "waiting",
        "worker_id",
    )

    def __init__(self, cfg: Role, pool_name: str, worker_id: int, dp_rank: int,
                 scheduler_id: int, identities: BlockIdentities, record_events: bool,
                 stats: RankStats, group: SglangGroup) -> None:
        self.pool_name = pool_name
        self.worker_id = worker_id
        self.dp_rank = dp_rank
        self.scheduler_id = scheduler_id
        self.identities = identities
        self.stats = stats
        self.group = group
        self.block_size = cfg.block_size
        self.num_blocks = cfg.num_gpu_blocks
        self.budget = cfg.max_num_batched_tokens  # read by the router queue only
        self.max_seqs = cfg.max_num_seqs
        self.max_model_len = cfg.max_model_len
        self.caching = cfg.enable_prefix_caching
        self.chunked = True  # the reference refuses SGLang without chunked prefill
        self.is_prefill = cfg.name == "prefill"
        self.is_decode = cfg.name == "decode"
        # MTP (the decode step's bursts, as the reference's SGLang decode draws them).
        self.mtp: MtpSampler | None = rank_sampler(cfg, scheduler_id)
        # The scheduler seam's scaling fields: the policy's forward-pass metrics, the held P/D
        # sources, and (P/D decode) the reserved destinations whose KV has not arrived (their
        # prefill running or their transfer in flight): queued decode work for the metrics, and
        # what keeps a draining worker (scaling_metrics.py, fleet.idle).
        self.fpm: list[tuple[Seq, int, tuple[int, int, int]]] | None = None
        self.holding = 0
        self.inbound: list[Seq] = []
        options = cfg.sglang or SglangOptions()
        self.lpm = options.schedule_policy == "lpm"
        self.max_prefill = options.max_prefill_tokens
        self.clip = options.clip_max_new_tokens
        conservativeness = options.schedule_conservativeness
        self.chunk_size = options.chunked_prefill_size
        if cfg.dp_size > 1:
            # SGLang with DP attention: each rank chunks its share of the prefill budget, and
            # admits more boldly (checked against the reference).
            self.chunk_size //= cfg.dp_size
            conservativeness *= DP_CONSERVATIVENESS
        self.init_ratio = INIT_NEW_TOKEN_RATIO * conservativeness
        self.min_ratio = self.init_ratio * MIN_NEW_TOKEN_RATIO_FACTOR
        self.ratio_step = (self.init_ratio - self.min_ratio) / NEW_TOKEN_RATIO_DECAY_STEPS
        self.ratio = self.init_ratio
        self.timer = PassTimer(cfg)
        # Without prefix caching the rank publishes no KV events: the router sees no overlap
        # on it (checked against the reference: sglang-telemetry seeds 187, 751, 967).
        self.cache = RadixCache(cfg.num_gpu_blocks, cfg.block_size,
                                record_events and self.caching)
        self.running: list[Seq] = []
        self.waiting: deque[Seq] = deque()
        self.ready: deque[Seq] = deque()  # P/D decode: activated handoffs, to run
        self.pending: deque[Seq] = deque()  # P/D decode: destinations waiting for pages
        self.next_order = 0
        self.capacity_gen = 0
        self.retry_due = False
        self.connector: list[Seq] = []  # no G2 (the reference refuses it for SGLang)
        self.host: HostClient | None = None
        self.compute_not_before = 0
        self.cache_hit_tokens = 0  # prompt tokens admissions found in the tree (telemetry)
        self.cache_total_tokens = 0  # prompt tokens prefill batches took or found

    def __repr__(self) -> str:
        return (f"SglangRank({self.pool_name} {self.worker_id}.{self.dp_rank}: "
                f"{len(self.running)} running, {len(self.waiting)} waiting)")

    def has_work(self) -> bool:
        return bool(self.running or self.waiting or self.ready)

    def kv_gauges(self) -> tuple[int, int]:
        """Every page in the tree or a request's hands counts as in use; none as inactive (the
        reference's SGLang gauges)."""
        return self.cache.total - self.cache.free, 0

    def queued_gauge(self) -> int:
        """The waiting queue and, on a P/D decode rank, the activated handoffs waiting to run
        (the reference counts them waiting)."""
        return len(self.waiting) + len(self.connector) + len(self.ready)

    def connector_ready(self) -> bool:
        return False

    # -- one pass --------------------------------------------------------------------------------

    def plan(self, now_ns: int, outcome: PassOutcome, throttle: bool = False) -> int:
        """Run this rank's part of a pass starting at now_ns; return its duration (ns)."""
        rejected = self._reject_too_long()
        self._promote(now_ns, outcome)
        if self.lpm and self.waiting:
            self._lpm_order()
        batch: list[Seq] = []
        prefill_ns = 0
        if not (self.ready or self.pending or self.group.rounds):
            batch, prefill_ns = self._prefill_batch(now_ns, outcome)
        if batch:
            duration = prefill_ns
            self._first_tokens(batch, outcome)
        else:
            deferring = self.group.rounds > 0
            decoding = any(seq.generated < seq.max_output for seq in self.running)
            duration, retracted = self._decode(outcome)
            if not retracted and not (deferring and not decoding):
                ratio = self.ratio - self.ratio_step
                self.ratio = ratio if ratio > self.min_ratio else self.min_ratio
        for seq in rejected:
            outcome.rejected.append(seq)
        return duration

    def rejects(self) -> bool:
        """A waiting request's prompt reaches max_model_len (the next pass rejects it)."""
        limit = self.max_model_len
        return limit is not None and any(seq.input_length >= limit for seq in self.waiting)

    def _reject_too_long(self) -> list[Seq]:
        """Step 1: waiting requests whose prompt reaches max_model_len, in queue order; the
        others' outputs are capped at what max_model_len leaves them."""
        limit = self.max_model_len
        if limit is None or not self.waiting:
            return []
        rejected = []
        kept: deque[Seq] = deque()
        for seq in self.waiting:
            if seq.input_length >= limit:
                seq.rec.rejection = ("max_model_len", limit)
                seq.status = WAITING
                rejected.append(seq)
            else:
                if seq.max_output > limit - seq.input_length:
                    seq.max_output = limit - seq.input_length
                kept.append(seq)
        if rejected:
            self.waiting = kept
        return rejected

    def _promote(self, now_ns: int, outcome: PassOutcome) -> None:
        """P/D decode: activated handoffs start running (first, while running slots last)."""
        ready = self.ready
        while ready and len(self.running) < self.max_seqs:
            seq = ready.popleft()
            seq.status = RUNNING
            self.running.append(seq)
            self._admitted(seq, now_ns, 0)
            outcome.changes += 1

    def _lpm_order(self) -> None:
        """Longest cached prefix first (a stable sort), requests whose first pages duplicate an
        earlier waiting request's after all others; FIFO beyond 128 waiting requests."""
        waiting = self.waiting
        if len(waiting) > LPM_FALLBACK_THRESHOLD:
            return
        bs = self.block_size
        dup_pages = -(-IN_BATCH_PREFIX_DEPRIORITIZE // bs)
        dup_tokens = dup_pages * bs
        seen: set[int] = set()
        scored = []
        cache = self.cache
        for position, seq in enumerate(waiting):
            chain = seq.block_ids
            prefix = cache.peek(chain, len(chain)) * bs if self.caching else 0
            late = (prefix <= IN_BATCH_PREFIX_CHECK
                    and seq.input_length + seq.generated >= dup_tokens)
            if late and len(chain) >= dup_pages:
                ident = chain[dup_pages - 1]
                late = ident in seen
                seen.add(ident)
            scored.append((late, -prefix, position, seq))
        scored.sort()
        self.waiting = deque(entry[3] for entry in scored)

    def _prefill_batch(self, now_ns: int, outcome: PassOutcome) -> tuple[list[Seq], int]:
        """Step 3 (the reference's get_new_batch_prefill): the batch and its prefill time."""
        bs = self.block_size
        clip = self.clip
        rem_total = self._room_left()
        rem_input = self.max_prefill
        rem_chunk = self.chunk_size
        slots = self.max_seqs - len(self.running)
        waiting = self.waiting
        batch: list[Seq] = []
        total_isl = total_prefix = computed_tokens = 0
        while len(batch) < slots and waiting:
            seq = waiting.popleft()
            piece = self._piece(seq, rem_chunk)
            if piece is None:
                waiting.appendleft(seq)
                break
            start, chunk, extend = piece
            charged = -(-chunk // bs) * bs
            reserve = 0
            if chunk == extend:
                left = seq.max_output - seq.generated
                reserve = left if left < clip else clip
            if (charged + reserve >= rem_total or charged > rem_input
                    or charged > rem_chunk):
                waiting.appendleft(seq)
                break
            end = start + chunk
            first = seq.computed == 0
            prefix = self._allocate(seq, end, start) if first else self._extend(seq, end)
            if prefix is None:
                waiting.appendleft(seq)
                break
            seq.computed = end
            self._chunk_taken(seq, now_ns, first, prefix, end)
            computed_tokens += end - prefix
            total_isl += end
            total_prefix += prefix
            rem_total -= charged + reserve
            rem_input -= charged
            rem_chunk -= charged
            batch.append(seq)
            if rem_chunk <= 0:
                break
        if not batch:
            return batch, 0
        self.stats.committed_prompt_tokens += computed_tokens
        outcome.changes += len(batch) + computed_tokens
        if computed_tokens:
            self.group.prefilled = True
        n = len(batch)
        prefill_ns = 0 if self.is_decode else self.timer.prefill_ns(
            n * (total_isl // n - total_prefix // n))
        return batch, prefill_ns

    def _chunk_taken(self, seq: Seq, now_ns: int, first: bool, prefix: int, end: int) -> None:
        """A prefill chunk [prefix or start, end) joined the batch: admission (its first), the
        scheduler's cache-hit counters (telemetry) and the policy's forward-pass metrics."""
        if first:
            self._admitted(seq, now_ns, prefix)
            self.cache_hit_tokens += prefix
            self.cache_total_tokens += prefix
        self.cache_total_tokens += end - prefix
        if self.fpm is not None:  # the policy's forward-pass metrics (scaling_metrics.py)
            self.fpm.append((seq, seq.input_length + seq.generated,
                             (end - prefix, end - prefix, prefix)))

    def _room_left(self) -> float:
        """The cache's free and evictable tokens, less what the running requests reserve (their
        outputs left, clipped, by the new-token ratio)."""
        reserved = 0.0
        clip = self.clip
        ratio = self.ratio
        for seq in self.running:
            left = seq.max_output - seq.generated
            reserved += (left if left < clip else clip) * ratio
        cache = self.cache
        return float((cache.free + cache.evictable) * self.block_size) - reserved

    def _piece(self, seq: Seq, rem_chunk: int) -> tuple[int, int, int] | None:
        """(start, chunk, extend) of the request's next prompt piece: where it starts (past its
        cached prefix), how much of it the chunk budget takes (whole when it fits once rounded
        up to pages, else the whole pages that fit), how much was left; None: it waits."""
        bs = self.block_size
        length = seq.input_length + seq.generated
        cached = 0
        if seq.computed == 0 and self.caching:
            match = length if seq.max_output == 0 else length - 1
            limit = match // bs
            if limit > len(seq.block_ids):
                limit = len(seq.block_ids)
            cached = self.cache.peek(seq.block_ids, limit) * bs
        start = seq.computed if seq.computed > cached else cached
        extend = length - start
        if extend == 0 and seq.computed > 0:
            return None
        if -(-extend // bs) * bs <= rem_chunk:
            return start, extend, extend
        chunk = rem_chunk // bs * bs
        return (start, chunk, extend) if chunk else None

    def _first_tokens(self, batch: list[Seq], outcome: PassOutcome) -> None:
        """Step 4: an unfinished chunk goes back to the head of the waiting queue; a completed
        prompt gets its first token (one finishing with it needs no KV slot)."""
        fresh: list[Seq] = []
        for seq in batch:
            if seq.computed < seq.input_length + seq.generated:
                self._cache_complete(seq)
                self.waiting.appendleft(seq)
            else:
                seq.status = RUNNING
                fresh.append(seq)
        if not fresh:
            return
        going: list[Seq] = []
        # Requests ending here let go of their pages only after the others' first-token
        # pages are reserved (the reference cleans its completed requests up after the step).
        ending = [seq for seq in fresh if seq.generated >= seq.max_output]
        for seq in fresh:
            if seq.max_output - seq.generated == 1:
                self._token(seq, outcome)
                ending.append(seq)
            elif seq.generated < seq.max_output:
                going.append(seq)
        if going:
            needed = self._growth(going)
            cache = self.cache
            if cache.free < needed:
                cache.evict((needed - cache.free) * self.block_size)
            if cache.free >= needed:
                cache.free -= needed
                for seq in going:
                    self._step(seq, outcome)
                    self._cache_complete(seq)
        for seq in ending:
            self._complete(seq, outcome)
        self.running.extend(going)

    def _decode(self, outcome: PassOutcome) -> tuple[int, bool]:
        """Step 5: one decode token per running request; (duration, retracted)."""
        running = self.running
        if not running:
            return 0, False
        for seq in [s for s in running if s.generated >= s.max_output]:
            running.remove(seq)
            self._complete(seq, outcome)
        if not running:
            return 0, False
        cache = self.cache
        bs = self.block_size
        if self.fpm is not None:  # a decode pass's requests, retracted ones included (ref)
            self.fpm.extend((seq, seq.input_length + seq.generated, DECODE_STEP)
                            for seq in running)
        retracted: list[Seq] = []
        sampler = self.mtp if not self.is_prefill else None
        burst = sampler.nextn + 1 if sampler is not None else 1
        needed = self._growth(running, burst)
        while (cache.free + cache.evictable) < needed and len(running) > 1:
            victim = min(running, key=_output_length)
            running.remove(victim)
            self._retract(victim)
            retracted.append(victim)
            needed = self._growth(running, burst)
        if cache.free < needed:
            cache.evict((needed - cache.free) * bs)
        if retracted:
            decoded = sum(seq.generated for seq in running)
            budget = sum(seq.max_output for seq in running)
            estimate = (decoded + RETRACT_DECODE_STEPS * len(running)) / (budget + 1.0)
            self.ratio = estimate if estimate < 1.0 else 1.0
            self.capacity_gen += 1
            outcome.changes += len(retracted)
            self.stats.preemptions += len(retracted)
            self.waiting.extend(retracted)
        duration = 0
        if running and cache.free >= needed:
            active = 0
            for seq in running:
                active += seq.input_length + seq.generated
            duration = self.timer.decode_ns(active)
            cache.free -= needed
            outcome.forwards += len(running)  # one decode step each (telemetry)
            done: list[Seq] = []
            if sampler is not None:
                self._speculate(sampler, needed, done, outcome)
            else:
                for seq in running:
                    self._step(seq, outcome, last=seq.max_output - seq.generated == 1)
                    if seq.generated >= seq.max_output:
                        done.append(seq)
            if done:
                for seq in done:
                    running.remove(seq)
                    self._complete(seq, outcome)
        return duration, bool(retracted)

    def _growth(self, seqs: list[Seq], burst: int = 1) -> int:
        """Pages the next token of each request takes (one when its last page is full); with
        MTP (`burst` = nextn + 1), the pages its largest burst (min(burst, tokens left)) could
        fill."""
        bs = self.block_size
        if burst == 1:
            return sum(1 for seq in seqs if seq.computed == seq.pages * bs)
        need = 0
        for seq in seqs:
            left = seq.max_output - seq.generated
            grow = -(-(seq.computed + (burst if burst < left else left)) // bs) - seq.pages
            if grow > 0:
                need += grow
        return need

    def _speculate(self, sampler: MtpSampler, reserved: int, done: list[Seq],
                   outcome: PassOutcome) -> None:
        """MTP: each running request, in order, draws its burst (1 + the drafts accepted,
        capped at the tokens left), taken token by token as `_step` takes one and stamped
        together at the pass end (outcome.bursts); the `reserved` pages the bursts did not
        fill go back; finished requests go to `done`."""
        tokens = outcome.tokens
        for seq in self.running:
            left = seq.max_output - seq.generated
            burst = sampler.burst(left)
            pages = seq.pages
            mark = len(tokens)
            for i in range(burst):
                self._step(seq, outcome, last=i == left - 1)
            del tokens[mark:]
            outcome.accepted += sampler.drawn - 1
            reserved -= seq.pages - pages
            if not seq.hidden:
                outcome.bursts.append((seq, burst))
            rec = seq.rec
            if rec.speculative_steps is not None:
                rec.speculative_steps += 1
                rec.draft_tokens += sampler.nextn
                rec.accepted_draft_tokens += burst - 1
            if burst == left:
                done.append(seq)
        self.cache.free += reserved

    def _step(self, seq: Seq, outcome: PassOutcome, last: bool = False) -> None:
        """One token: it takes a KV slot (a reserved page when its last page is full), and the
        request caches the pages it completes unless it ends with this token."""
        bs = self.block_size
        if seq.computed == seq.pages * bs:
            seq.pages += 1
        computed = seq.computed = seq.computed + 1
        self._token(seq, outcome)
        if computed % bs == 0 and self.cache.events is not None:
            self.cache.publish(self._ids_through(seq, computed // bs)[-1])
        if not last and computed // bs > seq.registered:
            # Also the prompt pages a first token that found no page left out (ref: decode.rs
            # cache_materialized_prefix after each appended token).
            self._cache_complete(seq)

    def _token(self, seq: Seq, outcome: PassOutcome) -> None:
        seq.generated += 1
        outcome.changes += 1
        if not seq.hidden:
            outcome.tokens.append(seq)

    # -- leases: the pages and radix path a request holds --------------------------------------

    def _allocate(self, seq: Seq, end: int, cap: int) -> int | None:
        """A fresh admission: lock the cached prefix (matched again up to `cap` tokens), evict
        for the pages it lacks up to `end` tokens; None when they cannot fit."""
        cache = self.cache
        bs = self.block_size
        if self.caching:
            pages, node = cache.match(seq.block_ids, cap // bs, lock=True)
        else:
            pages, node = 0, cache.root
        need = -(-end // bs) - pages
        if need > cache.free + cache.evictable:
            cache.dec_lock(node)
            return None
        if need > cache.free:
            cache.evict((need - cache.free) * bs)
        if need > cache.free:
            cache.dec_lock(node)
            return None
        cache.free -= need
        seq.pages = pages + need
        seq.registered = pages
        seq.node = node
        self._publish(seq, pages, end // bs)
        return pages * bs

    def _extend(self, seq: Seq, end: int) -> int | None:
        """A chunk continuation: the request's own pages grow to `end` tokens (no new match);
        returns the tokens it already held, None when the pages cannot fit."""
        cache = self.cache
        bs = self.block_size
        need = -(-end // bs) - seq.pages
        if need > cache.free + cache.evictable:
            return None
        if need > cache.free:
            cache.evict((need - cache.free) * bs)
        if need > cache.free:
            return None
        owned = seq.computed
        cache.free -= need
        seq.pages += need
        self._publish(seq, owned // bs, end // bs)
        return owned

    def _publish(self, seq: Seq, first: int, upto: int) -> None:
        """Pages first..upto of seq became complete in its hands (router events)."""
        cache = self.cache
        if cache.events is None:
            return
        ids = self._ids_through(seq, upto)
        for k in range(first, upto):
            cache.publish(ids[k])

    def _ids_through(self, seq: Seq, upto: int) -> list[int]:
        """seq.block_ids, grown to `upto` complete pages: generated tokens' pages get fresh
        identities, or the chained ones of the tokens the workload says the request produces."""
        ids = seq.block_ids
        bs = self.block_size
        while len(ids) < upto:
            k = len(ids)
            known = None
            output = seq.req.output
            if output is not None:
                known = self.identities.block_at(seq.req.prompt + output, k, bs,
                                                 ids[k - 1] if k else ROOT)
            ids.append(self.identities.fresh() if known is None else known)
        return ids

    def _cache_complete(self, seq: Seq) -> None:
        """Insert the request's complete pages beyond its cached prefix into the tree, and move
        its lock to where they end (its duplicates of pages the tree had are freed)."""
        self._cache_through(seq, seq.computed // self.block_size)

    def _cache_through(self, seq: Seq, upto: int) -> None:
        if not self.caching:
            return
        cached = seq.registered
        if upto <= cached:
            return
        node = seq.node
        assert node is not None
        ids = self._ids_through(seq, upto)
        end, adopted = self.cache.insert(node, ids[cached:upto])
        if end is not node:
            self.cache.inc_lock(end)
            self.cache.dec_lock(node)
            seq.node = end
        self._free_duplicates(ids, cached, upto, adopted)
        seq.registered = upto

    def _free_duplicates(self, ids: list[int], first: int, upto: int, adopted: int) -> None:
        """The pages first..upto the tree already held are the request's duplicates: freed."""
        duplicates = upto - first - adopted
        if not duplicates:
            return
        cache = self.cache
        cache.free += duplicates
        if cache.events is not None:
            for ident in ids[first:first + duplicates]:
                cache.withdraw(ident)

    def _finish_lease(self, seq: Seq) -> None:
        """A finished request caches its complete pages, frees its partial tail page and
        unlocks its path."""
        node = seq.node
        if node is None:
            return
        cache = self.cache
        complete = seq.computed // self.block_size
        cache.free += seq.pages - complete  # the partial tail page (never published)
        if not self.caching:
            cache.free += complete
            if cache.events is not None:
                for ident in seq.block_ids[:complete]:
                    cache.withdraw(ident)
        elif complete > seq.registered:
            ids = self._ids_through(seq, complete)
            cached = seq.registered
            _, adopted = cache.insert(node, ids[cached:complete])
            self._free_duplicates(ids, cached, complete, adopted)
        cache.dec_lock(node)
        seq.node = None
        seq.pages = 0
        seq.registered = 0

    def _retract(self, seq: Seq) -> None:
        """Free the request's pages beyond its cached prefix and unlock its path; it keeps its
        tokens (a readmission recomputes them, hitting its own cached pages)."""
        cache = self.cache
        bs = self.block_size
        own = seq.pages - seq.registered
        cache.free += own
        if cache.events is not None:
            for ident in seq.block_ids[seq.registered:seq.computed // bs]:
                cache.withdraw(ident)
        node = seq.node
        if node is not None:
            cache.dec_lock(node)
        seq.node = None
        seq.pages = 0
        seq.registered = 0
        seq.computed = 0
        seq.materialized = False
        seq.status = WAITING

    def _complete(self, seq: Seq, outcome: PassOutcome) -> None:
        if seq.hidden:
            outcome.held.append(seq)  # the source KV stays until the decode side has it
            return
        self._finish_lease(seq)
        self.capacity_gen += 1
        outcome.finished.append(seq)

    def _admitted(self, seq: Seq, now_ns: int, cached: int) -> None:
        pool_ordinal = seq.pool_admissions
        seq.pool_admissions += 1
        note_admission(seq, self.pool_name, self.is_decode, ns_to_ms(now_ns), pool_ordinal,
                       cached, None, None)

    # -- the seam (ranks.RankScheduler) --------------------------------------------------------

    def take_events(self) -> list[tuple[int, int]]:
        return self.cache.take_events()

    def unqueue(self, seq: Seq) -> None:
        if seq in self.ready:
            self.ready.remove(seq)
        else:
            self.waiting.remove(seq)

    def drop(self, seq: Seq) -> None:
        if seq.node is not None:
            self._retract(seq)
        if seq in self.inbound:  # a reserved destination canceled (its prefill rejected)
            self.inbound.remove(seq)

    def release_source(self, seq: Seq) -> None:
        self._finish_lease(seq)
        self.capacity_gen += 1

    def accepts_destination(self, dseq: Seq) -> bool:
        """A prompt reaching the decode rank's max_model_len fails the handoff (checked
        against the reference)."""
        limit = self.max_model_len
        return limit is None or dseq.input_length < limit

    def destination_never_fits(self, dseq: Seq) -> bool:
        return -(-dseq.input_length // self.block_size) > self.num_blocks

    def destination_blocked(self) -> bool:
        return False

    def reserve_destination(self, dseq: Seq) -> int:
        """Lock the resident prefix of the prompt's complete pages and take pages for the rest
        (evicting); the pages taken, or -1 when they do not fit now."""
        cache = self.cache
        bs = self.block_size
        limit = self.max_model_len
        if limit is not None and dseq.max_output > limit - dseq.input_length:
            dseq.max_output = max(limit - dseq.input_length, 0)
        if self.caching:
            pages, node = cache.match(dseq.block_ids, dseq.input_length // bs, lock=True)
        else:
            pages, node = 0, cache.root
        fresh = -(-dseq.input_length // bs) - pages
        if fresh > cache.free + cache.evictable:
            cache.dec_lock(node)
            return -1
        if fresh > cache.free:
            cache.evict((fresh - cache.free) * bs)
        if fresh > cache.free:
            cache.dec_lock(node)
            return -1
        cache.free -= fresh
        dseq.pages = pages + fresh
        dseq.registered = pages
        dseq.node = node
        self.inbound.append(dseq)
        return fresh

    def activate_destination(self, dseq: Seq) -> None:
        """The KV arrived: the prompt's complete pages enter the tree, and the request waits to
        run (activation order)."""
        dseq.computed = dseq.input_length
        self.inbound.remove(dseq)
        free_before = self.cache.free
        self._publish(dseq, dseq.registered, dseq.input_length // self.block_size)
        self._cache_complete(dseq)
        if self.cache.free > free_before:
            self.capacity_gen += 1
        dseq.materialized = True
        dseq.status = WAITING
        self.ready.append(dseq)

    # -- fast-forward (ranks.StretchRank) --------------------------------------------------------

    def stretch_passes(self, k: int, grow: bool = True) -> int:
        """Pure decode passes ahead (at most k): nothing to promote, reserve, reject or admit (a
        waiting request is not admitted while the interval defers prefill or the running slots
        are full), no request finishing, no page beyond the free ones (no eviction, no
        retraction), and, when a KV router reads this rank, no page of workload-known output
        completing (its insertion publishes router events)."""
        if self.ready or self.pending or self.mtp is not None or self.rejects():
            return 0  # MTP: each burst is a draw; a rejection is made at the next pass's start
        running = self.running
        if self.waiting and len(running) < self.max_seqs:
            rounds = self.group.rounds
            if rounds < k:
                k = rounds
        bs = self.block_size
        events = self.cache.events is not None
        for seq in running:
            if not seq.generated:  # its first token (the stamping) comes step by step
                return 0
            if self.caching and seq.registered < seq.computed // bs:
                return 0  # its next token caches pages it completed before (step by step)
            left = seq.max_output - seq.generated - 1  # the pass emitting the last is not pure
            if left < k:
                k = left
            if events and seq.req.output is not None:
                before = bs - seq.computed % bs - 1
                if before < k:
                    k = before
            if not grow:  # no pass of the stretch takes a page
                room = seq.pages * bs - seq.computed
                if room < k:
                    k = room
            if k < 2:
                return k
        return self._affordable(k)

    def _affordable(self, k: int) -> int:
        """The most passes, up to k, whose new pages fit the free ones (a binary search: the
        pages they take grow with the passes)."""
        if self._demand(k) <= self.cache.free:
            return k
        lo, hi = 0, k  # lo fits, hi does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self._demand(mid) <= self.cache.free:
                lo = mid
            else:
                hi = mid
        return lo

    def _demand(self, passes: int) -> int:
        bs = self.block_size
        demand = 0
        for seq in self.running:
            more = -(-(seq.computed + passes) // bs) - seq.pages
            if more > 0:
                demand += more
        return demand

    def advance_stretch(self, passes: int) -> None:
        """Pages the stretch's tokens take, the pages they complete inserted in the tree in the
        order single passes would (by the pass of each request's last completed page, then
        running order), and the admission ratio's decay."""
        bs = self.block_size
        cache = self.cache
        inserts: list[tuple[int, int, Seq]] = []
        for i, seq in enumerate(self.running):
            end = seq.computed + passes
            more = -(-end // bs) - seq.pages
            if more > 0:
                cache.free -= more
                seq.pages += more
            if self.caching and end // bs > seq.registered:
                inserts.append((passes - end % bs, i, seq))
        inserts.sort()
        for _, _, seq in inserts:
            self._cache_through(seq, (seq.computed + passes) // bs)
        ratio = self.ratio
        floor = self.min_ratio
        step = self.ratio_step
        for _ in range(passes):
            if ratio <= floor:
                break
            ratio -= step
            if ratio < floor:
                ratio = floor
        self.ratio = ratio


def _output_length(seq: Seq) -> int:
    return seq.generated
