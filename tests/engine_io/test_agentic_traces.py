"""Agentic trace readers: Weka plays and Agentic Mooncake v2 (engine.md section 1.1).

Digests pinned here are the reference engine's own (its reported source and graph digests for
the same files); tests/engine/test_agentic_reference.py checks the whole corpus against it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kvreplay.engine.traces.agentic.graph import AgenticGraph
from kvreplay.engine.traces.agentic.v2 import read_agentic_mooncake
from kvreplay.engine.traces.agentic.weka import read_weka

CASES = Path(__file__).resolve().parents[1] / "cases" / "agentic"
EXAMPLE_TRACES = Path(__file__).resolve().parents[2] / "examples" / "traces"
BAD = CASES / "bad"


def graph(path: Path, **kw: object) -> AgenticGraph:
    g, found = read_weka(str(path), **kw)  # type: ignore[arg-type]
    assert g is not None, [d.message for d in found]
    return g


@pytest.mark.parametrize(("name", "basis", "source", "digest"), [
    ("w15_g2_restore.jsonl", "absolute",
     "00c4d5cd0373a9660852403f209cadbdc6c387d33a763537a5ba15ae6ada1673",
     "7687a229d2177c7474735c6a144d7434d3f13bfc282c264a53309c6f6081981f"),
    ("weka-relative.json", "relative",
     "2a0cc7e2fab2b0a009c4315ad8b3398441cf08fc8f496e8e3b5fff99f8c55ea6",
     "60336ca12d6c9673888f7399c69474a97ebe35088868d4309dcaf716aa45ced1"),
    ("weka-two-plays.jsonl", "absolute",
     "912af2ff9f7b56a59fcee24198e427faec6fe31518604c5006b5555f6523efb3",
     "ca498fb1bd798652a50e74090525f2bc4cbf1c7a77cd7c9428731d29d45f61bf"),
])
def test_fixture_identity_equals_the_references(name: str, basis: str, source: str,
                                                digest: str) -> None:
    """Resolved basis, source digest and graph digest of the upstream fixtures (auto basis)."""
    g = graph(CASES / name)
    assert (g.basis, g.header.source_digest, g.digest()) == (basis, source, digest)


def test_the_g2_fixture_lowers_to_the_reference_rows() -> None:
    """Ids, sessions, edges and hashes of weka-g2-restore: the child spawned on its parent's
    completion, the resumed turn joining it, the last turn behind a replay barrier."""
    g = graph(EXAMPLE_TRACES / "weka-g2-restore.jsonl")
    ns = "weka:71d49f605db60330"  # first 16 hex of BLAKE3("weka-g2-restore.jsonl#000000")
    rows = {n.request_id.split(":request:")[1]: n for n in g.nodes}
    assert [n.request_id for n in g.nodes] == [f"{ns}:request:{k}" for k in (
        "outer:0", "outer:1:inner:0", "outer:2", "outer:3")]
    assert rows["outer:0"].hash_ids == [7648862607805006273, 3226450503932887842,
                                        3062353686099737256]
    assert rows["outer:1:inner:0"].session_id == f"{ns}:session:subagent:1:pressure"
    assert rows["outer:3"].session_id == f"{ns}:session:root:worker:0"
    deps = {k: [(d.request_id.split(":request:")[1], d.trigger, d.delay_ms, d.relation)
                for d in n.dependencies] for k, n in rows.items()}
    assert deps == {
        "outer:0": [],
        "outer:1:inner:0": [("outer:0", "completion", 98.0, "spawn")],
        "outer:2": [("outer:0", "completion", 198.0, "sequence"),
                    ("outer:1:inner:0", "completion", 98.0, "join")],
        "outer:3": [("outer:2", "completion", 0.0, "replay_barrier")]}
    header = next(iter(g.v2_lines()))
    assert header == ('{"schema":"dynamo.agentic_mooncake","version":2,"block_size":4,'
                      '"hash_id_scope":"local","source":{"format":"weka","digest":'
                      '"f95fa521f47f6ece31889659a95c9a8b4923e6ca83df03b1db8e6dc46fc14dbd"}}')


def test_equal_hash_ids_in_different_plays_never_share_a_block() -> None:
    """Block identities are per play: the same hash ids give different u64 hashes."""
    g = graph(CASES / "w21_same_hash_two_plays.jsonl")
    by_play: dict[str, set[int]] = {}
    for n in g.nodes:
        by_play.setdefault(n.play_id, set()).update(n.hash_ids)
    first, *others = by_play.values()
    assert all(not first & other for other in others)


def test_nested_timestamp_basis() -> None:
    """auto reads relative timestamps as relative (reported); forcing absolute on them is an
    error at the offending request; no subagent at all is not_applicable."""
    assert graph(CASES / "w04_relative.jsonl").basis == "relative"
    assert graph(CASES / "w05_absolute.json").basis == "absolute"
    assert graph(CASES / "w06_forks.jsonl").basis == "not_applicable"
    g, found = read_weka(str(CASES / "w04_relative.jsonl"), basis="absolute")
    assert g is None
    (d,) = found
    assert d.rule == "TRACE-NESTED-TIME" and d.line == 1
    assert "inner request 0 at 0 precedes its marker at 0.02" in d.message
    assert "play 'relative'" in d.message and d.hint is not None


def test_a_directory_is_walked_recursively_in_path_order() -> None:
    """Nested files are named by their path under the root; sorted by that path."""
    g = graph(CASES / "w29_nested_dir")
    names = [p.play_id for p in g.plays]
    assert len(names) == 3
    assert graph(CASES / "w22_dir").plays[0].ordinal == 0


def test_an_understated_subagent_duration_is_a_located_warning() -> None:
    """A completed subagent whose duration_ms ends before its own requests runs (the reference
    replays it, the parent resuming at the stated end) with a TRACE-DURATION warning at the
    play that names both ends."""
    g, found = read_weka(str(CASES / "w31_duration_understated.jsonl"), basis="absolute")
    assert g is not None
    (d,) = found
    assert (d.rule, d.severity, d.span.line) == ("TRACE-DURATION", "warning", 1)
    assert "ends at 0.03 s, after the stated end 0.015 s (`$.requests[1].duration_ms`)" in (
        d.message)


BAD_CASES = {
    "missing_id.jsonl": ("TRACE-MISSING", 1, "`$.id`"),
    "negative_t.jsonl": ("TRACE-VALUE", 1, "play 'neg', `$.requests[0].t`"),
    "unknown_status.jsonl": ("TRACE-VALUE", 1, "unsupported subagent status 'failed'"),
    "scope_global.jsonl": ("TRACE-VALUE", 1, "unsupported hash_id_scope 'global'"),
    "missing_scope.jsonl": ("TRACE-MISSING", 1, "`$.hash_id_scope`"),
    "blocking_zero.jsonl": ("TRACE-VALUE", 1, "blocking subagent a with no replayable"),
    "model_not_in_models.jsonl": ("TRACE-VALUE", 1, "absent from its declaration"),
    "two_objects.json": ("TRACE-JSON", 2, "contains more than one object"),
    "array.json": ("TRACE-FIELD", 1, "a play must be an object"),
    "nested_subagent.jsonl": ("TRACE-VALUE", 1, "subagents do not nest"),
    "in_zero.jsonl": ("TRACE-VALUE", 1, "zero-length request"),
    "out_negative.jsonl": ("TRACE-VALUE", 1, "`$.requests[0].out`"),
    "negative_hash.jsonl": ("TRACE-VALUE", 1, "`$.requests[0].hash_ids[0]`"),
    "empty.jsonl": ("TRACE-EMPTY", None, "contains no trace objects"),
    "invalid_line.jsonl": ("TRACE-JSON", 2, "object 2"),
    "play.txt": ("TRACE-PATH", None, "must use a .json or .jsonl extension"),
    "mixed_block_file.jsonl": ("TRACE-BLOCK-SIZE", 2, "mixes block sizes"),
    "mixed_block_dir": ("TRACE-BLOCK-SIZE", 1, "b.jsonl#000000 has 8, expected 4"),
    "no_requests.jsonl": ("TRACE-EMPTY", 1, "has no model requests"),
    "in_too_large.jsonl": ("TRACE-VALUE", 1, "`$.requests[0].in`: `in` must be in "
                           "0..10000000, found 10000001"),
}


@pytest.mark.parametrize("name", sorted(BAD_CASES))
def test_malformed_plays_are_located(name: str) -> None:
    """Each malformed play gets its rule, its file and line, and the play id or field."""
    rule, line, text = BAD_CASES[name]
    g, found = read_weka(str(BAD / name))
    assert g is None
    first = found[0]
    assert (first.rule, first.line) == (rule, line)
    assert text in first.message
    assert first.file is not None and first.file.startswith(str(BAD / name))


def test_symlinks_are_refused(tmp_path: Path) -> None:
    """A symlinked source, or a symlink anywhere in a corpus directory, is refused."""
    target = CASES / "w01_blocking_duration.jsonl"
    link = tmp_path / "link.jsonl"
    os.symlink(target, link)
    g, found = read_weka(str(link))
    assert g is None and "may not be a symlink" in found[0].message
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.jsonl").write_bytes(target.read_bytes())
    os.symlink(target, corpus / "b.jsonl")
    g, found = read_weka(str(corpus))
    assert g is None and "may not contain symlinks" in found[0].message


WEKA_LINE = ('{"id":"x","models":["m"],"block_size":4,"hash_id_scope":"local","requests":['
             '{"t":0.0,"type":"s","model":"m","in":8,"out":2,"hash_ids":[1,2],"api_time":0.004},'
             '{"t":0.1,"type":"subagent","agent_id":"w","subagent_type":"E","status":"completed",'
             '"duration_ms":30,"requests":[{"t":0.1,"type":"s","model":"m","in":8,"out":2,'
             '"hash_ids":[3,4],"api_time":0.004}]},'
             '{"t":0.2,"type":"s","model":"m","in":12,"out":2,"hash_ids":[1,2,3]}]}')


@pytest.mark.parametrize(("old", "new", "field", "message"), [
    ('"t":0.2,', '"t":1e300,', "$.requests[2].t", "request timestamp 1e+300 s, past the 1e+12 s"),
    ('"t":0.2,', '"t":1.5e12,', "$.requests[2].t", "request timestamp 1.5e+12 s, past"),
    ('"api_time":0.004},{"t":0.1', '"api_time":1e300},{"t":0.1', "$.requests[0].api_time",
     "api_time 1e+300 s, past the 1e+12 s"),
    ('"t":0.1,"type":"subagent"', '"t":1e300,"type":"subagent"', "$.requests[1].t",
     "subagent timestamp 1e+300 s, past"),
    ('"t":0.1,"type":"s"', '"t":1e300,"type":"s"', "$.requests[1].requests[0].t",
     "request timestamp 1e+300 s, past"),
    ('"duration_ms":30', '"duration_ms":1' + "0" * 300, "$.requests[1].duration_ms",
     "`duration_ms` must be at most 1e+15, found a 301-digit number"),
    ('"out":2,"hash_ids":[1,2,3]', '"out":10000001,"hash_ids":[1,2,3]', "$.requests[2].out",
     "`out` must be in 0..10000000, found 10000001"),
])
def test_weka_values_out_of_range_are_located(tmp_path: Path, old: str, new: str, field: str,
                                              message: str) -> None:
    """Times past 1e12 s (Mooncake's 1e15 ms) and lengths past 10,000,000 tokens are TRACE-VALUE
    at the play's file, line and field (a time of 1e300 s overflowed the lowering)."""
    assert old in WEKA_LINE
    (tmp_path / "t.jsonl").write_text("\n" + WEKA_LINE.replace(old, new, 1) + "\n")
    g, found = read_weka(str(tmp_path / "t.jsonl"))
    assert g is None
    (d,) = found
    assert (d.rule, d.file, d.line) == ("TRACE-VALUE", str(tmp_path / "t.jsonl"), 2)
    assert message in d.message and f"`{field}`" in d.message, d.message


def test_relative_inner_times_past_the_bound_are_located(tmp_path: Path) -> None:
    """Under the relative basis an inner request's marker + offset past 1e12 s is refused."""
    line = WEKA_LINE.replace('"t":0.1,"type":"subagent"', '"t":9e11,"type":"subagent"').replace(
        '"t":0.1,"type":"s"', '"t":2e11,"type":"s"').replace('"duration_ms":30', '"duration_ms":1')
    (tmp_path / "t.jsonl").write_text(line + "\n")
    g, found = read_weka(str(tmp_path / "t.jsonl"), basis="relative")
    assert g is None
    (d,) = found
    assert (d.rule, d.line) == ("TRACE-VALUE", 1)
    assert "starts at 1.1e+12 s relative to its marker, past" in d.message
    assert "`$.requests[1].requests[0].t`" in d.message


def test_every_problem_is_listed_not_only_the_first(tmp_path: Path) -> None:
    """Three broken plays in one file: three diagnostics, each on its own line."""
    good = (CASES / "w01_blocking_duration.jsonl").read_text().strip()
    bad = good.replace('"hash_id_scope":"local"', '"hash_id_scope":"global"')
    broken = good.replace('"t":0.0', '"t":-1.0', 1)
    assert bad != good and broken != good
    (tmp_path / "x.jsonl").write_text("\n".join([good, bad, broken, bad]) + "\n")
    g, found = read_weka(str(tmp_path / "x.jsonl"))
    assert g is None
    assert sorted(d.line for d in found if d.line is not None) == [2, 3, 4]


# -- Agentic Mooncake v2 --------------------------------------------------------------------------

HEADER = ('{"schema":"dynamo.agentic_mooncake","version":2,"block_size":4,'
          '"hash_id_scope":"local","source":{"format":"test","digest":"d"}}')


def v2(tmp_path: Path, *rows: str) -> Path:
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join((HEADER, *rows)) + "\n")
    return path


