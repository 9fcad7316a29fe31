"""engine.md section 9, examples 1-4 (vLLM, fixed timing, block_size 4), exactly."""

from __future__ import annotations

from engine_support import ListWorkload, native, rank, request

from kvreplay.engine import run_native


def run(requests: list, **rank_overrides: object) -> list:
    overrides = {"timing_model": {"type": "fixed", "prefill_ms": 10.0, "decode_ms": 2.0},
                 **rank_overrides}
    return run_native(native(rank(**overrides)), workload=ListWorkload(requests)).records


def test_example_1_zero_one_two_output_tokens() -> None:
    """A 4-token prompt: out 0 ends at 10 without a token; out 1 ends at its first token, 10;
    out 2 has its first token at 10 and ends at 12."""
    out0, out1, out2 = run([request(0, 0.0, 4, 0, [1]), request(1, 100.0, 4, 1, [2]),
                            request(2, 200.0, 4, 2, [3])])
    assert (out0.first_token_ms, out0.terminal_time_ms, out0.output_length) == (None, 10.0, 0)
    assert out0.terminal_status == "completed"
    assert (out1.first_token_ms - 100.0, out1.terminal_time_ms - 100.0) == (10.0, 10.0)
    assert (out2.first_token_ms - 200.0, out2.terminal_time_ms - 200.0) == (10.0, 12.0)
    assert out2.itl_runs() == [(2.0, 1)]


def test_example_2_two_prompts_share_one_prefill_pass() -> None:
    """Two 4-token requests at 0, out 1, one rank: one prefill pass, both done at 10."""
    a, b = run([request(0, 0.0, 4, 1, [1]), request(1, 0.0, 4, 1, [2])])
    assert (a.first_token_ms, a.terminal_time_ms) == (10.0, 10.0)
    assert (b.first_token_ms, b.terminal_time_ms) == (10.0, 10.0)


def test_example_3_chunked_prefill() -> None:
    """Budget 4, prompt 10, out 2: chunks 4, 4, 2, first token at 30, terminal at 32."""
    (r,) = run([request(0, 0.0, 10, 2, [1, 2, 3])], max_num_batched_tokens=4)
    assert (r.first_token_ms, r.terminal_time_ms) == (30.0, 32.0)


def test_example_4_last_prompt_token_is_recomputed() -> None:
    """After an 8-token prompt, a later prompt sharing all 8 tokens reuses only 4."""
    seed, later = run([request(0, 0.0, 8, 1, [1, 2]), request(1, 100.0, 8, 2, [1, 2])])
    assert seed.reused_input_tokens == 0
    assert later.reused_input_tokens == 4
