"""MTP speculative decoding: one rank's draft sampler and its decode step (engine.md section "MTP
speculative decoding").

A rank whose role sets MTP (`aic_nextn` = nextn, conditional acceptance rates, `aic_mtp_seed`)
owns one sampler seeded with seed + its scheduler id (wrapping at 2**64). Its decode step
(`emit_speculative`, the rank's emission when it has a sampler) follows the reference:

1. requests with nothing left to generate end without a token; the others whose known sequence
   is computed are *ready*;
2. the blocks their largest bursts could fill (min(nextn + 1, tokens left) each; 1 on a prefill
   worker) are reserved at once, evicting LRU heads; when they do not fit, the policy's victim is
   preempted and the ready set is taken again, until they fit;
3. the step costs one decode duration over every ready request (a prompt finished in this pass
   included: a speculative rank charges decode for first tokens too; none on a prefill worker);
4. each ready request, in running order, draws its burst: 1 + the draft positions accepted
   (each position i accepted with probability rates[i] given the earlier ones, the first
   rejection ends it), capped at the tokens left; a prefill worker draws nothing and emits 1;
5. the burst's tokens are appended one by one (full blocks registered as each next token
   starts, a block allocated from the reservation when a token needs one), all stamped at the
   pass end; a request not finished keeps its last token dangling (computed = known - 1).

Everything here is backend-independent: the hook is the rank's emission, whichever scheduler
planned the pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvreplay.engine.errors import ReplayStalled
from kvreplay.engine.mtp_rng import MASK64, StdRng, threshold
from kvreplay.schema.spec import Role

if TYPE_CHECKING:
    from kvreplay.engine.scheduler import PassOutcome, Rank
    from kvreplay.engine.sequence import Seq

# The reference's rates when a rank sets aic_nextn without aic_nextn_accept_rates.
DEFAULT_RATES = (0.85, 0.3, 0.0, 0.0, 0.0)


def conditional_rates(nextn: int, rates: tuple[float, ...]) -> tuple[float, ...]:
    """The per-position rates a sampler uses: the given ones (the defaults when none are given),
    zero-padded or cut to nextn, as the reference normalizes them."""
    given = rates or DEFAULT_RATES
    return tuple(given[:nextn]) + (0.0,) * (nextn - len(given))


class MtpSampler:
    """One rank's draft acceptance stream, and what it sampled (`accepted_hist[a]`: steps that
    accepted a draft positions, before the cap at the tokens left).

    A verification's outcome depends on the stream alone, so outcomes may be drawn ahead
    (`lookahead`, for a fast-forwarded stretch, mtp_stretch.py): `ahead[ahead_at:]` are drawn
    and not yet used, and the next verifications (`burst`, `take`) use them first, in order."""

    __slots__ = ("_rng", "accepted_hist", "ahead", "ahead_at", "drawn", "nextn", "rates",
                 "stall_check", "thresholds")

    def __init__(self, nextn: int, rates: tuple[float, ...], seed: int) -> None:
        self.nextn = nextn
        self.rates = conditional_rates(nextn, rates)
        self.thresholds = tuple(threshold(rate) for rate in self.rates)
        self._rng = StdRng(seed & MASK64)
        self.accepted_hist = [0] * (nextn + 1)
        self.stall_check = True  # without a time cap, a step that can never fit fails the run
        self.ahead = b""
        self.ahead_at = 0
        self.drawn = 0  # the last verification's tokens before the cap at the tokens left

    def burst(self, left: int) -> int:
        """Tokens one verification emits for a request with `left` tokens to go (no draw when
        none is left)."""
        if left <= 0:
            return 0
        if self.ahead_at < len(self.ahead):
            accepted = self.ahead[self.ahead_at]
            self.ahead_at += 1
        else:
            accepted = self._rng.accepted(self.thresholds)
        self.accepted_hist[accepted] += 1
        burst = self.drawn = accepted + 1
        return burst if burst < left else left

    def lookahead(self, count: int) -> bytes:
        """The outcomes (accepted counts) of the next `count` verifications, drawn as needed
        and kept for the verifications that use them."""
        at = self.ahead_at
        have = len(self.ahead) - at
        if have < count:
            self.ahead = self.ahead[at:] + self._rng.accepted_many(self.thresholds, count - have)
            self.ahead_at = at = 0
        return self.ahead[at:at + count]

    def take(self, count: int) -> None:
        """The next `count` verifications (drawn ahead) are used: count what they sampled."""
        at = self.ahead_at
        used = self.ahead[at:at + count]
        hist = self.accepted_hist
        for accepted in range(len(hist)):
            hist[accepted] += used.count(accepted)
        self.ahead_at = at + count


def rank_sampler(role: Role, scheduler_id: int) -> MtpSampler | None:
    """The sampler of a rank of `role` (None without MTP): seeded with the role's seed + the
    rank's scheduler id in its pool (worker x dp_size + dp rank), as the reference seeds it."""
    spec = role.speculation
    if spec is None or spec.kind != "mtp" or spec.num_speculative_tokens is None:
        return None
    return MtpSampler(spec.num_speculative_tokens, spec.acceptance_rates,
                      spec.seed + scheduler_id)