def row(request_id: str, deps: str = "", length: int = 4, play: str = "p") -> str:
    dep = f',"dependencies":[{deps}]' if deps else ""
    return (f'{{"request_id":"{request_id}","play_id":"{play}","session_id":"s","model":"m",'
            f'"input_length":{length},"output_length":1,"hash_ids":[1],"not_before_ms":0.0'
            f'{dep}}}')


def test_v2_rows_read_into_a_graph(tmp_path: Path) -> None:
    """Header and rows: nodes sorted by request id, one play, its root found."""
    path = v2(tmp_path, row("b", '{"request_id":"a","trigger":"completion","delay_ms":5.0,'
                                 '"relation":"sequence"}'), row("a"))
    g, found = read_agentic_mooncake(str(path))
    assert g is not None, found
    assert [n.request_id for n in g.nodes] == ["a", "b"]
    assert g.plays[0].roots == [0]
    assert g.header.source_format == "test"


@pytest.mark.parametrize(("rows", "message"), [
    ((row("a", length=9),), "requires exactly 3 hash_ids, got 1"),
    ((row("a"), row("a")), "duplicates request_id a"),
    ((row("a", '{"request_id":"zz","trigger":"completion","delay_ms":0,'
               '"relation":"sequence"}'),), "references unknown request_id zz"),
    ((row("a", '{"request_id":"b","trigger":"completion","delay_ms":0,"relation":"sequence"}'),
      row("b", '{"request_id":"a","trigger":"completion","delay_ms":0,"relation":"sequence"}')),
     "cycle detected among 2 agentic requests"),
    ((row("a"), row("b", '{"request_id":"a","trigger":"completion","delay_ms":0,'
                         '"relation":"sequence"}', play="q")), "depends on request a in play p"),
    ((row("a", '{"request_id":"a","trigger":"dispatch","delay_ms":0,"relation":"join"}'),),
     "only spawn may be dispatch-triggered"),
    ((row("a", '{"request_id":"b","trigger":"completion","delay_ms":-1,'
               '"relation":"sequence"}'),), "invalid dependency delay -1"),
])
def test_invalid_v2_files_are_refused_with_their_line(tmp_path: Path, rows: tuple[str, ...],
                                                      message: str) -> None:
    """Each v2 problem is one diagnostic naming it (with its line where it has one)."""
    g, found = read_agentic_mooncake(str(v2(tmp_path, *rows)))
    assert g is None
    assert any(message in d.message for d in found), [d.message for d in found]


