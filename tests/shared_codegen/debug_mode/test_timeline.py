"""Timelines without a GPU (issue 16, item 3): the PTX of a timeline variant, nothing emitted
when off, decoding a synthetic event buffer, the Chrome trace and the picture, and the
interpreter's logical-clock timeline of a ping-pong between two partitions."""

import json

import numpy as np
import pytest
from debug_kernels import FILE, line_of, ping_pong_kernel

import gluon
import tile.profiler.language as pl
from gluon.timeline import Region, Timeline, decode, load_trace, main
from shared_codegen.frontend.launch import instrumentation
from shared_codegen.frontend.values import builtin

SIGNATURE = {"in_ptr": "*fp32", "out_ptr": "*fp32"}


@pytest.fixture(autouse=True)
def no_disk_cache(monkeypatch):
    monkeypatch.setenv("SC_CACHE_DISABLE", "1")
    monkeypatch.delenv("SC_TIMELINE", raising=False)
    monkeypatch.delenv("SC_TIMELINE_EVENTS", raising=False)


def without_regions(monkeypatch, cache_dir):
    """Make enter_scope / exit_scope add nothing to the IR, as if the kernel had none, and
    start a fresh compilation cache (the source, and so the key, is unchanged)."""
    nothing = builtin(lambda name, _semantic=None: None)
    monkeypatch.setattr(pl, "enter_scope", nothing)
    monkeypatch.setattr(pl, "exit_scope", nothing)
    monkeypatch.delenv("SC_CACHE_DISABLE")
    monkeypatch.setenv("SC_CACHE_DIR", str(cache_dir))


def test_regions_compile_to_nothing_without_a_timeline(monkeypatch, tmp_path):
    with_regions = gluon.compile(ping_pong_kernel, SIGNATURE, {"ROUNDS": 3})
    assert "proton.record" in with_regions.asm["ttgir"]
    without_regions(monkeypatch, tmp_path)
    without = gluon.compile(ping_pong_kernel, SIGNATURE, {"ROUNDS": 3})
    assert "proton.record" not in without.asm["ttgir"]
    assert with_regions.asm["ptx"] == without.asm["ptx"]
    assert "timeline" not in with_regions.metadata


def test_a_timeline_variant_stamps_globaltimer_from_lane_zero_of_each_warp():
    kernel = gluon.compile(ping_pong_kernel, SIGNATURE, {"ROUNDS": 3}, timeline=True)
    ptx = kernel.asm["ptx"]
    assert kernel.metadata["param_kinds"] == ["ptr", "ptr", "ptr"]
    assert kernel.metadata["timeline"] == {
        "regions": ["wait ready", "consume", "wait empty", "produce"], "warps": 8,
        "capacity": 256,
        "partitions": [["default (_consume)", 0, 4], ["worker 0 (_produce)", 4, 1]]} or \
        kernel.metadata["timeline"] == {
        "regions": ["wait ready", "consume", "wait empty", "produce"], "warps": 8,
        "capacity": 256,
        "partitions": [("default (_consume)", 0, 4), ("worker 0 (_produce)", 4, 1)]}
    # 4 regions x 2 ends, each: lane 0 writes the count, then the 16-byte event if it fits.
    assert ptx.count("mov.u64 t, %globaltimer;") == 8
    assert ptx.count("setp.eq.u32 writer, %r") == 8
    assert ptx.count("st.global.v4.u32 [a], {tg, smid, lo, hi};") == 8
    assert ptx.count("setp.lt.u32 fits, %r") == 8
    # The tags: region index << 1 | start.
    assert sorted(int(t) for t in __import__("re").findall(r"mov\.u32 tg, (\d+);", ptx)) == \
        list(range(8))
    assert kernel.asm["cubin"][:4] == b"\x7fELF"


def test_the_timeline_option_and_its_capacity(monkeypatch):
    assert instrumentation(ping_pong_kernel, timeline=True) == (("timeline", 256),)
    monkeypatch.setenv("SC_TIMELINE", "1")
    monkeypatch.setenv("SC_TIMELINE_EVENTS", "64")
    assert instrumentation(ping_pong_kernel) == (("timeline", 64),)
    assert instrumentation(ping_pong_kernel, debug=True, timeline=False) == \
        (("debug", 1000),)


INFO = {"regions": ["load", "mma"], "warps": 2, "capacity": 3,
        "partitions": [["default", 0, 1], ["worker 0", 1, 1]]}


def _events(*events):
    """A warp's area: the count, then (tag, smid, time low, time high) per event."""
    area = np.zeros((INFO["capacity"] + 1, 4), np.uint32)
    area[0, 0] = len(events)
    for i, (region, start, t) in enumerate(events[:INFO["capacity"]]):
        area[1 + i] = [INFO["regions"].index(region) << 1 | start, 7, t & 0xFFFFFFFF, t >> 32]
    return area


