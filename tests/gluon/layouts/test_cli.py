"""The ``gluon-layouts`` CLI: the two documented examples (docs/layouts.md) word for word,
and errors in the user's terms."""

import pytest

from gluon.layouts.cli import LayoutSyntaxError, main, parse_layout

SHOW_ARGS = ["show", "BlockedLayout([1, 2], [8, 4], [1, 1], [1, 0])", "--shape", "8x8"]

SHOW_GOLDEN = """\
layout: BlockedLayout(size_per_thread=[1, 2], threads_per_warp=[8, 4], warps_per_cta=[1, 1], order=[1, 0])
shape: 8x8
bases:
  - register=1 -> (0, 1)
  - lane=1 -> (0, 2)
    lane=2 -> (0, 4)
    lane=4 -> (1, 0)
    lane=8 -> (2, 0)
    lane=16 -> (4, 0)
  - warp is a size 1 dimension
  - block is a size 1 dimension
 where out dims are: [dim0 (size 8), dim1 (size 8)]
bit matrix (rows: element bits, columns: r=register l=lane w=warp b=block):
        |  r0  l0  l1  l2  l3  l4
dim0[0] |   0   0   0   1   0   0
dim0[1] |   0   0   0   0   1   0
dim0[2] |   0   0   0   0   0   1
dim1[0] |   1   0   0   0   0   0
dim1[1] |   0   1   0   0   0   0
dim1[2] |   0   0   1   0   0   0
element (i, j) -> T<thread>:<register> (thread = 32*warp + lane; '*' = also held elsewhere):
         0     1     2     3     4     5     6     7
   0  T0:0  T0:1  T1:0  T1:1  T2:0  T2:1  T3:0  T3:1
   1  T4:0  T4:1  T5:0  T5:1  T6:0  T6:1  T7:0  T7:1
   2  T8:0  T8:1  T9:0  T9:1 T10:0 T10:1 T11:0 T11:1
   3 T12:0 T12:1 T13:0 T13:1 T14:0 T14:1 T15:0 T15:1
   4 T16:0 T16:1 T17:0 T17:1 T18:0 T18:1 T19:0 T19:1
   5 T20:0 T20:1 T21:0 T21:1 T22:0 T22:1 T23:0 T23:1
   6 T24:0 T24:1 T25:0 T25:1 T26:0 T26:1 T27:0 T27:1
   7 T28:0 T28:1 T29:0 T29:1 T30:0 T30:1 T31:0 T31:1
"""

CONVERT_ARGS = ["convert", "BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])",
                "BlockedLayout([2, 2], [4, 8], [4, 1], [1, 0])", "--shape", "32x16",
                "--dtype", "fp16"]

CONVERT_GOLDEN = """\
src: BlockedLayout(size_per_thread=[1, 4], threads_per_warp=[8, 4], warps_per_cta=[4, 1], order=[1, 0])
dst: BlockedLayout(size_per_thread=[2, 2], threads_per_warp=[4, 8], warps_per_cta=[4, 1], order=[1, 0])
shape: 32x16, dtype: fp16
conversion dst^-1 o src (where each source bit lands in the destination):
  - register=1 -> (1, 0, 0, 0)
    register=2 -> (0, 1, 0, 0)
  - lane=1 -> (0, 2, 0, 0)
    lane=2 -> (0, 4, 0, 0)
    lane=4 -> (2, 0, 0, 0)
    lane=8 -> (0, 8, 0, 0)
    lane=16 -> (0, 16, 0, 0)
  - warp=1 -> (0, 0, 1, 0)
    warp=2 -> (0, 0, 2, 0)
  - block is a size 1 dimension
 where out dims are: [register (size 4), lane (size 32), warp (size 4), block (size 1)]
conversion bit matrix:
            |  r0  r1  l0  l1  l2  l3  l4  w0  w1
register[0] |   1   0   0   0   0   0   0   0   0
register[1] |   0   0   0   0   1   0   0   0   0
    lane[0] |   0   1   0   0   0   0   0   0   0
    lane[1] |   0   0   1   0   0   0   0   0   0
    lane[2] |   0   0   0   1   0   0   0   0   0
    lane[3] |   0   0   0   0   0   1   0   0   0
    lane[4] |   0   0   0   0   0   0   1   0   0
    warp[0] |   0   0   0   0   0   0   0   1   0
    warp[1] |   0   0   0   0   0   0   0   0   1
plan: warp_shuffle  (tensor 32x16, 16-bit elements, 4 warps)
dims that move data: register, lane
2 shuffle round(s), 2 element(s) per 32-bit shuffle
round 0: dst lanes 0-7 read src lanes [0, 4, 1, 5, 2, 6, 3, 7]
  src lanes 0-7 send registers [[0, 1], [0, 1], [0, 1], [0, 1], [2, 3], [2, 3], [2, 3], [2, 3]]
  dst lanes 0-7 write registers [[0, 1], [2, 3], [0, 1], [2, 3], [0, 1], [2, 3], [0, 1], [2, 3]]
round 1: dst lanes 0-7 read src lanes [4, 0, 5, 1, 6, 2, 7, 3]
  src lanes 0-7 send registers [[2, 3], [2, 3], [2, 3], [2, 3], [0, 1], [0, 1], [0, 1], [0, 1]]
  dst lanes 0-7 write registers [[2, 3], [0, 1], [2, 3], [0, 1], [2, 3], [0, 1], [2, 3], [0, 1]]
cost: 2 shuffles per thread, lane-dependent selects
"""