@pytest.mark.parametrize(("old", "new", "message"), [
    ('"delay_ms":5.0', '"delay_ms":1e300',
     "trace line 3 has dependency delay (on a) 1e+300 ms, past the 1e+15 ms (about 31,700 "
     "years) a trace time may reach"),
    ('"delay_ms":5.0', '"delay_ms":1' + "0" * 400, "trace line 3 has delay_ms of 401 digits"),
    ('"not_before_ms":0.0,', '"not_before_ms":2e15,', "has not_before_ms 2e+15 ms, past"),
    ('"not_before_ms":0.0,', '"not_before_ms":0.0,"recorded_api_time_ms":1e300,',
     "has recorded_api_time_ms 1e+300 ms, past"),
    ('"output_length":1,', '"output_length":10000001,',
     "output_length must be in 0..10000000, found 10000001"),
])
def test_v2_values_out_of_range_are_located(tmp_path: Path, old: str, new: str,
                                            message: str) -> None:
    """A v2 row's delays and times past 1e15 ms and lengths past 10,000,000 tokens are
    TRACE-VALUE at the file and line (a 1e300 ms delay reached the engine's clock unlocated)."""
    dep = '{"request_id":"a","trigger":"completion","delay_ms":5.0,"relation":"sequence"}'
    text = row("b", dep)
    assert old in text
    g, found = read_agentic_mooncake(str(v2(tmp_path, row("a"), text.replace(old, new, 1))))
    assert g is None
    (d,) = found
    assert (d.rule, d.file, d.line) == ("TRACE-VALUE", str(tmp_path / "trace.jsonl"), 3)
    assert message in d.message, d.message


