"""`tl.distributed` in the interpreter: every primitive on 2, 4 and 8 simulated ranks against
numpy, the deadlock report of a broken signal protocol word for word, and the errors."""

import numpy as np
import pytest

import tile
import tile.language as tl
from shared_codegen.errors import DeadlockError, RaceError
from shared_codegen.frontend.errors import CompilationError
from tile.distributed import SimulatedWorld
from tile.language import distributed as dl

N = 16
WORLD_SIZES = [2, 4, 8]


def _ctx_args(ctx):
    return (ctx.heap_bases, ctx.signal_pad_bases, ctx.signal_pad, ctx.rank, ctx.world_size)


@tile.jit
def ring_put_get(x_ptr, y_ptr, z_ptr, heap_bases, pad_bases, sig_ptr, rank, world_size,
                 N: tl.constexpr):
    # put x to the next rank's y and signal it; after the signal from the previous rank,
    # get the previous rank's x into z, and read y back through the token.
    offs = tl.arange(0, N)
    nxt = (rank + 1) % world_size
    prev = (rank + world_size - 1) % world_size
    dl.put(x_ptr + offs, y_ptr + offs, rank, nxt, heap_bases)
    dl.notify(sig_ptr, nxt, rank, pad_bases)
    token = dl.wait(sig_ptr)
    y = tl.load(dl.consume_token(y_ptr, token) + offs)
    dl.get(x_ptr + offs, z_ptr + offs, prev, rank, heap_bases)
    # and a peer load/store pair: z += prev's x, through load/store on the peer.
    again = dl.load(x_ptr + offs, rank, prev, heap_bases)
    dl.store(z_ptr + N + offs, again + y, rank, rank, heap_bases)


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_put_get_load_store_move_tiles_between_ranks(world_size):
    world = SimulatedWorld(world_size, heap_bytes=1 << 14)
    x = world.empty("x", (N,), np.float32)
    y = world.empty("y", (N,), np.float32)
    z = world.empty("z", (2 * N,), np.float32)
    for r in range(world_size):
        x[r][:] = np.arange(N) + 100 * r
    world.launch(ring_put_get, (1,), lambda c: (x[c.rank], y[c.rank], z[c.rank]) + _ctx_args(c),
                 N=N)
    for r in range(world_size):
        prev = np.arange(N) + 100 * ((r - 1) % world_size)
        np.testing.assert_array_equal(y[r], prev)
        np.testing.assert_array_equal(z[r][:N], prev)
        np.testing.assert_array_equal(z[r][N:], 2 * prev)


@tile.jit
def atomics_on_rank0(counter_ptr, heap_bases, pad_bases, sig_ptr, rank, world_size):
    dl.atomic_add(counter_ptr, rank + 1, rank, 0, heap_bases, sem="relaxed", scope="sys")
    dl.atomic_max(counter_ptr + 1, rank * 3, rank, 0, heap_bases, sem="acq_rel", scope="gpu")
    dl.atomic_or(counter_ptr + 2, 1 << rank, rank, 0, heap_bases, sem="release", scope="sys")
    dl.atomic_min(counter_ptr + 12, 50 - rank, rank, 0, heap_bases, sem="relaxed", scope="gpu")
    dl.atomic_and(counter_ptr + 13, ~(1 << rank), rank, 0, heap_bases, sem="acquire",
                  scope="cta")
    dl.atomic_xor(counter_ptr + 15, 3 << rank, rank, 0, heap_bases, sem="relaxed", scope="sys")
    # A ticket lock: every rank takes ticket `old` exactly once.
    old = dl.atomic_xchg(counter_ptr + 3, rank, rank, 0, heap_bases, sem="acq_rel",
                         scope="sys")
    dl.atomic_add(counter_ptr + 4 + old, 1, rank, 0, heap_bases, sem="relaxed", scope="sys")
    while dl.atomic_cas(counter_ptr + 14, rank, rank + 1, rank, 0, heap_bases, sem="acq_rel",
                        scope="sys") != rank:
        pass


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_atomics_on_a_peer_combine_every_rank(world_size):
    world = SimulatedWorld(world_size, heap_bytes=1 << 12)
    counters = world.empty("counters", (16,), np.int32)
    counters[0][3] = -1 + world_size  # xchg chain starts from an unused ticket
    counters[0][12] = 100
    counters[0][13] = 0xFFFF
    world.launch(atomics_on_rank0, (1,), lambda c: (counters[c.rank],) + _ctx_args(c))
    got = counters[0]
    assert got[0] == sum(range(1, world_size + 1))
    assert got[1] == 3 * (world_size - 1)
    assert got[2] == (1 << world_size) - 1
    assert got[12] == 50 - (world_size - 1)
    assert got[13] == 0xFFFF & ~((1 << world_size) - 1)
    assert got[15] == 1 | (1 << world_size)  # 3 << r for every r: the inner bits cancel
    # every rank's xchg returned one distinct earlier value: world_size tickets of 1.
    assert sorted(got[4:4 + world_size].tolist()) == [1] * world_size
    # the CAS chain passes the token 0 -> 1 -> ... in rank order.
    assert got[14] == world_size
    for r in range(1, world_size):
        assert not counters[r].any()


