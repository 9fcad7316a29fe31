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

from kvreplay.engine.config import RankConfig
from kvreplay.engine.identity import BlockIdentities
from kvreplay.engine.pool import BlockPool
from kvreplay.engine.records import Admission
from kvreplay.engine.sequence import PREEMPTED, RUNNING, WAITING, Seq
from kvreplay.engine.simtime import ns_to_ms
from kvreplay.engine.timing import PassTimer

UNLIMITED = 1 << 62

SCHEDULED, BLOCKED, CURRENT_PREEMPTED = 0, 1, 2


class PassOutcome:
    """What one worker pass produced, delivered at its end."""

    __slots__ = ("changes", "finished", "held", "rejected", "tokens")

    def __init__(self) -> None:
        self.tokens: list[Seq] = []  # visible tokens, in emission order
        self.finished: list[Seq] = []  # completed requests (after their last token, if any)
        self.rejected: list[Seq] = []
        self.held: list[Seq] = []  # P/D prefill side: prompt done, source KV held
        self.changes = 0  # tokens computed, admissions, preemptions, emissions

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

    __slots__ = (
        "_budget",
        "_cursor",
        "_last_used",
        "_preempted",
        "_prefill_isl",
        "_prefill_prefix",
        "_prefill_tokens",
        "_prefills",
        "_scheduled",
        "block_size",
        "budget",
        "caching",
        "chunked",
        "dp_rank",
        "identities",
        "is_decode",
        "is_prefill",
        "lifo",
        "max_model_len",
        "max_seqs",
        "num_blocks",
        "pending",
        "pool",
        "pool_name",
        "running",
        "scheduler_id",
        "stats",
        "timer",
        "waiting",
        "worker_id",
    )

    def __init__(self, cfg: RankConfig, pool_name: str, worker_id: int, dp_rank: int,
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
        budget = cfg.max_num_batched_tokens
        self.budget = UNLIMITED if budget is None else budget
        self.max_seqs = UNLIMITED if cfg.max_num_seqs is None else cfg.max_num_seqs
        self.max_model_len = cfg.max_model_len
        self.caching = cfg.enable_prefix_caching
        self.chunked = cfg.enable_chunked_prefill
        self.lifo = cfg.preemption_mode == "lifo"
        self.is_prefill = cfg.worker_type == "prefill"
        self.is_decode = cfg.worker_type == "decode"
        self.timer = PassTimer(cfg)
        self.pool = BlockPool(cfg.num_gpu_blocks, record_events and self.caching)
        self.running: list[Seq] = []
        self.waiting: deque[Seq] = deque()
        self.pending: deque[Seq] = deque()  # P/D decode: destinations waiting for blocks

    def has_work(self) -> bool:
        return bool(self.running or self.waiting)

    def remaining_generation(self, seq: Seq) -> int:
        left = seq.max_output - seq.generated
        if self.max_model_len is not None:
            room = self.max_model_len - seq.input_length - seq.generated
            if room < left:
                return room if room > 0 else 0
        return left

    # -- one pass --------------------------------------------------------------------------------

    def plan(self, now_ns: int, outcome: PassOutcome, admit: bool) -> int:
        """Run this rank's part of a pass starting at now_ns; return its duration (ns)."""
        running = self.running
        bs = self.block_size
        self._budget = self.budget
        self._prefill_tokens = 0
        self._prefill_isl = 0
        self._prefill_prefix = 0
        self._prefills = 0
        self._preempted = False
        self._scheduled: dict[Seq, tuple[int, int, int]] = {}
        self._cursor = 0
        while self._cursor < len(running) and self._budget > 0:
            seq = running[self._cursor]
            # Fast path: a decoding request whose next token fits its last block.
            if (seq.generated and seq.computed == seq.input_length + seq.generated - 1
                    and seq.computed < len(seq.blocks) * bs):
                computed = seq.computed + 1
                seq.computed = computed
                if self.caching and computed % bs == 0:
                    self._register_through(seq, computed // bs)
                self._budget -= 1
                self._scheduled[seq] = (1, 0, 0)
                outcome.changes += 1
                self._cursor += 1
                continue
            result = self._schedule(seq, 0, outcome)
            if result == SCHEDULED:
                self._cursor += 1
            elif result == BLOCKED:
                break
            # CURRENT_PREEMPTED: the list shifted onto the next request
        if admit and not self._preempted:
            self._admit_waiting(now_ns, outcome)
        prefill_ns = 0
        n = self._prefills
        if n:
            # The reference sizes the batch as n requests of mean (integer) length and prefix.
            mean_new = self._prefill_isl // n - self._prefill_prefix // n
            prefill_ns = self.timer.prefill_ns(n * mean_new)
        self.stats.committed_prompt_tokens += self._prefill_tokens
        return prefill_ns + self._emit(outcome)

    def _admit_waiting(self, now_ns: int, outcome: PassOutcome) -> None:
        running = self.running
        waiting = self.waiting
        bs = self.block_size
        pool = self.pool
        prefer_materialized = bool(self.pending)
        while not self._preempted and len(running) < self.max_seqs and waiting:
            seq = self._next_waiting(prefer_materialized)
            if seq is None:
                break
            if self.max_model_len is not None and seq.input_length >= self.max_model_len:
                self._reject(seq, outcome)
                continue
            cached = 0
            if not seq.materialized:
                known = seq.input_length + seq.generated
                known_blocks = -(-known // bs)
                if seq.pool_admissions == 0 and known_blocks > self.num_blocks:
                    self._reject(seq, outcome)
                    continue
                active_hits = 0
                if self.caching:
                    full = known // bs
                    hits, active_hits = pool.lookup(seq.block_ids, full)
                    if seq.generated < seq.max_output:  # needs logits: recompute the last token
                        cap = (known - 1) // bs
                        if hits > cap:
                            hits = cap
                        if active_hits > hits:
                            active_hits = hits
                    cached = hits * bs
                if known_blocks - active_hits > self.num_blocks - pool.num_active():
                    break  # wait for capacity
            result = self._schedule(seq, cached, outcome)
            if result != SCHEDULED:
                break
            self._record_admission(seq, now_ns, cached)
            outcome.changes += 1
            if self._last_used == 0 and self._budget == 0:
                break

    def _next_waiting(self, prefer_materialized: bool) -> Seq | None:
        waiting = self.waiting
        if not prefer_materialized:
            return waiting[0]
        for seq in waiting:
            if seq.materialized:
                return seq
        return None

    def _record_admission(self, seq: Seq, now_ns: int, cached: int) -> None:
        rec = seq.rec
        at_ms = ns_to_ms(now_ns)
        pool_ordinal = seq.pool_admissions
        seq.pool_admissions += 1
        rec.admission_history.append(Admission(
            admission_ordinal=len(rec.admission_history),
            pool=self.pool_name,
            pool_admission_ordinal=pool_ordinal,
            at_ms=at_ms,
            reused_input_tokens=cached,
            g1_reused_input_tokens=cached,
            host_reused_input_tokens=0,
            is_readmission=pool_ordinal > 0,
        ))
        if rec.first_admit_ms is None:
            rec.first_admit_ms = at_ms
        # The best prompt reuse outside the decode pool. A readmission may also hit its own
        # output blocks; the reference counts those too, kvreplay counts input tokens only.
        reused = cached if cached < seq.input_length else seq.input_length
        if reused > rec.reused_input_tokens and not self.is_decode:
            rec.reused_input_tokens = reused
        if pool_ordinal > 0:
            rec.readmission_count += 1
        elif self.pool_name == "prefill":
            rec.prefill_admit_ms = at_ms
        elif self.pool_name == "decode":
            rec.decode_admit_ms = at_ms

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
        target = before + desired
        need = -(-target // bs)
        while need > len(seq.blocks):
            if self._grow(seq, need, cached):
                break
            victim = self._pick_victim()
            if victim is None:
                target = before
                break
            self._preempt(victim, outcome)
            if victim is seq:
                return CURRENT_PREEMPTED
        used = target - before
        if used == 0 and target < known:
            return BLOCKED
        seq.computed = target
        if self.caching and target // bs > seq.registered:
            self._register_through(seq, target // bs)
        prompt_after = target if target < seq.input_length else seq.input_length
        prompt_tokens = prompt_after - prompt_before
        self._scheduled[seq] = (used, prompt_tokens, prompt_before)
        if prompt_tokens > 0:
            self._prefill_tokens += used  # committed: the whole chunk, recomputed output included
            if not self.is_decode:  # a decode worker's recompute is not timed as prefill
                self._prefills += 1
                self._prefill_isl += prompt_after
                self._prefill_prefix += prompt_before
        if from_waiting:
            self.waiting.remove(seq)
            seq.status = RUNNING
            self.running.append(seq)
        self._budget -= used
        self._last_used = used
        outcome.changes += used
        return SCHEDULED

    def _grow(self, seq: Seq, need: int, cached: int) -> bool:
        """Allocate blocks up to `need` (a fresh admission first takes its cached prefix)."""
        pool = self.pool
        if not seq.blocks and cached:
            hit_ids = seq.block_ids[:cached // self.block_size]
            fresh = need - len(hit_ids)
            if not pool.can_allocate(fresh, hit_ids):
                return False
            pool.acquire_hits(hit_ids, seq.blocks)
            seq.registered = len(hit_ids)
            pool.allocate(fresh, seq.blocks)
            return True
        fresh = need - len(seq.blocks)
        if not pool.can_allocate(fresh, []):
            return False
        pool.allocate(fresh, seq.blocks)
        return True

    def _register_through(self, seq: Seq, full: int) -> None:
        ids = seq.block_ids
        pool = self.pool
        for k in range(seq.registered, full):
            if k == len(ids):
                ids.append(self.identities.fresh())
            pool.register(seq.blocks[k], ids[k])
        seq.registered = full

    def _pick_victim(self) -> Seq | None:
        if not self.running:
            return None
        return self.running[-1] if self.lifo else self.running[0]

    def _preempt(self, victim: Seq, outcome: PassOutcome) -> None:
        index = self.running.index(victim)
        del self.running[index]
        if index < self._cursor:
            self._cursor -= 1
        self._preempted = True
        undone = self._scheduled.pop(victim, None)
        if undone is not None:
            used, prompt_tokens, prompt_before = undone
            self._budget += used
            if prompt_tokens > 0:
                self._prefill_tokens -= used
                if not self.is_decode:
                    self._prefills -= 1
                    self._prefill_isl -= prompt_before + prompt_tokens
                    self._prefill_prefix -= prompt_before
        self.pool.release(victim.blocks)
        victim.blocks = []
        victim.registered = 0
        victim.computed = 0
        victim.materialized = False
        victim.status = PREEMPTED
        self.waiting.appendleft(victim)
        self.stats.preemptions += 1
        outcome.changes += 1

    def _reject(self, seq: Seq, outcome: PassOutcome) -> None:
        self.waiting.remove(seq)
        if seq.blocks:  # a P/D destination already holding its transferred prompt
            self.pool.release(seq.blocks)
            seq.blocks = []
        seq.status = WAITING
        outcome.rejected.append(seq)

    def _finish(self, seq: Seq, outcome: PassOutcome) -> None:
        if seq.hidden:
            outcome.held.append(seq)  # the source KV stays until the decode side has it
        else:
            self.pool.release(seq.blocks)
            seq.blocks = []
            outcome.finished.append(seq)

    def _emit(self, outcome: PassOutcome) -> int:
        running = self.running
        ready: list[Seq] = []
        done_without_token: list[Seq] = []
        for seq in running:
            if seq.computed < seq.input_length + seq.generated:
                continue
            if self.remaining_generation(seq) == 0:
                done_without_token.append(seq)
            else:
                ready.append(seq)
        if not ready and not done_without_token:
            return 0
        for seq in done_without_token:
            self._finish(seq, outcome)
        decode_ns = 0
        if ready and not self.is_prefill:
            # The decode batch: requests that already emitted (a first token is part of the
            # prefill's forward), plus every request on a decode worker. Its total sequence
            # length sizes the polynomial decode time (checked against the reference).
            decoders = 0
            active = 0
            for seq in ready:
                if seq.generated or self.is_decode:
                    decoders += 1
                    active += seq.input_length + seq.generated
            if decoders:
                decode_ns = self.timer.decode_ns(active)
        for seq in ready:
            seq.generated += 1
            if not seq.hidden:
                outcome.tokens.append(seq)
            if self.remaining_generation(seq) == 0:
                done_without_token.append(seq)
                self._finish(seq, outcome)
        if done_without_token:
            gone = set(done_without_token)
            self.running = [s for s in running if s not in gone]
        return decode_ns