@pytest.mark.parametrize(("ordinals", "line", "message"), [
    ((0, 2**63), 3, "expected 1, found 9223372036854775808 (play q)"),
    ((2**63, 2**63), 2, "expected 0, found 9223372036854775808 (play p)"),
    ((0, None), 3, "source_play_ordinal must be set for every play when it is used (play q "
                   "has none)"),
])
def test_v2_play_ordinals_are_located(tmp_path: Path, ordinals: tuple[int | None, ...],
                                      line: int, message: str) -> None:
    """Out-of-order, huge (2**63) or missing source_play_ordinal values name the line of the
    first row of the play at fault."""
    rows = []
    for name, play, ordinal in (("a", "p", ordinals[0]), ("b", "q", ordinals[1])):
        text = row(name, play=play)
        rows.append(text if ordinal is None else text.replace(
            '"play_id"', f'"source_play_ordinal":{ordinal},"play_id"'))
    g, found = read_agentic_mooncake(str(v2(tmp_path, *rows)))
    assert g is None
    (d,) = found
    assert (d.rule, d.line) == ("TRACE-GRAPH", line)
    assert message in d.message, d.message


def test_legacy_rows_form_plays_by_their_wait_for_edges(tmp_path: Path) -> None:
    """Headerless rows (kvreplay extension): wait_for edges with delay + tool wait; a join
    when several; plays named after their root; the trace block size comes from the config."""
    path = tmp_path / "legacy.jsonl"
    path.write_text("\n".join([
        '{"request_id":"r1","hash_ids":[1],"input_length":4,"output_length":1,"timestamp":5}',
        '{"request_id":"r2","hash_ids":[1,2],"input_length":8,"output_length":1,'
        '"wait_for":["r1"],"delay_ms":3,"tool_wait_ms":2}',
        '{"request_id":"x","hash_ids":[9],"input_length":4,"output_length":1}',
        '{"request_id":"r3","hash_ids":[1],"input_length":4,"output_length":1,'
        '"wait_for":["r1","r2"]}']) + "\n")
    assert read_agentic_mooncake(str(path))[0] is None  # needs the block size
    g, found = read_agentic_mooncake(str(path), legacy_block_size=4)
    assert g is not None, found
    nodes = {n.request_id: n for n in g.nodes}
    assert [(d.request_id, d.delay_ms, d.relation) for d in nodes["r2"].dependencies] == [
        ("r1", 5.0, "sequence")]
    assert {d.relation for d in nodes["r3"].dependencies} == {"join"}
    assert nodes["r1"].not_before_ms == 5.0
    assert {n.play_id for n in g.nodes} == {"legacy-play:r1", "legacy-play:x"}