@tile.jit
def flag_protocol(data_ptr, flag_ptr, out_ptr, heap_bases, pad_bases, sig_ptr, rank,
                  world_size, N: tl.constexpr):
    # Release/acquire through a flag in the heap: rank r writes its data into rank r+1,
    # then sets the flag there with a release store; the receiver spins with acquire loads.
    offs = tl.arange(0, N)
    nxt = (rank + 1) % world_size
    dl.store(data_ptr + offs, tl.full((N,), 7, tl.int32) * (rank + 1), rank, nxt, heap_bases)
    dl.store(flag_ptr, rank + 1, rank, nxt, heap_bases, sem="release", scope="sys")
    while dl.load(flag_ptr, rank, rank, heap_bases, sem="acquire", scope="sys") == 0:
        pass
    seen = dl.load(flag_ptr, rank, rank, heap_bases, sem="relaxed", scope="gpu")
    dl.fence(sem="acq_rel", scope="sys")
    tl.store(out_ptr + offs, tl.load(data_ptr + offs) + seen * 1000)


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_release_store_and_acquire_load_pass_a_flag(world_size):
    world = SimulatedWorld(world_size, heap_bytes=1 << 12)
    data = world.empty("data", (N,), np.int32)
    flag = world.empty("flag", (1,), np.int32)
    out = world.empty("out", (N,), np.int32)
    world.launch(flag_protocol, (1,), lambda c: (data[c.rank], flag[c.rank], out[c.rank])
                 + _ctx_args(c), N=N)
    for r in range(world_size):
        prev = (r - 1) % world_size
        np.testing.assert_array_equal(out[r], np.full(N, 7 * (prev + 1) + 1000 * (prev + 1)))


@tile.jit
def counter_signals(out_ptr, heap_bases, pad_bases, sig_ptr, rank, world_size):
    # Every rank adds 1 to every rank's word 0 and sets word 1 + rank; then waits for all.
    for peer in range(0, world_size):
        dl.notify(sig_ptr, peer, rank, pad_bases, sig_op="add")
        dl.notify(sig_ptr + 1 + rank, peer, rank, pad_bases, signal=rank + 10)
    token = dl.wait(sig_ptr, world_size, cmp="ge")
    last = dl.wait(sig_ptr + world_size, world_size + 9, cmp="eq")
    first = dl.wait(sig_ptr + 1, 9, cmp="gt", sem="relaxed", scope="gpu")
    pid = tl.program_id(0)
    tl.store(out_ptr + 3 * pid, token)
    tl.store(out_ptr + 3 * pid + 1, last)
    tl.store(out_ptr + 3 * pid + 2, first)


@pytest.mark.parametrize("world_size", WORLD_SIZES)
def test_notify_add_and_set_and_wait_tokens(world_size):
    world = SimulatedWorld(world_size, heap_bytes=1 << 12)
    out = world.empty("out", (6,), np.int32)
    world.launch(counter_signals, (2,), lambda c: (out[c.rank],) + _ctx_args(c))
    for r in range(world_size):
        # A program may pass its counter wait before the other program of every rank added.
        assert world_size <= out[r][0] <= 2 * world_size
        assert world_size <= out[r][3] <= 2 * world_size
        assert out[r][[1, 2, 4, 5]].tolist() == [world_size + 9, 10, world_size + 9, 10]
        np.testing.assert_array_equal(world.signal_pads[r][1:1 + world_size],
                                      np.arange(world_size) + 10)
        assert world.signal_pads[r][0] == 2 * world_size  # two programs per rank


@tile.jit
def broken_exchange(heap_bases, pad_bases, sig_ptr, rank, world_size):
    peer = (rank + 1) % world_size
    dl.notify(sig_ptr + rank, peer, rank, pad_bases)
    dl.wait(sig_ptr + rank)  # BUG: rank's own word is set by nobody; the signal came in at rank - 1