def _synthetic():
    t0 = 5 << 32  # a globaltimer past 2^32 ns: the high word counts
    raw = np.stack([
        np.stack([_events(("mma", 1, t0 + 100), ("mma", 0, t0 + 900)),
                  _events(("load", 1, t0), ("load", 0, t0 + 400), ("load", 1, t0 + 500),
                          ("load", 0, t0 + 800))]),  # 4 events, capacity 3: one dropped
        np.stack([_events(("mma", 0, t0 + 50)),  # an end without a start
                  _events(("load", 1, t0 + 1000), ("load", 0, t0 + 1500))]),
    ])
    return decode("k", INFO, (2, 1, 1), raw.reshape(-1))


def test_decoding_a_synthetic_event_buffer():
    t0 = 5 << 32
    timeline = _synthetic()
    assert timeline.regions == [
        Region((0, 0, 0), "default", 0, "mma", t0 + 100, t0 + 900),
        Region((0, 0, 0), "worker 0", 1, "load", t0, t0 + 400),
        Region((1, 0, 0), "worker 0", 1, "load", t0 + 1000, t0 + 1500)]
    # The fourth event of program 0's worker did not fit; its third (a start) has no end.
    assert (timeline.dropped, timeline.unmatched) == (1, 2)


def test_the_chrome_trace_of_a_synthetic_buffer(tmp_path):
    timeline = _synthetic()
    trace = timeline.chrome_trace()
    assert [e for e in trace["traceEvents"] if e["ph"] == "X"] == [
        {"name": "mma", "ph": "X", "pid": 0, "tid": 0, "ts": 0.1, "dur": 0.8,
         "args": {"partition": "default"}},
        {"name": "load", "ph": "X", "pid": 0, "tid": 1, "ts": 0.0, "dur": 0.4,
         "args": {"partition": "worker 0"}},
        {"name": "load", "ph": "X", "pid": 1, "tid": 1, "ts": 1.0, "dur": 0.5,
         "args": {"partition": "worker 0"}}]
    assert {(e["pid"], e.get("tid"), e["args"]["name"]) for e in trace["traceEvents"]
            if e["ph"] == "M"} == {(0, None, "program (0, 0, 0)"), (1, None, "program (1, 0, 0)"),
                                   (0, 0, "default warp 0"), (0, 1, "worker 0 warp 1"),
                                   (1, 1, "worker 0 warp 1")}
    assert trace["otherData"] == {"kernel": "k", "clock": "ns", "dropped_events": 1,
                                  "unmatched_events": 2}
    path = tmp_path / "k.json"
    timeline.save_trace(str(path))
    assert json.loads(path.read_text()) == trace
    # The trace reads back into the same regions, relative to the first event.
    again = load_trace(str(path))
    t0 = 5 << 32
    assert [(r.program, r.partition, r.warp, r.name, r.start, r.end) for r in again.regions] == \
        [(r.program, r.partition, r.warp, r.name, r.start - t0, r.end - t0)
         for r in timeline.regions]


def test_the_picture_and_the_command_line_tool(tmp_path, capsys):
    timeline = _synthetic()
    assert timeline.lanes() == [((0, 0, 0), "default", 0), ((0, 0, 0), "worker 0", 1),
                                ((1, 0, 0), "worker 0", 1)]
    path = tmp_path / "k.json"
    timeline.save_trace(str(path))
    assert main([str(path), "-o", str(tmp_path / "k.png")]) == 0
    assert (tmp_path / "k.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert capsys.readouterr().out == f"{tmp_path / 'k.png'}: 3 regions of k (2 programs, " \
                                      f"clock ns)\n"


def test_the_interpreter_records_the_ping_pong_with_a_logical_clock():
    x = np.arange(3 * 1024, dtype=np.float32)
    out = np.zeros_like(x)
    ping_pong_kernel[(1,)](x, out, 3, timeline=True)
    np.testing.assert_array_equal(out, 2 * x)
    timeline = ping_pong_kernel.last_timeline
    assert isinstance(timeline, Timeline) and timeline.clock == "step"
    assert (timeline.dropped, timeline.unmatched) == (0, 0)
    consumer, producer = "default (_consume)", "worker 0 (_produce)"
    by_lane = {}
    for r in timeline.regions:
        by_lane.setdefault(r.partition, []).append(r.name)
    assert by_lane == {consumer: ["wait ready", "consume"] * 3,
                       producer: ["wait empty", "produce"] * 3}
    # The hand-over: round i's consume starts after its produce ended, and the producer's
    # wait for round i + 1 ends only after the consumer freed the buffer.
    produce = [r for r in timeline.regions if r.name == "produce"]
    consume = [r for r in timeline.regions if r.name == "consume"]
    waits = [r for r in timeline.regions if r.name == "wait empty"]
    for i in range(3):
        assert produce[i].end < consume[i].start
    for i in range(1, 3):
        assert waits[i].end > consume[i - 1].start
    # Every event has its own tick.
    stamps = sorted(t for r in timeline.regions for t in (r.start, r.end))
    assert stamps == list(range(24))


def test_a_region_name_must_be_a_string():
    @gluon.jit
    def bad_region_kernel(out_ptr):
        pl.enter_scope(3)

    with pytest.raises(gluon.CompilationError) as info:
        gluon.compile(bad_region_kernel, {"out_ptr": "*fp32"})
    assert "enter_scope(name): the region name must be a non-empty constexpr string, got 3" \
        in str(info.value)
    assert FILE and line_of  # the kernels module is the one the other tests read