@pytest.fixture
def five_requests(monkeypatch: pytest.MonkeyPatch) -> int:
    """MAX_REQUESTS scaled down 20,000 times (5 requests stand for 100,000)."""
    from kvreplay.engine.traces.agentic import graph as graphs

    monkeypatch.setattr(graphs, "MAX_REQUESTS", 5)
    return 5


def _tiny_play(i: int, requests: int = 1) -> str:
    turns = ",".join(f'{{"t":{k}.0,"type":"s","model":"m","in":8,"out":2}}'
                     for k in range(requests))
    return (f'{{"id":"p{i}","models":["m"],"block_size":4,"hash_id_scope":"local",'
            f'"requests":[{turns}]}}')


def test_a_weka_corpus_past_the_request_bound_is_refused_while_read(
        five_requests: int, tmp_path: Path) -> None:
    """One play of 6 requests, 6 one-request plays in a JSONL file, and 2 files of 3 that add
    up past the bound: TRACE-VALUE at the play (or line) past it; exactly the bound reads."""
    (tmp_path / "one.json").write_text(_tiny_play(0, five_requests + 1))
    (tmp_path / "many.jsonl").write_text(
        "".join(_tiny_play(i) + "\n" for i in range(five_requests + 1)))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("a", "b"):
        (corpus / f"{name}.jsonl").write_text(_tiny_play(0, 3) + "\n")
    (tmp_path / "fits.jsonl").write_text(
        "".join(_tiny_play(i) + "\n" for i in range(five_requests)))
    for path, line, words in ((tmp_path / "one.json", 1, "past it at play 'p0'"),
                              (tmp_path / "many.jsonl", 6, "holds more than 5 plays"),
                              (corpus, 1, "past it at play 'p0'")):
        g, found = read_weka(str(path))
        assert g is None
        (d,) = found
        assert (d.rule, d.line) == ("TRACE-VALUE", line), d
        assert words in d.message and "more than 5 requests, the most an agentic replay " \
            "takes" in d.message, d.message
    assert d.file == str(corpus / "b.jsonl")
    g, found = read_weka(str(tmp_path / "fits.jsonl"))
    assert g is not None and len(g.nodes) == five_requests, found