def _line_of(text):
    import inspect

    lines, first = inspect.getsourcelines(broken_exchange.fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_a_broken_signal_protocol_is_a_deadlock_naming_rank_signal_and_line():
    world = SimulatedWorld(2, heap_bytes=1 << 12)
    with pytest.raises(DeadlockError) as info:
        world.launch(broken_exchange, (1,), _ctx_args)
    line = _line_of("BUG")
    where = f"{__file__}:{line}"
    source = ("dl.wait(sig_ptr + rank)  # BUG: rank's own word is set by nobody; the signal "
              "came in at rank - 1")
    assert str(info.value) == (
        f"{where}: deadlock: every running program waits on a signal that no running program "
        f"will set (100 polls each with no store to global memory in between)\n"
        f"  rank 0 program (0, 0, 0) at {where} waits until signal 0 of rank 0 == 1; "
        f"it reads 0\n"
        f"      {source}\n"
        f"  rank 1 program (0, 0, 0) at {where} waits until signal 1 of rank 1 == 1; "
        f"it reads 0\n"
        f"      {source}\n"
        f"  0 programs returned")


@tile.jit
def waits_alone(sig_ptr):
    dl.wait(sig_ptr + 3, 2, cmp="ge")


def test_a_wait_that_nothing_else_can_satisfy_outside_a_world():
    pad = np.zeros(8, np.int32)
    with pytest.raises(DeadlockError) as info:
        waits_alone[(1,)](pad)
    assert "deadlock: the program waits until `sig_ptr`[3] >= 2; it reads 0, and no other " \
           "program runs (program id (0, 0, 0))" in str(info.value)


@tile.jit
def atomic_without_sem(x_ptr, heap_bases, rank):
    dl.atomic_add(x_ptr, 1, rank, 0, heap_bases, scope="sys")


@tile.jit
def wait_on_floats(x_ptr):
    dl.wait(x_ptr)


@tile.jit
def bad_bases(x_ptr, rank):
    dl.load(x_ptr, rank, 0, x_ptr)


def test_errors_name_the_builtin_and_parameter():
    x = np.zeros(4, np.int32)
    bases = np.zeros(2, np.int64)
    with pytest.raises(CompilationError, match="distributed.atomic_add: `sem` must be given "
                       "explicitly, one of 'relaxed', 'acquire', 'release', 'acq_rel'"):
        atomic_without_sem[(1,)](x, bases, 0)
    with pytest.raises(CompilationError, match="distributed.wait: a signal is a scalar "
                       "pointer to an int32 word of a signal pad, got"):
        wait_on_floats[(1,)](np.zeros(4, np.float32))
    with pytest.raises(CompilationError, match="distributed.load: `heap_bases` must be a "
                       "pointer to the int64 table of the ranks' base addresses"):
        bad_bases[(1,)](x, 0)


def test_symmetric_tensors_that_do_not_fit_the_heap_are_refused():
    world = SimulatedWorld(2, heap_bytes=1024)
    world.empty("a", (100,), np.float32)
    with pytest.raises(Exception, match=r"SimulatedWorld.empty\('b'\): 800 bytes do not fit "
                       r"the symmetric heap \(512 of 1024 bytes left\); pass a larger "
                       r"heap_bytes"):
        world.empty("b", (200,), np.float32)


@tile.jit
def reads_before_waiting(x_ptr, y_ptr, heap_bases, pad_bases, sig_ptr, rank, world_size,
                         N: tl.constexpr):
    offs = tl.arange(0, N)
    peer = (rank + 1) % world_size
    dl.put(x_ptr + offs, y_ptr + offs, rank, peer, heap_bases)  # PUT
    dl.notify(sig_ptr, peer, rank, pad_bases)
    early = tl.load(y_ptr + offs)  # RACE: read before the wait
    dl.wait(sig_ptr)
    tl.store(x_ptr + offs, early)


def test_a_peer_read_before_the_wait_is_a_race_naming_both_ranks_and_lines():
    world = SimulatedWorld(2, heap_bytes=1 << 12)
    x = world.empty("x", (N,), np.float32)
    y = world.empty("y", (N,), np.float32)
    with pytest.raises(RaceError) as info:
        world.launch(reads_before_waiting, (1,),
                     lambda c: (x[c.rank], y[c.rank]) + _ctx_args(c), N=N)
    import inspect

    lines, first = inspect.getsourcelines(reads_before_waiting.fn)
    put = first + next(i for i, text in enumerate(lines) if "# PUT" in text)
    race = first + next(i for i, text in enumerate(lines) if "# RACE" in text)
    assert str(info.value) == (
        f"{__file__}:{race}: race: a load reads `y`[0] of rank 0, which rank 1 program "
        f"(0, 0, 0) wrote at {__file__}:{put} (a store), and nothing orders the two: no "
        f"release (distributed.notify, a release store or atomic) after that access is "
        f"acquired (distributed.wait, an acquire load or atomic) before this one (rank 0, "
        f"program id (0, 0, 0))\n"
        f"    early = tl.load(y_ptr + offs)  # RACE: read before the wait")


@tile.jit
def programs_hand_over(out_ptr, sig_ptr, pad_bases):
    # Program 0 waits for program 1 of the same launch (one GPU, no world): the launch runs
    # its programs concurrently because the kernel waits.
    pid = tl.program_id(0)
    if pid == 0:
        token = dl.wait(sig_ptr)
        tl.store(out_ptr, token + 41)
    else:
        dl.notify(sig_ptr, 0, 0, pad_bases)


def test_a_wait_in_a_single_launch_runs_the_programs_concurrently():
    out = np.zeros(1, np.int32)
    pad = np.zeros(4, np.int32)
    # Translating rank 0 -> rank 0 adds and subtracts the same base: any table works.
    bases = np.zeros(1, np.int64)
    programs_hand_over[(2,)](out, pad, bases)
    assert out[0] == 42 and pad[0] == 1