def _left(seq: Seq, known: int, limit: int | None) -> int:
    """Tokens the request may still generate: its requested output, capped by max_model_len."""
    left = seq.max_output - seq.generated
    if limit is not None and limit - known < left:
        left = limit - known if limit > known else 0
    return left


def _ready(rank: Rank) -> list[Seq]:
    limit = rank.max_model_len
    out = []
    for seq in rank.running:
        known = seq.input_length + seq.generated
        if seq.computed == known and _left(seq, known, limit) > 0:
            out.append(seq)
    return out


def _state_copy(rank: Rank, seq: Seq, known: int, burst: int) -> int:
    """Hybrid KV: blocks preserving seq's published checkpoint before its drafts write the
    state past it (a burst of one only samples: no write)."""
    states = rank.states
    if states is None or burst < 2:
        return 0
    return states.write_blocks(states.held[seq], known + 1)


def _outgrown(rank: Rank, ready: list[Seq], max_burst: int, outcome: PassOutcome) -> list[Seq]:
    """Hybrid KV: a ready request whose sequence after its largest burst, its state and the
    copy its drafts need can never fit the pool is rejected, keeping the tokens it emitted
    (as the reference); the others."""
    if rank.states is None:
        return ready
    bs = rank.block_size
    limit = rank.max_model_len
    keep = []
    for seq in ready:
        known = seq.input_length + seq.generated
        left = _left(seq, known, limit)
        burst = max_burst if max_burst < left else left
        if (-(-(known + burst) // bs) + rank.state_blocks + _state_copy(rank, seq, known, burst)
                > rank.num_blocks):
            rank.reject_running(seq, outcome)
        else:
            keep.append(seq)
    return keep


def _reserve(rank: Rank, ready: list[Seq], max_burst: int,
             outcome: PassOutcome) -> list[Seq] | None:
    """Reserve the blocks the ready requests' largest bursts could fill (on a hybrid rank, and
    the copies their drafts could need), preempting the policy's victims until they fit; the
    ready requests then (None: nothing can emit)."""
    bs = rank.block_size
    limit = rank.max_model_len
    pool = rank.pool
    while True:
        need = 0
        for seq in ready:
            known = seq.input_length + seq.generated
            left = _left(seq, known, limit)
            burst = max_burst if max_burst < left else left
            need += -(-(known + burst) // bs) - -(-known // bs)
            if rank.states is not None:
                need += _state_copy(rank, seq, known, burst)
        if pool.make_room(need):
            return ready
        if (len(rank.running) == 1 and need > pool.capacity - len(ready[0].blocks)
                and rank.mtp is not None and rank.mtp.stall_check):
            # Alone on the rank and still short: readmitted, it would come back to this very
            # step (the reference replays it forever).
            seq = ready[0]
            raise ReplayStalled(
                f"request {seq.rec.ordinal + 1} can never finish: its MTP step of up to "
                f"{max_burst} tokens needs {need} more block(s) beyond the "
                f"{len(seq.blocks)} it holds on a {pool.capacity}-block rank")
        victim = rank.pick_victim()
        if victim is None:
            return None
        rank.preempt(victim, outcome)
        ready = _ready(rank)
        if not ready:
            return None


def _end_done(rank: Rank, outcome: PassOutcome) -> list[Seq]:
    """End the requests with nothing left to generate (no token); the ready ones, in order."""
    running = rank.running
    limit = rank.max_model_len
    ready: list[Seq] = []
    done: list[Seq] = []
    for seq in running:
        known = seq.input_length + seq.generated
        if seq.computed < known:
            continue
        if _left(seq, known, limit) == 0:
            done.append(seq)
        else:
            ready.append(seq)
    if done:
        for seq in done:
            rank.finish(seq, outcome)
        gone = set(done)
        rank.running = [s for s in running if s not in gone]
    return ready


def _append(rank: Rank, sampler: MtpSampler, seq: Seq, burst: int,
            outcome: PassOutcome) -> bool:
    """Append one burst's tokens (registering full blocks, allocating from the reservation)
    and count it; True when the request is finished."""
    bs = rank.block_size
    caching = rank.caching
    pool = rank.pool
    known = seq.input_length + seq.generated
    left = _left(seq, known, rank.max_model_len)
    for _ in range(burst):
        # The token about to be appended makes the one before it computed.
        if caching and known // bs > seq.registered:
            rank.register_through(seq, known // bs)
        known += 1
        left -= 1
        if len(seq.blocks) * bs < known:
            pool.allocate(1, seq.blocks)
    seq.generated += burst
    outcome.changes += burst
    states = rank.states
    if states is not None and burst > 1:
        # Hybrid KV: accepted drafts wrote the state (a published checkpoint first preserved,
        # from the reservation); a checkpoint where they end on a block boundary.
        computed = known - 1
        states.prepare_write(seq, computed)
        states.commit(seq, computed, seq.block_ids[computed // bs - 1]
                      if caching and computed % bs == 0 else None)
    rec = seq.rec
    if rec.speculative_steps is not None and not rank.is_prefill:
        rec.speculative_steps += 1
        rec.draft_tokens += sampler.nextn
        rec.accepted_draft_tokens += burst - 1
    if not seq.hidden:
        outcome.bursts.append((seq, burst))
    if left == 0:
        rank.finish(seq, outcome)
        return True
    seq.computed = known - 1
    return False


def _count_forward(rank: Rank, seq: Seq, drawn: int, outcome: PassOutcome) -> None:
    """A decode forward and the drafts it accepted (telemetry's accept length, before the cap
    at the tokens left, as the reference counts them): a request emitting in a pass that
    computed no prompt token of it (a first token too on a P/D decode rank, or on a
    TensorRT-LLM rank whose prompt was all cached); a burst riding a prompt chunk is none."""
    entry = rank._scheduled.get(seq)
    prompt = 0 if entry is None else entry[1]
    if prompt == 0 and (seq.generated or rank.is_decode or not rank.recompute_last):
        outcome.forwards += 1
        outcome.accepted += drawn - 1


def emit_speculative(rank: Rank, sampler: MtpSampler, outcome: PassOutcome) -> int:
    """The rank's emission step with MTP (see the module docstring); returns its decode
    duration (ns). Bursts go to `outcome.bursts` as (request, tokens)."""
    ready = _end_done(rank, outcome)
    prefill = rank.is_prefill
    ready = _outgrown(rank, ready, 1 if prefill else sampler.nextn + 1, outcome)
    if not ready:
        return 0
    got = _reserve(rank, ready, 1 if prefill else sampler.nextn + 1, outcome)
    if got is None:
        return 0
    ready = got
    limit = rank.max_model_len
    decode_ns = 0
    if not prefill:
        decode_ns = rank.timer.decode_ns(sum(s.input_length + s.generated for s in ready))
    if prefill:
        bursts = [(seq, 1) for seq in ready]
    else:
        bursts = []
        for seq in ready:
            bursts.append((seq, sampler.burst(_left(seq, seq.input_length + seq.generated,
                                                    limit))))
            _count_forward(rank, seq, sampler.drawn, outcome)
    finished = [seq for seq, burst in bursts if _append(rank, sampler, seq, burst, outcome)]
    if finished:
        gone = set(finished)
        rank.running = [s for s in rank.running if s not in gone]
    return decode_ns