def test_a_v2_trace_past_the_request_bound_is_refused_while_read(
        five_requests: int, tmp_path: Path) -> None:
    """A v2 file of 6 rows is TRACE-VALUE at line 7 before any row is parsed; 5 rows read."""
    rows = [row(f"r{i}", play=f"p{i}") for i in range(five_requests + 1)]
    g, found = read_agentic_mooncake(str(v2(tmp_path, *rows)))
    assert g is None
    (d,) = found
    assert (d.rule, d.line) == ("TRACE-VALUE", 7)
    assert "holds more than 5 requests" in d.message
    g, found = read_agentic_mooncake(str(v2(tmp_path, *rows[:-1])))
    assert g is not None, found


@pytest.mark.parametrize(("hashes", "bad"), [
    ([], None), ([0, 7, (1 << 64) - 1], None), ([3, True], 1), ([1, 2, -1], 2),
    ([1 << 64, 5], 0), ([1, 2.0], 1), ([1, "2"], 1), ([False], 0),
])
def test_a_request_s_hash_ids_are_checked_and_the_first_bad_one_named(
        hashes: list[object], bad: int | None) -> None:
    """Plain u64 lists pass in one check; any other names its first bad position."""
    from kvreplay.engine.traces.agentic import weka

    obj = {"t": 0, "type": "s", "model": "m", "in": 64, "out": 1, "hash_ids": hashes}
    if bad is None:
        assert weka._request(obj, "$.requests[0]").hash_ids == hashes
        return
    with pytest.raises(weka._Bad) as caught:
        weka._request(obj, "$.requests[0]")
    assert caught.value.where == f"$.requests[0].hash_ids[{bad}]"