def run(capsys, argv):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_show_example_is_exact(capsys):
    code, out, _ = run(capsys, SHOW_ARGS)
    assert code == 0
    assert out == SHOW_GOLDEN


def test_convert_example_is_exact(capsys):
    code, out, _ = run(capsys, CONVERT_ARGS)
    assert code == 0
    assert out == CONVERT_GOLDEN


def test_who_lists_every_copy(capsys):
    code, out, _ = run(capsys, ["show", "BlockedLayout([1, 2], [4, 8], [1, 1], [1, 0])",
                                "--shape", "4x8", "--who", "2,3"])
    assert code == 0
    assert out.endswith("element (2, 3) is held by 2 location(s):\n"
                        "  warp 0 lane 17 (thread 17) register 1\n"
                        "  warp 0 lane 21 (thread 21) register 1\n")


def test_let_binds_a_parent_layout(capsys):
    code, out, _ = run(capsys, ["show", "SliceLayout(0, p)", "--shape", "16",
                                "--let", "p=BlockedLayout([1, 4], [8, 4], [4, 1], [1, 0])",
                                "--who", "5"])
    assert code == 0
    assert "element (5,) is held by" in out


@pytest.mark.parametrize("text, message", [
    ("BlockedLayout([1, 2], [4, 8], [1, 1)", "cannot parse layout"),
    ("BlockedLayout([1, 3], [4, 8], [1, 1], [1, 0])",
     "BlockedLayout([1, 3], [4, 8], [1, 1], [1, 0]) failed: BlockedLayout: size_per_thread "
     "entries must be powers of two, got [1, 3]"),
    ("__import__('os').system('true')", "is not a layout constructor"),
    ("BlockedLayout([1, 2], [4, 8], [1, 1], order)", "unknown name 'order'"),
    ("BlockedLayout([1, 2], [4, 8], [1, 1], [1, 0]).x", "is not allowed"),
    ("BlockedLayout(\"a\", [4, 8], [1, 1], [1, 0])", ": \"a\" is not allowed"),
])
def test_bad_layout_text_names_the_failing_part(text, message):
    with pytest.raises(LayoutSyntaxError) as info:
        parse_layout(text)
    assert message in str(info.value)


def test_errors_exit_with_code_2_and_a_message(capsys):
    code, out, err = run(capsys, ["show", "Blocked([1])", "--shape", "8x8"])
    assert code == 2 and out == ""
    assert err.startswith("gluon-layouts: error: in 'Blocked([1])': Blocked is not a layout "
                          "constructor")


def test_bad_shape_is_rejected_by_argparse(capsys):
    with pytest.raises(SystemExit):
        main(["show", "BlockedLayout([1], [32], [1], [0])", "--shape", "6x8"])
    assert "powers of two" in capsys.readouterr().err
